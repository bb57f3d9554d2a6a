// Bridge overhead per turn: the plugin's engine over a real `ctxbox serve`
// against a pass-through JavaScript engine, on the same growing session.
// A turn is what OpenClaw does per turn: assemble(history) then
// commitTurn(the turn's two messages). Prints the median per turn at each
// session size. Run: CTXBOX_BIN=… node test/bench.mjs [engine]

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { readConfig, serveArgs } from "../dist/src/config.js";
import { createEngine } from "../dist/src/engine.js";
import { Sidecar } from "../dist/src/sidecar.js";
import { SessionTracker } from "../dist/src/tracker.js";

const bin = process.env.CTXBOX_BIN;
if (!bin) throw new Error("set CTXBOX_BIN");
const engineName = process.argv[2] ?? "keep-recent";
const sizes = [100, 400, 1600];
const turnsPerSize = 40;

const message = (index) =>
  index % 2 === 0
    ? { role: "user", content: `question ${index}: ${"words of a question ".repeat(10)}`, timestamp: index }
    : {
        role: "assistant",
        content: [{ type: "text", text: `answer ${index}: ${"words of an answer ".repeat(30)}` }],
        api: "openai-completions",
        provider: "fake",
        model: "fake-1",
        usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
        stopReason: "stop",
        timestamp: index,
      };

const passThrough = {
  assemble: async ({ messages }) => ({ messages, estimatedTokens: 0 }),
  commitTurn: async () => ({ status: "committed" }),
};

const sidecar = new Sidecar({ bin, args: serveArgs(readConfig({ engine: engineName, dataDir: mkdtempSync(join(tmpdir(), "ctxbox-bench-")) })) });
const ctxbox = createEngine(sidecar, new SessionTracker(), { engine: engineName, callTimeoutMs: 30_000, ownsCompaction: false, warn: (m) => console.error(m) });

async function turns(engine, session, history, count) {
  const times = [];
  for (let turn = 0; turn < count; turn++) {
    const started = process.hrtime.bigint();
    const assembled = await engine.assemble({ sessionId: session, messages: history, tokenBudget: 1_000_000 });
    if (assembled.messages.length !== history.length) throw new Error("the engine dropped messages under an unlimited budget");
    const added = [message(history.length), message(history.length + 1)];
    await engine.commitTurn({ sessionId: session, advancementKey: `${session}-${history.length}`, messages: added });
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
    history.push(...added);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

console.log(`engine ${engineName}, median of ${turnsPerSize} turns (assemble + commitTurn), ms`);
console.log("messages  pass-through  ctxbox  overhead");
for (const size of sizes) {
  const history = Array.from({ length: size }, (_, index) => message(index));
  const session = `bench-${size}`;
  // First contact sends the whole session once; not counted.
  await ctxbox.assemble({ sessionId: session, messages: history });
  const ctxboxMs = await turns(ctxbox, session, [...history], turnsPerSize);
  const baseMs = await turns(passThrough, session, [...history], turnsPerSize);
  console.log(`${String(size).padStart(8)}  ${baseMs.toFixed(3).padStart(12)}  ${ctxboxMs.toFixed(2).padStart(6)}  ${(ctxboxMs - baseMs).toFixed(2).padStart(8)}`);
}
sidecar.close();

// An OpenClaw plugin's own TypeScript source run in Node, in-process (V8
// compiles it), through the SDK's OpenClaw adapter over the fake host of the
// SDK's tests, on a real session transcript: what each engine call costs
// where OpenClaw runs the plugin, to set beside what the same call costs in
// the sandbox (`ctxbox run … --engine <its build>`, fuel per call at
// `RUST_LOG=ctxbox_host::sandbox::instance=debug`). With `node --cpu-prof`
// it tells which of the plugin's functions those calls spend their time in.
// Each call's time is the CPU time the process spent in it.
//
//   node guest-sdk-ts/bench/openclaw-plugin-in-node.mjs \
//     --plugin DIR [--entry index.ts] [--config JSON] [--window 16000] SESSION.jsonl
//
// SESSION.jsonl is an OpenClaw session transcript (JSONL v3), e.g. one of
// tests/fixtures/sessions/. Needs Node 22.18 or later (module.registerHooks,
// node:sqlite): the Node 26 that guest-sdk-ts/ci.sh installs does. The
// plugin's npm dependencies are installed from its lockfile into a cache
// outside it, as the SDK's tests do;
// its database lives in a temporary state dir. The calls are the ones the
// turn runner makes of an engine that owns compaction with background
// maintenance: `bootstrap` once, `assemble` before every model call (each
// assistant message of the transcript), `afterTurn` and `maintain` when a
// turn ends. The host's model answers at once with the request's first
// characters, three for each token the request allows: the sandbox's
// replays answer with extractive summaries that fill about that cap, and a
// plugin's later work grows with what its summaries hold.
// The transcript's messages are its active branch (the last record and its
// ancestors, as the host reads a JSONL v3 file): user and assistant messages
// and tool results; other records are skipped.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { History } from "../test/fake-host.mjs";
import { fake, loadPlugin, sdkModule } from "../test/openclaw-source.mjs";
import { pluginDependencies } from "../test/openclaw-subject.mjs";

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    plugin: { type: "string" },
    entry: { type: "string", default: "index.ts" },
    config: { type: "string", default: "{}" },
    window: { type: "string", default: "16000" },
  },
});
if (options.plugin === undefined || positionals.length !== 1) {
  process.stderr.write("usage: openclaw-plugin-in-node.mjs --plugin DIR [--entry index.ts] [--config JSON] [--window N] SESSION.jsonl\n");
  process.exit(2);
}
const window = BigInt(options.window);

/** The transcript's content parts as the contract's content blocks. */
function contentBlocks(content) {
  if (typeof content === "string") return [{ tag: "text", val: content }];
  return (content ?? []).flatMap((part) => {
    switch (part.type) {
      case "text":
        return [{ tag: "text", val: part.text ?? "" }];
      case "thinking":
        return [{ tag: "thinking", val: { text: part.thinking ?? "", signature: part.thinkingSignature } }];
      case "toolCall":
        return [{ tag: "tool-call", val: { id: part.id, name: part.name, argumentsJson: JSON.stringify(part.arguments ?? {}) } }];
      case "image":
        return [{ tag: "image", val: { mimeType: part.mimeType, data: part.data } }];
      default:
        return [];
    }
  });
}

/** The transcript record's message as the contract's agent message, or undefined for a record that is not one. */
function agentMessage(record) {
  if (record.type !== "message") return undefined;
  const { message } = record;
  switch (message.role) {
    case "user":
      return { tag: "user", val: { content: contentBlocks(message.content) } };
    case "assistant":
      return {
        tag: "assistant",
        val: {
          content: contentBlocks(message.content),
          model: message.model,
          provider: message.provider,
          usage: undefined,
          stopReason: message.stopReason === "toolUse" ? "tool-use" : message.stopReason === "error" ? "error" : "stop",
          errorMessage: message.errorMessage,
        },
      };
    case "toolResult":
      return {
        tag: "tool-result",
        val: { toolCallId: message.toolCallId, toolName: message.toolName, content: contentBlocks(message.content), isError: message.isError === true, details: undefined },
      };
    default:
      return undefined;
  }
}

/** The records of the transcript's active branch, oldest first. */
function activeBranch(file) {
  const records = readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line))
    .filter((record) => typeof record.id === "string" && record.type !== "session");
  const byId = new Map(records.map((record) => [record.id, record]));
  const branch = [];
  for (let record = records.at(-1); record !== undefined; record = byId.get(record.parentId)) branch.push(record);
  return branch.reverse();
}

const messages = activeBranch(positionals[0])
  .map(agentMessage)
  .filter((message) => message !== undefined);

const pluginDir = path.resolve(options.plugin);
const stateDir = mkdtempSync(path.join(tmpdir(), "ctxbox-plugin-in-node-"));
process.env.OPENCLAW_STATE_DIR = stateDir;
// A plugin without a lockfile has no dependencies to install: its own folder is searched.
const dependencies = existsSync(path.join(pluginDir, "package-lock.json")) ? pluginDependencies(pluginDir) : pluginDir;
const module = await loadPlugin(pluginDir, path.join(pluginDir, options.entry), dependencies);
const { openClawEngine } = await sdkModule("openclaw/index");
// The work a plugin schedules with `setImmediate` runs within the call, as in the sandbox.
const timers = await sdkModule("node/timers");
[globalThis.setImmediate, globalThis.clearImmediate] = [timers.setImmediate, timers.clearImmediate];
// The SDK's console forwards to the host's log; the report goes to stdout itself.
const print = (line) => process.stdout.write(`${line}\n`);

fake.config = options.config;
fake.host.complete = (request) => {
  const asked = request.messages.map((message) => message.text).join("\n");
  const text = asked.slice(0, 3 * request.maxTokens);
  return { text, inputTokens: BigInt(Math.ceil(asked.length / 4)), outputTokens: BigInt(Math.ceil(text.length / 4)), model: "first-characters" };
};
const manifest = JSON.parse(readFileSync(path.join(pluginDir, "openclaw.plugin.json"), "utf8"));
const packageJson = JSON.parse(readFileSync(path.join(pluginDir, "package.json"), "utf8"));
const { engine } = openClawEngine(module, { manifest, packageJson });

const session = { sessionId: "in-node", sessionKey: "agent:main:in-node", sessionFile: "/sessions/in-node.jsonl" };
const runtimeContext = JSON.stringify({ sessionTarget: { agentId: "main", sessionId: session.sessionId, sessionKey: session.sessionKey } });
const background = JSON.stringify({ ...JSON.parse(runtimeContext), allowDeferredCompactionExecution: true });
const entries = [];
/** How many entries the transcript reads see: the current turn's are fenced until it ends. */
let visible = 0;
fake.host.readTranscriptDelta = (cursor) => {
  const from = cursor === undefined ? 0 : Number(cursor);
  const page = entries.slice(from, visible);
  return { tag: "page", val: { cursor: String(from + page.length), entries: page, hasMore: false } };
};
const append = (message) => {
  const at = entries.length;
  entries.push({ id: `e${at}`, parentId: at === 0 ? undefined : `e${at - 1}`, timestampMs: BigInt(Date.UTC(2026, 0, 1) + at * 60_000), message });
};
const history = () => new History([...entries], 256);

/**
 * Milliseconds of CPU each call took, by method: the process's CPU time
 * (`process.cpuUsage`), which is the call's wall time on a quiet machine
 * and, unlike wall time, not stretched by other processes on a loaded one.
 */
const times = new Map();
const timed = async (method, call) => {
  const started = process.cpuUsage();
  await call();
  const { user, system } = process.cpuUsage(started);
  times.set(method, [...(times.get(method) ?? []), (user + system) / 1000]);
};
const assemble = () => timed("assemble", () => engine.assemble(session, history(), { tokenBudget: window, availableTools: [], prompt: "" }));
let turnStart;
const endTurn = async () => {
  if (turnStart === undefined) return;
  visible = entries.length;
  const turn = { prePromptMessageCount: turnStart, isHeartbeat: false, tokenBudget: window, runtimeContext };
  await timed("afterTurn", () => engine.afterTurn(session, history(), turn));
  await timed("maintain", () => engine.maintain(session, history(), "turn", background));
};

await timed("bootstrap", () => engine.bootstrap(session, history()));
let turns = 0;
for (const message of messages) {
  if (message.tag === "user") {
    await endTurn();
    turns += 1;
    turnStart = entries.length;
    visible = entries.length;
    append(message);
    await assemble();
  } else {
    // A model call answers after the user's message or after tool results.
    if (message.tag === "assistant" && entries.at(-1)?.message.tag === "tool-result") await assemble();
    append(message);
  }
}
await endTurn();
await engine.dispose();
rmSync(stateDir, { recursive: true, force: true });

const ms = (value) => value.toFixed(1);
print(`${path.basename(positionals[0])}: ${turns} turns, ${entries.length} messages, window ${window}, Node ${process.version}`);
print("call       | calls | CPU ms: total | mean | max");
for (const [method, list] of times) {
  const total = list.reduce((sum, value) => sum + value, 0);
  print(`${method.padEnd(10)} | ${String(list.length).padStart(5)} | ${ms(total).padStart(13)} | ${ms(total / list.length).padStart(4)} | ${ms(Math.max(...list)).padStart(3)}`);
}

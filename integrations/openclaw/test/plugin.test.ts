// Unit tests of the plugin: configuration, the sync bookkeeping, and the
// supervision of the sidecar against real processes: a missing binary, a
// process that never answers, and (when CTXBOX_BIN names a built ctxbox) the
// real `ctxbox serve`, killed with SIGKILL halfway.

import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { readConfig, serveArgs } from "../src/config.js";
import { createEngine, materialize } from "../src/engine.js";
import { SessionTracker } from "../src/tracker.js";
import { Sidecar } from "../src/sidecar.js";
import type { AgentMessage, ContextEngine } from "../src/types.js";

const CTXBOX_BIN = process.env.CTXBOX_BIN;

/** A conversation with every block kind and a field OpenClaw may add later. */
function conversation(turns: number): AgentMessage[] {
  const messages: AgentMessage[] = [];
  for (let turn = 0; turn < turns; turn++) {
    messages.push({ role: "user", content: `question ${turn} ${"words ".repeat(40)}`, timestamp: turn * 10 });
    messages.push({
      role: "assistant",
      content: [
        { type: "thinking", thinking: `thinking ${turn}`, thinkingSignature: `sig-${turn}` },
        { type: "toolCall", id: `call-${turn}`, name: "read", arguments: { path: `f${turn}` } },
      ],
      api: "openai-completions",
      provider: "fake",
      model: "fake-1",
      usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
      stopReason: "toolUse",
      timestamp: turn * 10 + 1,
      providerReplay: { v: 1, opaque: `state-${turn}` },
    });
    messages.push({
      role: "toolResult",
      toolCallId: `call-${turn}`,
      toolName: "read",
      content: [
        { type: "text", text: `contents ${turn} ${"data ".repeat(40)}` },
        { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
      ],
      isError: false,
      details: { bytes: turn },
      timestamp: turn * 10 + 2,
    });
  }
  return messages;
}

function engineWith(
  sidecar: Sidecar,
  engine: string,
  callTimeoutMs: number,
  warnings: string[] = [],
  ownsCompaction = false,
): ContextEngine {
  return createEngine(sidecar, new SessionTracker(), {
    engine,
    callTimeoutMs,
    ownsCompaction,
    runtimeCompaction: async () => ({ ok: true, compacted: true, reason: "openclaw compacted" }),
    warn: (m) => warnings.push(m),
  });
}

test("the configuration names the key at fault and fills in defaults", () => {
  assert.throws(() => readConfig({}), /config\.engine is required/);
  assert.throws(() => readConfig({ engine: "keep-recent", callTimeoutMs: 5 }), /callTimeoutMs/);
  assert.throws(() => readConfig({ engine: "keep-recent", dataDir: 3 }), /config\.dataDir must be/);
  const config = readConfig({ engine: "keep-recent", dataDir: "/d", configFile: "/c.toml" });
  assert.equal(config.ctxboxBin, "ctxbox");
  assert.deepEqual(serveArgs(config), ["serve", "--engine", "keep-recent", "--data-dir", "/d", "--config", "/c.toml"]);
});

test("a prompt told by reference is rebuilt from OpenClaw's own messages, and checked", () => {
  const messages = conversation(2);
  const note = { role: "custom", customType: "keep-recent", content: "left out", display: false };
  const prompt = materialize([{ insert: note }, { keep: [4, 6] }], messages);
  assert.deepEqual(prompt, [note, messages[4], messages[5]]);
  assert.equal(prompt[1], messages[4], "the very objects OpenClaw gave, not copies");
  assert.throws(() => materialize([{ keep: [0, 7] }], messages), /kept messages 0\.\.7 of 6/);
});

test("a missing ctxbox binary gives legacy answers at once", async () => {
  const sidecar = new Sidecar({ bin: "/nonexistent/ctxbox", args: ["serve"], initialBackoffMs: 50 });
  const warnings: string[] = [];
  const engine = engineWith(sidecar, "keep-recent", 2_000, warnings);
  const messages = conversation(2);
  const started = Date.now();
  const assembled = await engine.assemble({ sessionId: "s", messages, tokenBudget: 100 });
  assert.equal(assembled.messages, messages, "pass-through");
  assert.ok(assembled.estimatedTokens > 0);
  assert.equal((await engine.compact({ sessionId: "s", sessionKey: "k" })).reason, "openclaw compacted", "OpenClaw's own compaction runs");
  assert.deepEqual(await engine.commitTurn({ sessionId: "s", advancementKey: "a", messages }), { status: "committed" });
  assert.equal((await engine.maintain({ sessionId: "s" })).changed, false);
  assert.equal((await engine.bootstrap({ sessionId: "s" })).bootstrapped, false);
  assert.ok(Date.now() - started < 2_000, "no call waited for its timeout");
  assert.ok(warnings.some((warning) => warning.includes("assemble answered without the engine")), warnings.join("\n"));
  sidecar.close();
});

test("a sidecar that never answers costs one call timeout, not a stalled turn", async () => {
  const sidecar = new Sidecar({ bin: process.execPath, args: ["-e", "setInterval(() => {}, 1000)"] });
  const engine = engineWith(sidecar, "keep-recent", 800);
  const messages = conversation(1);
  const started = Date.now();
  const assembled = await engine.assemble({ sessionId: "s", messages });
  const took = Date.now() - started;
  assert.equal(assembled.messages, messages);
  assert.ok(took >= 700 && took < 2_000, `answered after ${took} ms`);
  sidecar.close();
});

test("the real sidecar assembles, commits once, and comes back after SIGKILL", { skip: !CTXBOX_BIN && "set CTXBOX_BIN to a built ctxbox" }, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "ctxbox-plugin-"));
  const args = serveArgs(readConfig({ engine: "keep-recent", dataDir }));
  const sidecar = new Sidecar({ bin: CTXBOX_BIN!, args, initialBackoffMs: 50 });
  const warnings: string[] = [];
  const engine = engineWith(sidecar, "keep-recent", 10_000, warnings);
  const messages = conversation(12);

  const all = await engine.assemble({ sessionId: "s", messages });
  assert.deepEqual(all.messages, messages, "under budget everything is kept, byte for byte");
  const trimmed = await engine.assemble({ sessionId: "s", messages, tokenBudget: 400 });
  assert.ok(trimmed.messages.length < messages.length, `kept ${trimmed.messages.length}`);
  assert.deepEqual(trimmed.messages.at(-1), messages.at(-1), "the newest message survives with its unknown fields");
  assert.ok(
    trimmed.messages.some((message) => message.role === "custom" && message.customType === "keep-recent"),
    "keep-recent says what it left out",
  );

  const turn = conversation(13).slice(-3);
  assert.deepEqual(await engine.commitTurn({ sessionId: "s", advancementKey: "turn-13", messages: turn }), { status: "committed" });
  assert.deepEqual(await engine.commitTurn({ sessionId: "s", advancementKey: "turn-13", messages: turn }), { status: "duplicate" });

  const pid = sidecar.pid;
  assert.ok(pid, "the sidecar runs");
  process.kill(pid, "SIGKILL");
  await new Promise((resolve) => setTimeout(resolve, 100));
  const during = await engine.assemble({ sessionId: "s", messages: [...messages, ...turn] });
  assert.equal(during.messages.length, messages.length + turn.length, "answered (by the sidecar or pass-through)");
  for (let tries = 0; tries < 50 && (!sidecar.pid || sidecar.pid === pid); tries++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.ok(sidecar.pid && sidecar.pid !== pid, "a new sidecar runs");
  assert.deepEqual(
    await engine.commitTurn({ sessionId: "s", advancementKey: "turn-13", messages: turn }),
    { status: "duplicate" },
    "the commit survived the kill",
  );
  const after = await engine.assemble({ sessionId: "s", messages: [...messages, ...turn], tokenBudget: 400 });
  assert.ok(after.messages.length < messages.length, "the engine serves again");
  sidecar.close();
});

test("every other hook OpenClaw may call is served by the real sidecar, not the fallback", { skip: !CTXBOX_BIN && "set CTXBOX_BIN to a built ctxbox" }, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "ctxbox-plugin-hooks-"));
  const sidecar = new Sidecar({ bin: CTXBOX_BIN!, args: serveArgs(readConfig({ engine: "lossless", dataDir })) });
  const warnings: string[] = [];
  // lossless owns compaction, so `compact` goes to the sidecar too.
  const engine = engineWith(sidecar, "lossless", 10_000, warnings, true);
  const messages = conversation(5);
  const earlier = messages.slice(0, 9);
  const session = { sessionId: "hooks", sessionKey: "agent:main:hooks" };

  const assembled = await engine.assemble({ ...session, messages: earlier });
  assert.equal(assembled.messages.length, earlier.length);
  const bootstrapped = await engine.bootstrap(session);
  assert.equal(bootstrapped.bootstrapped, true, JSON.stringify(bootstrapped));
  assert.deepEqual(await engine.ingest({ ...session, message: messages[9] }), { ingested: true });
  assert.deepEqual(await engine.ingestBatch({ ...session, messages: messages.slice(10, 12) }), { ingestedCount: 2 });
  await engine.afterTurn({ ...session, messages: [...messages, ...conversation(6).slice(-3)], prePromptMessageCount: 15 });
  const maintained = await engine.maintain(session);
  assert.equal(typeof maintained.changed, "boolean");
  const compacted = await engine.compact({ ...session, force: true });
  assert.equal(compacted.ok, true, JSON.stringify(compacted));
  assert.notEqual(compacted.reason, "openclaw compacted", "the engine compacted, not OpenClaw's fallback");
  const spawn = await engine.prepareSubagentSpawn({
    parentSessionKey: session.sessionKey,
    childSessionKey: "agent:main:hooks:sub",
    contextMode: "isolated",
  });
  await spawn?.rollback();
  await engine.onSubagentEnded({ childSessionKey: "agent:main:hooks:sub", reason: "completed" });
  await engine.dispose();
  assert.deepEqual(warnings, [], "no call fell back to the legacy-equivalent answer");
  sidecar.close();
});

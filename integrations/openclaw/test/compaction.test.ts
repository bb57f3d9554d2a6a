// Unit tests of compaction under OpenClaw: a compaction OpenClaw requires
// that the engine declines runs OpenClaw's own instead, the turn's budget
// reaches `commitTurn` (so an engine compacts after a turn), and the calls
// that may compact get `compactTimeoutMs`. Against the scripted fake
// sidecar, and with CTXBOX_BIN the real `ctxbox serve` (lossless).

import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { reverseOptions } from "../src/complete.js";
import { DEFAULT_COMPACT_TIMEOUT_MS, readConfig, serveArgs } from "../src/config.js";
import { createEngine, requiredCompaction, turnBudget, type EngineOptions, type RuntimeCompaction } from "../src/engine.js";
import { SessionTracker } from "../src/tracker.js";
import register, { ownsCompactionOf, sharedSidecar, traitsOf } from "../src/index.js";
import { Sidecar } from "../src/sidecar.js";
import { closedAtEnd } from "./closed-at-end.js";
import { fakeSidecar } from "./fake-sidecar-bin.js";
import type { AgentMessage, AgentTool, CompactResult, ContextEngine, LlmCompleteParams, PluginApi, ToolContext } from "../src/types.js";

const CTXBOX_BIN = process.env.CTXBOX_BIN;

const { opened, dirs } = closedAtEnd();

const messages: AgentMessage[] = [
  { role: "user", content: "hello" },
  { role: "assistant", content: [{ type: "text", text: "hi" }] },
];

/** OpenClaw's `delegateCompactionToRuntime`, recording what it is asked. */
function runtimeCompaction(): RuntimeCompaction & { calls: Parameters<RuntimeCompaction>[0][] } {
  const calls: Parameters<RuntimeCompaction>[0][] = [];
  const compact = async (params: Parameters<RuntimeCompaction>[0]): Promise<CompactResult> => {
    calls.push(params);
    return { ok: true, compacted: true, reason: "openclaw compacted", result: { tokensBefore: 30_000, tokensAfter: 4_000 } };
  };
  return Object.assign(compact, { calls });
}

function sidecarOn(bin: string, args: string[] = []): Sidecar {
  const sidecar = new Sidecar({ bin, args, reverse: reverseOptions(undefined) });
  opened.push(sidecar);
  return sidecar;
}

function engineOn(sidecar: Sidecar, options: Partial<EngineOptions> & { warnings?: string[] } = {}): ContextEngine {
  const warnings = options.warnings ?? [];
  return createEngine(sidecar, new SessionTracker(), {
    engine: "lossless",
    callTimeoutMs: 5_000,
    ownsCompaction: true,
    warn: (message) => warnings.push(message),
    ...options,
  });
}

// What OpenClaw 2026.9.6 passes `compact`, by caller (the parts that matter here).
const PREFLIGHT = { force: true, runtimeContext: { trigger: "budget", forceReason: "preflight_required", preflightCompactionTrigger: "tokens" } };
const OVERFLOW = { force: true, runtimeContext: { trigger: "overflow", attempt: 1, maxAttempts: 3 } };
const BUDGET_RECOVERY = { force: true, runtimeContext: { trigger: "budget", attempt: 1, maxAttempts: 3 } };
const TIMEOUT_RECOVERY = { force: true, runtimeContext: { trigger: "timeout_recovery", attempt: 1, maxAttempts: 2 } };
const MANUAL = { force: true, runtimeContext: { trigger: "manual", forceReason: "manual" } };

test("which compactions OpenClaw requires: its preflight and its forced recoveries, not a manual, unforced or unexplained one", () => {
  for (const required of [PREFLIGHT, OVERFLOW, BUDGET_RECOVERY, TIMEOUT_RECOVERY]) {
    assert.equal(requiredCompaction(required), true, JSON.stringify(required));
  }
  // The preflight is required even if `force` did not come along.
  assert.equal(requiredCompaction({ runtimeContext: { forceReason: "preflight_required" } }), true);
  for (const optional of [
    MANUAL,
    { force: true, runtimeContext: { trigger: "manual" } },
    { force: true, runtimeContext: { trigger: "budget", forceReason: "manual" } },
    { force: false },
    {},
    { runtimeContext: { trigger: "budget" } },
    { force: true },
    { force: true, runtimeContext: { trigger: "something-new" } },
  ]) {
    assert.equal(requiredCompaction(optional), false, JSON.stringify(optional));
  }
});

test("a compaction OpenClaw requires that the engine declines runs OpenClaw's own; otherwise the engine's answer stands", async () => {
  const declined = { ok: true, compacted: false, reason: "nothing to compact: everything is in the fresh tail", result: null, failure: null };
  const fake = fakeSidecar({ protocol: 2, compact: declined });
  const runtime = runtimeCompaction();
  const warnings: string[] = [];
  const engine = engineOn(sidecarOn(fake.bin), { runtimeCompaction: runtime, warnings });
  const session = { sessionId: "s1", sessionKey: "agent:main:s1", tokenBudget: 32_000, currentTokenCount: 31_000 };

  for (const [name, caller] of Object.entries({ PREFLIGHT, OVERFLOW, BUDGET_RECOVERY, TIMEOUT_RECOVERY })) {
    const params = { ...session, ...caller };
    const result = await engine.compact(params);
    assert.equal(result.reason, "openclaw compacted", `${name}: OpenClaw's compaction answered`);
    assert.equal(runtime.calls.at(-1), params, `${name}: with OpenClaw's very parameters`);
  }
  assert.equal(runtime.calls.length, 4);
  assert.equal(fake.log().filter((entry) => entry.line.method === "compact").length, 4, "the engine was asked first every time");
  assert.equal(warnings.length, 4);
  assert.match(warnings[0], /ctxbox compact: the engine compacted nothing \(nothing to compact: everything is in the fresh tail\) but OpenClaw requires a compaction \(preflight_required, trigger budget\); OpenClaw's own compaction runs/);
  assert.match(warnings[1], /requires a compaction \(trigger overflow\)/);

  runtime.calls.length = 0;
  for (const caller of [MANUAL, { force: false }, { force: true }]) {
    const result = await engine.compact({ ...session, ...caller });
    assert.deepEqual(result, { ok: true, compacted: false, reason: declined.reason }, "the engine's answer, nulls dropped");
  }
  assert.equal(runtime.calls.length, 0, "OpenClaw's compaction did not run");
  assert.equal(warnings.length, 4);
});

test("an engine that compacts answers a required compaction itself; a failed or timed-out one falls back as before", async () => {
  const compacted = { ok: true, compacted: true, reason: null, result: { summary: "s", tokensBefore: 30_000, tokensAfter: 9_000 }, failure: null };
  const runtime = runtimeCompaction();
  const served = engineOn(sidecarOn(fakeSidecar({ protocol: 2, compact: compacted }).bin), { runtimeCompaction: runtime });
  const result = await served.compact({ sessionId: "s1", sessionKey: "k", ...PREFLIGHT });
  assert.deepEqual(result, { ok: true, compacted: true, result: { summary: "s", tokensBefore: 30_000, tokensAfter: 9_000 } });
  assert.equal(runtime.calls.length, 0);

  const failed = { ok: false, compacted: false, reason: "the summarizer failed", result: null, failure: { kind: "compaction_failure", hint: "retry" } };
  const failing = engineOn(sidecarOn(fakeSidecar({ protocol: 2, compact: failed }).bin), { runtimeCompaction: runtime });
  assert.equal((await failing.compact({ sessionId: "s1", sessionKey: "k", ...MANUAL })).reason, "openclaw compacted", "a failure falls back, even manual");

  // Without OpenClaw's compaction (the plugin outside OpenClaw) a required one says why it cannot.
  const declined = { ok: true, compacted: false, reason: "nothing to compact", result: null, failure: null };
  const alone = engineOn(sidecarOn(fakeSidecar({ protocol: 2, compact: declined }).bin));
  assert.deepEqual(await alone.compact({ sessionId: "s1", sessionKey: "k", ...PREFLIGHT }), {
    ok: false,
    compacted: false,
    reason: "ctxbox could not compact and OpenClaw's compaction is not available",
  });
});

test("an aborted compaction is abandoned on the sidecar and does not run OpenClaw's", async () => {
  const fake = fakeSidecar({ protocol: 2, compact: { ok: true, compacted: true }, delayMs: { compact: 5_000 } });
  const runtime = runtimeCompaction();
  const engine = engineOn(sidecarOn(fake.bin), { runtimeCompaction: runtime, compactTimeoutMs: 10_000 });
  const controller = new AbortController();
  const compacting = engine.compact({ sessionId: "s1", sessionKey: "k", ...PREFLIGHT, abortSignal: controller.signal });
  // Aborted once the sidecar has the request.
  for (let tries = 0; tries < 100 && !fake.log().some((entry) => entry.line.method === "compact"); tries++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const started = Date.now();
  controller.abort();
  const result = await compacting;
  assert.ok(Date.now() - started < 1_000, `answered at the abort (${Date.now() - started} ms)`);
  assert.deepEqual(result, { ok: false, compacted: false, reason: "the compaction was aborted" });
  assert.equal(runtime.calls.length, 0);
  const compactId = fake.log().find((entry) => entry.line.method === "compact")?.line.id;
  for (let tries = 0; tries < 20 && !fake.log().some((entry) => entry.line.method === "cancel"); tries++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.deepEqual(
    fake.log().filter((entry) => entry.line.method === "cancel").map((entry) => entry.line.params?.target),
    [compactId],
    "the sidecar was told to cancel it",
  );
});

test("commitTurn carries the turn's budget from OpenClaw's runtime context", async () => {
  assert.equal(turnBudget({ provider: "fake", modelId: "fake-1", modelContextWindow: 32_000, tokenBudget: 24_000 }), 24_000);
  assert.equal(turnBudget({ modelContextWindow: 32_000 }), 32_000, "else the model's context window");
  assert.equal(turnBudget({ tokenBudget: 1_234.7 }), 1_234, "a whole number of tokens");
  for (const none of [undefined, null, "x", {}, { tokenBudget: 0 }, { tokenBudget: Number.NaN }, { tokenBudget: "32000" }]) {
    assert.equal(turnBudget(none), undefined, JSON.stringify(none));
  }

  const fake = fakeSidecar({ protocol: 2 });
  const engine = engineOn(sidecarOn(fake.bin));
  // What OpenClaw 2026.9.6 passes (its durable turn outbox keeps this runtime context).
  const turn = {
    sessionId: "s1",
    sessionKey: "agent:main:s1",
    advancementKey: "turn-1",
    messages,
    runtimeContext: { provider: "fake", modelId: "fake-1", modelContextWindow: 32_000, tokenBudget: 24_000 },
  };
  assert.deepEqual(await engine.commitTurn(turn), { status: "committed" });
  await engine.commitTurn({ ...turn, advancementKey: "turn-2", runtimeContext: undefined });
  const sent = fake.log().filter((entry) => entry.line.method === "commitTurn").map((entry) => entry.line.params!);
  assert.equal(sent[0].tokenBudget, 24_000);
  assert.ok(!("runtimeContext" in sent[0]), "only the budget, not the runtime context");
  assert.ok(!("tokenBudget" in sent[1]), "no budget when OpenClaw gives none");
});

test("the call that starts the sidecar counts for the sync: after it and a commit, only the new messages are sent", async () => {
  // lossless's summaries stand in for messages by the sidecar's entry ids,
  // which a resend from 0 renews: resending needlessly would make them stop
  // applying.
  const fake = fakeSidecar({ protocol: 2 });
  const engine = engineOn(sidecarOn(fake.bin));
  const turn: AgentMessage[] = [
    { role: "user", content: "and then?" },
    { role: "assistant", content: [{ type: "text", text: "then this" }] },
  ];
  await engine.assemble({ sessionId: "s1", messages });
  await engine.commitTurn({ sessionId: "s1", advancementKey: "t1", messages: turn });
  await engine.assemble({ sessionId: "s1", messages: [...messages, ...turn] });
  await engine.ingest({ sessionId: "s1", message: { role: "user", content: "one more" } });
  await engine.assemble({ sessionId: "s1", messages: [...messages, ...turn, { role: "user", content: "one more" }] });
  const syncs = fake
    .log()
    .filter((entry) => entry.line.method === "assemble")
    .map((entry) => [entry.line.params!.sync.base, entry.line.params!.sync.messages.length]);
  assert.deepEqual(syncs, [[0, 2], [4, 0], [5, 0]]);
});

test("compact, commitTurn and afterTurn get compactTimeoutMs; at its end OpenClaw gets the legacy answer", async () => {
  assert.equal(readConfig({ engine: "lossless" }).compactTimeoutMs, DEFAULT_COMPACT_TIMEOUT_MS);
  assert.equal(DEFAULT_COMPACT_TIMEOUT_MS, 180_000);
  assert.equal(readConfig({ engine: "lossless", compactTimeoutMs: 60_000 }).compactTimeoutMs, 60_000);
  assert.throws(() => readConfig({ engine: "lossless", compactTimeoutMs: 5 }), /config\.compactTimeoutMs must be a number of milliseconds ≥ 100/);
  assert.throws(() => readConfig({ engine: "lossless", compactTimeoutMs: "60000" }), /compactTimeoutMs/);

  // Each method answers after 1.2 s: longer than callTimeoutMs, shorter than compactTimeoutMs.
  const slow = { compact: 1_200, commitTurn: 1_200, afterTurn: 1_200, assemble: 1_200 };
  const fake = fakeSidecar({ protocol: 2, compact: { ok: true, compacted: true, result: { tokensBefore: 2, tokensAfter: 1 } }, delayMs: slow });
  const runtime = runtimeCompaction();
  const warnings: string[] = [];
  const patient = engineOn(sidecarOn(fake.bin), { callTimeoutMs: 600, compactTimeoutMs: 3_000, runtimeCompaction: runtime, warnings });
  assert.deepEqual(await patient.compact({ sessionId: "s1", sessionKey: "k", ...PREFLIGHT }), {
    ok: true,
    compacted: true,
    result: { tokensBefore: 2, tokensAfter: 1 },
  });
  assert.deepEqual(await patient.commitTurn({ sessionId: "s1", advancementKey: "a", messages }), { status: "committed" });
  await patient.afterTurn({ sessionId: "s1", messages, prePromptMessageCount: 1 });
  assert.deepEqual(warnings, [], "all three waited for the sidecar");
  assert.equal(runtime.calls.length, 0);
  const assembled = await patient.assemble({ sessionId: "s2", messages });
  assert.equal(assembled.messages, messages, "assemble keeps callTimeoutMs: pass-through");
  assert.match(warnings.join("\n"), /assemble answered without the engine: assemble timed out after 600 ms/);

  // With a shorter compactTimeoutMs: the legacy answers, each at that timeout.
  warnings.length = 0;
  const hasty = engineOn(sidecarOn(fakeSidecar({ protocol: 2, delayMs: slow }).bin), {
    callTimeoutMs: 5_000,
    compactTimeoutMs: 400,
    runtimeCompaction: runtime,
    warnings,
  });
  let started = Date.now();
  assert.equal((await hasty.compact({ sessionId: "s1", sessionKey: "k", ...PREFLIGHT })).reason, "openclaw compacted");
  assert.ok(Date.now() - started < 1_000, `compact waited ${Date.now() - started} ms`);
  started = Date.now();
  assert.deepEqual(await hasty.commitTurn({ sessionId: "s1", advancementKey: "a", messages }), { status: "committed" });
  assert.ok(Date.now() - started < 1_000, `commitTurn waited ${Date.now() - started} ms`);
  await hasty.afterTurn({ sessionId: "s1", messages, prePromptMessageCount: 1 });
  assert.match(warnings[0], /compact answered without the engine: compact timed out after 400 ms/);
  assert.match(warnings[1], /commitTurn answered without the engine: commitTurn timed out after 400 ms/);
  assert.match(warnings[2], /afterTurn answered without the engine: afterTurn timed out after 400 ms/);
});

test("the plugin's compactTimeoutMs reaches the engine OpenClaw gets", async () => {
  const fake = fakeSidecar({ protocol: 2, compact: { ok: true, compacted: true }, delayMs: { compact: 2_500 } });
  const registered: (() => ContextEngine | Promise<ContextEngine>)[] = [];
  const api: PluginApi = {
    pluginConfig: { engine: "lossless", ctxboxBin: fake.bin, dataDir: fake.dir, callTimeoutMs: 1_500, compactTimeoutMs: 8_000 },
    logger: { warn: () => undefined },
    registerContextEngine: (_id, factory) => registered.push(factory),
    registerTool: (_factory: (ctx: ToolContext) => AgentTool | null) => undefined,
  };
  register(api);
  opened.push(sharedSidecar(readConfig(api.pluginConfig), () => undefined, () => undefined).sidecar);
  const engine = await registered[0]();
  const result = await engine.compact({ sessionId: "s1", sessionKey: "k", ...PREFLIGHT });
  assert.deepEqual(result, { ok: true, compacted: true }, "answered by the sidecar after 2.5 s, past callTimeoutMs");
});

test("whether the engine owns compaction is read from its info, as PROTOCOL.md names it or as ctxbox serve sends it", () => {
  assert.equal(ownsCompactionOf({ id: "lossless", ownsCompaction: true }), true);
  assert.equal(ownsCompactionOf({ id: "lossless", owns_compaction: true }), true);
  assert.equal(ownsCompactionOf({ id: "keep-recent", owns_compaction: false }), false);
  assert.equal(ownsCompactionOf({ id: "x", ownsCompaction: false, owns_compaction: true }), false, "the documented field wins");
  for (const none of [undefined, null, "lossless", {}, { ownsCompaction: "yes" }]) assert.equal(ownsCompactionOf(none), false);
});

test("the engine's turn maintenance mode reaches OpenClaw's info, foreground unless it says background", () => {
  assert.deepEqual(traitsOf({ id: "lossless-claw", ownsCompaction: true, turnMaintenanceMode: "background" }), {
    ownsCompaction: true,
    turnMaintenanceMode: "background",
  });
  for (const info of [{ turnMaintenanceMode: "foreground" }, { turnMaintenanceMode: "later" }, {}, undefined]) {
    assert.equal(traitsOf(info).turnMaintenanceMode, "foreground", JSON.stringify(info));
  }
  const tracker = new SessionTracker();
  const base = { engine: "lossless-claw", callTimeoutMs: 1_000, ownsCompaction: true, warn: () => undefined };
  assert.equal(createEngine(new Sidecar({ bin: "unused", args: [] }), tracker, { ...base, turnMaintenanceMode: "background" }).info.turnMaintenanceMode, "background");
  assert.equal(createEngine(new Sidecar({ bin: "unused", args: [] }), tracker, base).info.turnMaintenanceMode, "foreground");
});

test("with the real sidecar, OpenClaw's engine for lossless owns compaction, and keep-recent's does not", { skip: !CTXBOX_BIN && "set CTXBOX_BIN to a built ctxbox" }, async () => {
  for (const [engineName, owns] of [["lossless", true], ["keep-recent", false]] as const) {
    const dataDir = mkdtempSync(join(tmpdir(), "ctxbox-plugin-info-"));
    dirs.push(dataDir);
    const registered: (() => ContextEngine | Promise<ContextEngine>)[] = [];
    const pluginConfig = { engine: engineName, ctxboxBin: CTXBOX_BIN!, dataDir, callTimeoutMs: 10_000 };
    register({ pluginConfig, registerContextEngine: (_id, factory) => registered.push(factory), registerTool: () => undefined });
    opened.push(sharedSidecar(readConfig(pluginConfig), () => undefined, () => undefined).sidecar);
    const engine = await registered[0]();
    assert.equal(engine.info.ownsCompaction, owns, engineName);
  }
});

test("lossless compacts after a committed turn under OpenClaw's budget, summarizing with the plugin-wide model", { skip: !CTXBOX_BIN && "set CTXBOX_BIN to a built ctxbox" }, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "ctxbox-plugin-commit-"));
  dirs.push(dataDir);
  const calls: LlmCompleteParams[] = [];
  const pluginLlm = {
    complete: async (params: LlmCompleteParams) => {
      calls.push(params);
      return { text: `summary ${calls.length}`, provider: "fake", model: "fake-1", stopReason: "stop" as const };
    },
  };
  const sidecar = new Sidecar({ bin: CTXBOX_BIN!, args: serveArgs(readConfig({ engine: "lossless", dataDir })), reverse: reverseOptions(pluginLlm) });
  opened.push(sidecar);
  const warnings: string[] = [];
  const engine = engineOn(sidecar, { callTimeoutMs: 20_000, compactTimeoutMs: 60_000, warnings });
  const turn = (index: number): AgentMessage[] => [
    { role: "user", content: `question ${index} ${"filler words ".repeat(100)}`, timestamp: index },
    { role: "assistant", content: [{ type: "text", text: `answer ${index} ${"more filler ".repeat(100)}` }], timestamp: index },
  ];
  const history = Array.from({ length: 30 }, (_, index) => turn(index)).flat();
  const session = { sessionId: "committed", sessionKey: "agent:main:committed" };
  await engine.assemble({ ...session, messages: history, tokenBudget: 200_000 });
  assert.equal((await engine.bootstrap(session)).bootstrapped, true);

  // Without a budget the engine stores the turn and compacts nothing.
  assert.deepEqual(await engine.commitTurn({ ...session, advancementKey: "t30", messages: turn(30) }), { status: "committed" });
  assert.equal(calls.length, 0, "no budget, no compaction");
  // OpenClaw's budget for the turn: the context is far past it, so lossless summarizes.
  const runtimeContext = { provider: "fake", modelId: "fake-1", modelContextWindow: 32_000, tokenBudget: 4_000 };
  assert.deepEqual(await engine.commitTurn({ ...session, advancementKey: "t31", messages: turn(31), runtimeContext }), { status: "committed" });
  assert.ok(calls.length > 0, "lossless summarized after the turn");
  assert.ok(calls.every((call) => call.systemPrompt?.startsWith("You summarize conversation history for ctxbox's lossless engine")));
  assert.ok(calls.every((call) => call.purpose === "ctxbox (lossless): summarize"), calls.map((call) => call.purpose).join(", "));
  assert.match(calls[0].messages[0].content, /question 0 /, "the oldest messages first");
  assert.deepEqual(warnings, []);

  const all = [...history, ...turn(30), ...turn(31)];
  const assembled = await engine.assemble({ ...session, messages: all, tokenBudget: 200_000 });
  assert.ok(
    assembled.messages.some((message) => /summary \d+/.test(JSON.stringify(message))),
    `the next prompt holds a summary: ${JSON.stringify(assembled.messages[0]).slice(0, 500)}`,
  );
  assert.ok(!assembled.messages.some((message) => JSON.stringify(message).includes("question 0 ")), "and not the first question");
});

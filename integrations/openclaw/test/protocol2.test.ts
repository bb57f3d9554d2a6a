// Unit tests of protocol 2 on the client side, against the scripted fake
// sidecar (test/fake-sidecar.ts, its own process): the handshake and the
// fallback to a version-1 server, reverse `complete` requests answered with
// OpenClaw's model (session-bound or plugin-wide) and every way they fail,
// the engine's tools as OpenClaw tools, `session-busy` retries, and what of
// OpenClaw's runtime context reaches the sidecar. With CTXBOX_BIN, the real
// `ctxbox serve` too.

import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { reverseOptions } from "../src/complete.js";
import { readConfig, serveArgs } from "../src/config.js";
import { createEngine, safeRuntimeContext } from "../src/engine.js";
import { SessionTracker } from "../src/tracker.js";
import register, { sharedSidecar } from "../src/index.js";
import { BUSY_FIRST_BACKOFF_MS, Sidecar } from "../src/sidecar.js";
import { ToolCatalog, shownNames, toolFactory } from "../src/tools.js";
import { closedAtEnd } from "./closed-at-end.js";
import { fakeSidecar } from "./fake-sidecar-bin.js";
import type { AgentMessage, AgentTool, ContextEngine, LlmCapability, LlmCompleteParams, LlmCompleteResult, PluginApi, ToolContext } from "../src/types.js";

const CTXBOX_BIN = process.env.CTXBOX_BIN;

const { opened, dirs } = closedAtEnd();

/** A stand-in for OpenClaw's `llm.complete` that records what it is asked. */
function model(answer: (params: LlmCompleteParams) => Promise<LlmCompleteResult> | LlmCompleteResult): LlmCapability & {
  calls: LlmCompleteParams[];
} {
  const calls: LlmCompleteParams[] = [];
  return {
    calls,
    complete: async (params) => {
      calls.push(params);
      return answer(params);
    },
  };
}

/** Retries `check` for up to a second: for what the fake logs a moment after the plugin sent it. */
async function eventually(check: () => void, what: string): Promise<void> {
  for (let tries = 0; ; tries++) {
    try {
      return check();
    } catch (error) {
      if (tries >= 20) throw new Error(`${what}: ${error instanceof Error ? error.message : error}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

const answered = (text: string): LlmCompleteResult => ({
  text,
  provider: "fake",
  model: "fake-1",
  stopReason: "stop",
  usage: { inputTokens: 12, outputTokens: 3 },
});

/** A model that answers only when aborted: resolves the time of the abort. */
function hangingModel(): LlmCapability & { aborted: Promise<number> } {
  let abortedAt!: (at: number) => void;
  const aborted = new Promise<number>((resolve) => (abortedAt = resolve));
  return {
    aborted,
    complete: (params) =>
      new Promise((_resolve, reject) => {
        params.signal?.addEventListener("abort", () => {
          abortedAt(Date.now());
          reject(Object.assign(new Error("Prepared model runtime lease admission aborted"), { name: "AbortError" }));
        });
      }),
  };
}

function engineOn(sidecar: Sidecar, callTimeoutMs = 5_000, warnings: string[] = []): ContextEngine {
  return createEngine(sidecar, new SessionTracker(), {
    engine: "lossless",
    callTimeoutMs,
    ownsCompaction: true,
    runtimeCompaction: async () => ({ ok: true, compacted: true, reason: "openclaw compacted" }),
    warn: (message) => warnings.push(message),
  });
}

function sidecarOn(bin: string, pluginLlm?: LlmCapability): Sidecar {
  const sidecar = new Sidecar({ bin, args: [], reverse: reverseOptions(pluginLlm) });
  opened.push(sidecar);
  return sidecar;
}

/** A stand-in for OpenClaw's plugin API: records what the plugin registers. */
function fakeApi(pluginConfig: Record<string, unknown>, llm?: LlmCapability) {
  const registered: { name: string; factory: (ctx: ToolContext) => AgentTool | null }[] = [];
  let engineFactory: (() => ContextEngine | Promise<ContextEngine>) | undefined;
  const api: PluginApi & { registered: typeof registered; engine: () => Promise<ContextEngine> } = {
    pluginConfig,
    logger: { warn: () => undefined },
    runtime: llm ? { llm } : undefined,
    registerContextEngine: (_id, factory) => (engineFactory = factory),
    registerTool: (factory, options) => registered.push({ name: options.name, factory }),
    registered,
    engine: async () => engineFactory!(),
  };
  return api;
}

/** What the fake's reverse request got as its answer, as `compact` reports it. */
async function reverseAnswer(engine: ContextEngine, reverse: object = {}, runtimeContext?: unknown): Promise<any> {
  const result = await engine.compact({
    sessionId: "s1",
    sessionKey: "agent:main:s1",
    force: true,
    customInstructions: JSON.stringify(reverse),
    runtimeContext,
  });
  assert.notEqual(result.reason, "openclaw compacted", "the sidecar answered compact");
  return JSON.parse(result.reason!);
}

const messages: AgentMessage[] = [
  { role: "user", content: "hello" },
  { role: "assistant", content: [{ type: "text", text: "hi" }] },
];

test("hello asks for protocol 2 with the complete capability; a version-1 server is spoken to as before", async () => {
  const old = fakeSidecar({ protocol: 1 });
  const sidecar = sidecarOn(old.bin);
  const warnings: string[] = [];
  const assembled = await engineOn(sidecar, 5_000, warnings).assemble({ sessionId: "s", messages });
  assert.notEqual(assembled.messages, messages, "served by the sidecar, not passed through");
  assert.deepEqual(assembled.messages, messages);
  assert.deepEqual(warnings, []);
  assert.equal(sidecar.protocol, 1);
  const hellos = old.log().filter((entry) => entry.line.method === "hello");
  assert.deepEqual(
    hellos.map((entry) => entry.line.params),
    [{ protocol: 2, client: "ctxbox-openclaw", capabilities: ["complete"] }, { protocol: 1, client: "ctxbox-openclaw" }],
  );
  // No tools with version 1, and the server is not even asked.
  const catalogWarnings: string[] = [];
  const catalog = new ToolCatalog(sidecar, { engine: "lossless", timeoutMs: 2_000, warn: (message) => catalogWarnings.push(message) });
  await catalog.refresh();
  assert.deepEqual(catalogWarnings, []);
  assert.equal(catalog.fresh, true);
  assert.equal(catalog.lookup("grep"), undefined);
  assert.ok(!old.log().some((entry) => entry.line.method === "tools"), "no `tools` request to a version-1 server");

  const current = fakeSidecar({ protocol: 2 });
  const v2 = sidecarOn(current.bin);
  await engineOn(v2).assemble({ sessionId: "s", messages });
  assert.equal(v2.protocol, 2);
  assert.equal(current.log().filter((entry) => entry.line.method === "hello").length, 1);
});

test("a sidecar that speaks no version of ours is refused, and calls get the legacy answer", async () => {
  const future = fakeSidecar({ protocol: 3 });
  const warnings: string[] = [];
  const engine = engineOn(sidecarOn(future.bin), 2_000, warnings);
  const assembled = await engine.assemble({ sessionId: "s", messages });
  assert.equal(assembled.messages, messages, "pass-through");
  assert.match(warnings.join("\n"), /assemble answered without the engine: unsupported-protocol: protocol 2 is not spoken here/);
  assert.equal(future.log().filter((entry) => entry.line.method === "hello").length, 1, "no second try: it does not speak 1 either");
});

test("a reverse complete uses the session-bound model of the call it serves, in bootstrap, maintain and compact", async () => {
  const fake = fakeSidecar({ protocol: 2 });
  const plugin = model(() => answered("plugin-wide summary"));
  const engine = engineOn(sidecarOn(fake.bin, plugin));
  const session = model(() => answered("session summary"));
  const runtimeContext = { llm: session, tokenBudget: 32_000 };

  const answer = await reverseAnswer(engine, {}, runtimeContext);
  assert.deepEqual(answer, {
    id: "srv-1",
    result: { text: "session summary", inputTokens: 12, outputTokens: 3, model: "fake/fake-1" },
  });
  const [asked] = session.calls;
  assert.deepEqual(asked.messages, [{ role: "user", content: "the chunk to summarize" }]);
  assert.equal(asked.systemPrompt, "You summarize for the fake sidecar");
  assert.equal(asked.maxTokens, 64);
  assert.equal(asked.purpose, "ctxbox (lossless): summarize a chunk");
  assert.ok(asked.signal instanceof AbortSignal && !asked.signal.aborted);

  const maintained = await engine.maintain({ sessionId: "s1", runtimeContext });
  assert.equal(JSON.parse(maintained.reason!).result.text, "session summary");
  const bootstrapped = await engine.bootstrap({ sessionId: "s1", runtimeContext });
  assert.equal(JSON.parse(bootstrapped.reason!).result.text, "session summary");
  assert.equal(session.calls.length, 3);
  assert.equal(plugin.calls.length, 0, "the plugin-wide model was not used");
});

test("without a session-bound model the plugin-wide one answers, for engine calls and tool calls alike", async () => {
  const fake = fakeSidecar({ protocol: 2, tools: [{ name: "ask", description: "asks the model", parameters: { type: "object" } }] });
  const plugin = model((params) => answered(`plugin-wide answer to ${params.messages[0].content}`));
  const sidecar = sidecarOn(fake.bin, plugin);
  const answer = await reverseAnswer(engineOn(sidecar), {}, { tokenBudget: 1 });
  assert.equal(answer.result.text, "plugin-wide answer to the chunk to summarize");

  const catalog = new ToolCatalog(sidecar, { engine: "lossless", timeoutMs: 2_000, warn: () => undefined });
  await catalog.refresh();
  const tool = toolFactory("ctxbox_ask", sidecar, catalog, { engine: "lossless", callTimeoutMs: 5_000 })({ sessionId: "s1" });
  assert.ok(tool);
  const result = await tool.execute("call_1", { question: "what now?" });
  assert.deepEqual(result.content, [{ type: "text", text: "plugin-wide answer to what now?" }]);
  assert.equal(plugin.calls.length, 2);
});

test("a reverse complete that cannot be served is answered with the right error code", async () => {
  let behaviour: (params: LlmCompleteParams) => Promise<LlmCompleteResult> = async () => answered("fine");
  const fake = fakeSidecar({ protocol: 2 });
  const engine = engineOn(sidecarOn(fake.bin, model((params) => behaviour(params))));
  const errorOf = async (reverse: object = {}) => (await reverseAnswer(engine, reverse)).error;

  behaviour = async () => {
    throw Object.assign(new Error("No model configured for agent main."), { name: "LlmCompleteError", code: "LLM_COMPLETION_FAILED" });
  };
  assert.deepEqual(await errorOf(), { code: "unavailable", message: "No model configured for agent main." });
  behaviour = async () => {
    throw Object.assign(new Error("Plugin LLM completion cannot override the target model."), { code: "LLM_COMPLETION_NOT_AUTHORIZED" });
  };
  assert.equal((await errorOf()).code, "unavailable");
  behaviour = async () => ({ ...answered(""), stopReason: "error" });
  assert.deepEqual(await errorOf(), { code: "failed", message: 'the model fake/fake-1 failed (OpenClaw reported stopReason "error")' });
  behaviour = async () => answered("   ");
  assert.deepEqual(await errorOf(), { code: "failed", message: "the model fake/fake-1 answered no text" });
  behaviour = async () => {
    throw new Error("provider exploded");
  };
  assert.deepEqual(await errorOf(), { code: "failed", message: "provider exploded" });
  behaviour = async () => answered("fine");
  assert.deepEqual(await errorOf({ params: { messages: [] } }), { code: "failed", message: "complete: `messages` must be a non-empty array" });
  assert.deepEqual(await errorOf({ params: { messages: [{ role: "tool", content: "x" }] } }), {
    code: "failed",
    message: "complete: `messages[0].role` must be system, user or assistant",
  });
  assert.equal((await errorOf({ method: "frobnicate" })).code, "unknown-method");

  const noModel = fakeSidecar({ protocol: 2 });
  const withoutModel = engineOn(sidecarOn(noModel.bin, undefined));
  assert.deepEqual((await reverseAnswer(withoutModel)).error, {
    code: "unavailable",
    message: "OpenClaw offers this plugin no model (api.runtime.llm is missing)",
  });
});

test("a model that does not answer is aborted at the reverse deadline, and other calls go on meanwhile", async () => {
  const fake = fakeSidecar({ protocol: 2 });
  const hanging = hangingModel();
  const engine = engineOn(sidecarOn(fake.bin, hanging));
  const started = Date.now();
  const compacting = reverseAnswer(engine, { deadlineMs: 1_500 });
  await new Promise((resolve) => setTimeout(resolve, 100));
  const assembling = Date.now();
  const assembled = await engine.assemble({ sessionId: "other", messages });
  const waited = Date.now() - assembling;
  assert.ok(waited < 800, `another session's call was answered while the model hung (${waited} ms)`);
  assert.deepEqual(assembled.messages, messages);
  const answer = await compacting;
  const abortedAfter = (await hanging.aborted) - started;
  assert.ok(abortedAfter >= 1_350 && abortedAfter < 2_500, `the model was aborted at the deadline (${abortedAfter} ms)`);
  assert.deepEqual(answer.error, { code: "failed", message: "complete had no answer within its 1500 ms deadline" });
  const answerLine = fake.log().find((entry) => entry.line.id === "srv-1");
  assert.ok(answerLine && answerLine.at - started < 2_500, "answered before the sidecar stopped waiting");
});

test("the sidecar's cancel of a reverse request aborts the model call", async () => {
  const fake = fakeSidecar({ protocol: 2 });
  const hanging = hangingModel();
  const engine = engineOn(sidecarOn(fake.bin, hanging));
  const started = Date.now();
  const answer = await reverseAnswer(engine, { deadlineMs: 5_000, cancelAfterMs: 150 }, { llm: hanging });
  const abortedAfter = (await hanging.aborted) - started;
  assert.ok(abortedAfter >= 100 && abortedAfter < 1_500, `aborted on cancel (${abortedAfter} ms)`);
  assert.equal(answer.error.code, "cancelled");
});

test("a tool's description names the engine's other tools as OpenClaw shows them", () => {
  const names = ["grep", "expand"];
  assert.equal(shownNames("Finds messages; read one with `expand`.", names), "Finds messages; read one with `ctxbox_expand`.");
  // Only the engine's own names, only in backticks: prose and other code stay.
  assert.equal(shownNames("Use grep or `sed`, then `expand` it.", names), "Use grep or `sed`, then `ctxbox_expand` it.");
});

test("engine tools: a factory per declared name, the sidecar's definition for a session, errors thrown for the model", async () => {
  const grep = {
    name: "grep",
    description: "Search the whole conversation",
    parameters: { type: "object", properties: { pattern: { type: "string" } }, required: ["pattern"] },
  };
  const fake = fakeSidecar({
    protocol: 2,
    tools: [grep, { name: "fail", description: "fails", parameters: { type: "object" } }, { name: "hang", description: "hangs", parameters: {} }],
    quarantineOnError: true,
  });
  const api = fakeApi({ engine: "lossless", ctxboxBin: fake.bin, dataDir: fake.dir, callTimeoutMs: 1_500 });
  register(api);
  const { registered } = api;
  const config = readConfig(api.pluginConfig);
  const entry = sharedSidecar(config, () => undefined, () => undefined);
  opened.push(entry.sidecar);
  assert.deepEqual(
    registered.map((tool) => tool.name),
    ["ctxbox_grep", "ctxbox_expand"],
    "the tools openclaw.plugin.json declares",
  );
  const [grepFactory, expandFactory] = registered.map((tool) => tool.factory);
  const session = { sessionId: "s1", sessionKey: "agent:main:s1", agentId: "main" };
  assert.equal(grepFactory(session), null, "not offered before the sidecar was asked");
  await api.engine();
  const tool = grepFactory(session);
  assert.ok(tool, "offered once the sidecar reported it");
  assert.equal(tool.name, "ctxbox_grep");
  assert.equal(tool.description, grep.description);
  assert.deepEqual(tool.parameters, grep.parameters);
  assert.equal(expandFactory(session), null, "the engine offers no expand");
  assert.equal(grepFactory({}), null, "no tool without a session");

  const result = await tool.execute("call_1", { pattern: "needle" }, new AbortController().signal);
  assert.deepEqual(result.content, [{ type: "text", text: 'grep {"pattern":"needle"} in s1/agent:main:s1' }]);
  const sent = fake.log().find((logged) => logged.line.method === "callTool");
  assert.deepEqual(sent?.line.params, { engine: "lossless", sessionId: "s1", sessionKey: "agent:main:s1", name: "grep", arguments: { pattern: "needle" } });

  // A tool the operator declared besides: the same factory, any name.
  const options = { engine: "lossless", callTimeoutMs: 1_500 };
  const hang = toolFactory("ctxbox_hang", entry.sidecar, entry.tools, options)(session)!;
  let started = Date.now();
  await assert.rejects(hang.execute("call_2", {}), /^Error: ctxbox could not run ctxbox_hang: callTool timed out after 1500 ms$/);
  assert.ok(Date.now() - started < 2_500, "within the call timeout");
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 100);
  started = Date.now();
  await assert.rejects(hang.execute("call_3", {}, controller.signal), /ctxbox could not run ctxbox_hang: the call was cancelled/);
  assert.ok(Date.now() - started < 1_000, "abandoned when OpenClaw aborts");
  const hangIds = fake
    .log()
    .filter((logged) => logged.line.method === "callTool" && logged.line.params?.name === "hang")
    .map((logged) => logged.line.id);
  await eventually(
    () => assert.deepEqual(fake.log().filter((logged) => logged.line.method === "cancel").map((logged) => logged.line.params?.target), hangIds),
    "both were cancelled on the sidecar",
  );

  const fail = toolFactory("ctxbox_fail", entry.sidecar, entry.tools, options)(session)!;
  await assert.rejects(fail.execute("call_4", {}), /^Error: the engine failed in fail: boom$/);
  await entry.tools.refresh();
  assert.equal(grepFactory(session), null, "after a failure the list is asked again: the quarantined engine offers nothing");
});

test("every copy of the plugin module OpenClaw loads shares one sidecar per configuration", async () => {
  const fake = fakeSidecar({ protocol: 2, tools: [{ name: "grep", description: "search", parameters: { type: "object" } }] });
  const pluginConfig = { engine: "lossless", ctxboxBin: fake.bin, dataDir: fake.dir };
  // OpenClaw's context-engine registry and its tool registry each load the module.
  const engines = fakeApi(pluginConfig);
  register(engines);
  const copy = (await import(new URL("../src/index.js?registry=tools", import.meta.url).href)) as { default: typeof register };
  assert.notEqual(copy.default, register, "a second copy of the module");
  const tools = fakeApi(pluginConfig);
  copy.default(tools);
  opened.push(sharedSidecar(readConfig(pluginConfig), () => undefined, () => undefined).sidecar);

  const engine = await engines.engine();
  await engine.assemble({ sessionId: "s1", messages });
  const grep = tools.registered[0].factory({ sessionId: "s1" });
  assert.ok(grep, "the tools' copy sees the list the engine's copy asked for");
  await grep.execute("call_1", { pattern: "x" });
  assert.equal(fake.log().filter((entry) => entry.line.method === "hello").length, 1, "one sidecar process");
});

test("session-busy is retried with growing pauses within the call's deadline, then answered the legacy way", async () => {
  const fake = fakeSidecar({ protocol: 2, busy: { soon: 2, never: 1_000 } });
  const warnings: string[] = [];
  const engine = engineOn(sidecarOn(fake.bin), 1_500, warnings);
  const served = await engine.assemble({ sessionId: "soon", messages });
  assert.notEqual(served.messages, messages, "the engine served it after the retries");
  assert.deepEqual(served.messages, messages);
  assert.deepEqual(warnings, []);
  const times = (session: string) =>
    fake
      .log()
      .filter((entry) => entry.line.method === "assemble" && entry.line.params?.sessionId === session)
      .map((entry) => entry.at);
  const soon = times("soon");
  assert.equal(soon.length, 3);
  assert.ok(soon[1] - soon[0] >= BUSY_FIRST_BACKOFF_MS - 5, `first pause ${soon[1] - soon[0]} ms`);
  assert.ok(soon[2] - soon[1] >= 2 * BUSY_FIRST_BACKOFF_MS - 5, `second pause ${soon[2] - soon[1]} ms`);

  const started = Date.now();
  const legacy = await engine.assemble({ sessionId: "never", messages });
  const took = Date.now() - started;
  assert.equal(legacy.messages, messages, "pass-through once the time is up");
  assert.ok(took < 1_500, `within the call timeout (${took} ms)`);
  const never = times("never");
  assert.ok(never.length >= 4, `retried ${never.length} times`);
  assert.match(warnings.join("\n"), /assemble answered without the engine: session-busy: .*\(tried \d+ times in \d+ ms\)/);
});

test("an overloaded sidecar is retried like a busy session", async () => {
  const fake = fakeSidecar({ protocol: 2, busy: { crowded: 2 }, busyCode: "overloaded" });
  const warnings: string[] = [];
  const engine = engineOn(sidecarOn(fake.bin), 1_500, warnings);
  const served = await engine.assemble({ sessionId: "crowded", messages });
  assert.notEqual(served.messages, messages, "the engine served it after the retries");
  assert.deepEqual(served.messages, messages);
  assert.deepEqual(warnings, []);
  const tries = fake.log().filter((entry) => entry.line.method === "assemble").length;
  assert.equal(tries, 3);
});

test("only the chosen JSON fields of the runtime context reach the sidecar: never the config, its API keys or functions", async () => {
  const fake = fakeSidecar({ protocol: 2 });
  const engine = engineOn(sidecarOn(fake.bin, model(() => answered("x"))));
  const runtimeContext = {
    config: { models: { providers: { fake: { apiKey: "sk-test-SECRET-KEY", baseUrl: "http://127.0.0.1:1" } } } },
    llm: model(() => answered("session")),
    rewriteTranscriptEntries: async () => ({ changed: false }),
    abortSignal: new AbortController().signal,
    extraSystemPrompt: "PRIVATE-PROMPT",
    senderId: "+15550001",
    ownerNumbers: ["+15550002"],
    sessionEntry: { secret: "SESSION-ENTRY" },
    promptCache: { retention: "short" },
    sessionTarget: { agentId: "main", sessionId: "s1", sessionKey: "agent:main:s1", storePath: "/home/u/.openclaw/STORE-PATH.sqlite" },
    trigger: "manual",
    forceReason: "manual",
    currentTokenCount: 1_234,
    tokenBudget: 32_000,
    attempt: 1,
    maxAttempts: 3,
    provider: "fake",
    modelId: "fake-1",
    modelContextWindow: 32_000,
    cwd: "/work",
    workspaceDir: "/work",
  };
  const expected = {
    trigger: "manual",
    forceReason: "manual",
    currentTokenCount: 1_234,
    tokenBudget: 32_000,
    attempt: 1,
    maxAttempts: 3,
    provider: "fake",
    modelId: "fake-1",
    modelContextWindow: 32_000,
    cwd: "/work",
    workspaceDir: "/work",
    sessionTarget: { agentId: "main", sessionId: "s1", sessionKey: "agent:main:s1" },
  };
  await reverseAnswer(engine, {}, runtimeContext);
  await engine.maintain({ sessionId: "s1", runtimeContext });
  await engine.afterTurn({ sessionId: "s1", messages, prePromptMessageCount: 1, runtimeContext });
  await engine.bootstrap({ sessionId: "s1", runtimeContext });
  const raw = fake.raw();
  for (const secret of ["sk-test-SECRET-KEY", "PRIVATE-PROMPT", "+1555000", "SESSION-ENTRY", "STORE-PATH", "retention"]) {
    assert.ok(!raw.includes(secret), `${secret} never reaches the sidecar`);
  }
  const sent = fake.log().filter((entry) => entry.line.params?.runtimeContext);
  assert.deepEqual(
    sent.map((entry) => entry.line.method),
    ["compact", "maintain", "afterTurn"],
  );
  for (const entry of sent) assert.deepEqual(entry.line.params!.runtimeContext, expected, entry.line.method);
  assert.equal(safeRuntimeContext(undefined), undefined);
  assert.equal(safeRuntimeContext("text"), undefined);
  assert.equal(safeRuntimeContext({ config: { apiKey: "k" } }), undefined, "nothing chosen, nothing sent");
  assert.equal(safeRuntimeContext({ tokenBudget: Number.NaN, trigger: { nested: true } }), undefined, "only JSON scalars");
});

test("the real sidecar agrees on the newest protocol both speak, and lists lossless's tools with 2", { skip: !CTXBOX_BIN && "set CTXBOX_BIN to a built ctxbox" }, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "ctxbox-plugin-v2-"));
  dirs.push(dataDir);
  const sidecar = new Sidecar({
    bin: CTXBOX_BIN!,
    args: serveArgs(readConfig({ engine: "lossless", dataDir })),
    reverse: reverseOptions(model(() => answered("a summary"))),
  });
  opened.push(sidecar);
  const warnings: string[] = [];
  const catalog = new ToolCatalog(sidecar, { engine: "lossless", timeoutMs: 10_000, warn: (message) => warnings.push(message) });
  await catalog.refresh();
  assert.deepEqual(warnings, []);
  assert.ok(sidecar.protocol === 1 || sidecar.protocol === 2, `protocol ${sidecar.protocol}`);
  if (sidecar.protocol === 1) {
    assert.equal(catalog.lookup("grep"), undefined, "version 1: no tools");
  } else {
    for (const name of ["grep", "expand"]) {
      const tool = catalog.lookup(name);
      assert.ok(tool, `lossless offers ${name}`);
      assert.equal(tool.parameters.type, "object");
    }
  }
});

// The OpenClaw plugin adapter (src/openclaw/) with small plugins written
// here: registration, the api object, each engine export mapped to the
// OpenClaw engine method, assemble answers as keep/insert items, tools,
// the runtime's model and compaction through the (fake) host.
import assert from "node:assert/strict";
import { test } from "node:test";
import { History } from "./fake-host.mjs";
import { fake, sdkModule } from "./openclaw-source.mjs";

const { openClawEngine, itemsAgainstHistory, pluginDefinition } = await sdkModule("openclaw/index");
const { entryToOpenClaw, fromOpenClaw, toOpenClaw } = await sdkModule("openclaw/messages");
const core = await sdkModule("openclaw/plugin-sdk/core");

const text = (value) => [{ tag: "text", val: value }];
const user = (value) => ({ tag: "user", val: { content: text(value) } });
const assistant = (value) => ({
  tag: "assistant",
  val: { content: text(value), model: "m", provider: "p", usage: undefined, stopReason: "stop", errorMessage: undefined },
});
const entry = (at, message) => ({ id: `e${at}`, parentId: at === 0 ? undefined : `e${at - 1}`, timestampMs: BigInt(1_000 + at), message });
const conversation = (...messages) => messages.map((message, at) => entry(at, message));
const session = { sessionId: "s1", sessionKey: "agent:main:s1", sessionFile: "/sessions/s1.jsonl" };
const manifest = { id: "echo-claw", name: "Echo Claw", contracts: { tools: ["echo_recall"] } };
const packageJson = { name: "echo-claw", version: "1.2.3" };

/**
 * A plugin keeping what it is given in `seen`: its engine assembles a
 * made-up summary and the last two messages, compacts by asking the
 * runtime's model (or, when told, the host's native compaction), and offers
 * one tool reading what it ingested.
 */
function echoPlugin(seen = { calls: [], ingested: [] }) {
  const engine = {
    info: { id: "echo-claw", name: "Echo engine", version: "9", ownsCompaction: true, acceptedHostParams: ["sessionKey", "runtimeContext"], turnMaintenanceMode: "background" },
    async bootstrap(params) {
      seen.calls.push(["bootstrap", params]);
      return { bootstrapped: true, importedMessages: params.messages.length };
    },
    async ingest(params) {
      seen.ingested.push(params.message);
      return { ingested: true };
    },
    async assemble(params) {
      seen.calls.push(["assemble", params]);
      const summary = { role: "user", content: `summary of ${params.messages.length - 2} messages`, timestamp: 0 };
      return { messages: [summary, ...params.messages.slice(-2)], estimatedTokens: 42.7, systemPromptAddition: "engine note" };
    },
    async afterTurn(params) {
      seen.calls.push(["afterTurn", params]);
      seen.ingested.push(...params.messages.slice(params.prePromptMessageCount));
    },
    async compact(params) {
      seen.calls.push(["compact", params]);
      if (params.customInstructions === "delegate") return core.delegateCompactionToRuntime(params);
      const answer = await seen.api.runtime.llm.complete({
        messages: [{ role: "user", content: "summarize please" }],
        systemPrompt: "be brief",
        maxTokens: 50,
        purpose: "echo summary",
      });
      return { ok: true, compacted: true, result: { summary: answer.text, tokensBefore: 100, tokensAfter: 150, details: { by: answer.model } } };
    },
  };
  return {
    seen,
    module: {
      default: {
        id: "echo-claw",
        register(api) {
          seen.api = api;
          api.registerContextEngine("echo-claw", () => engine);
          api.registerTool(
            (ctx) => ({
              name: "echo_recall",
              label: "Echo recall",
              description: "Finds ingested messages",
              parameters: { type: "object", properties: { query: { type: "string" } }, [Symbol.for("TypeBox.Kind")]: "Object" },
              async execute(toolCallId, params) {
                seen.calls.push(["tool", toolCallId, ctx, params]);
                const found = seen.ingested.filter((message) => JSON.stringify(message.content).includes(params.query));
                return { content: [{ type: "text", text: `${found.length} found` }], details: { found: found.length } };
              },
            }),
            { name: "echo_recall" },
          );
          api.registerTool({ name: "undeclared", execute: () => ({}) });
          api.on("before_prompt_build", () => ({ prependSystemContext: "Recall with echo_recall." }));
          api.on("gateway_start", () => seen.calls.push(["gateway_start"]));
          api.on("gateway_stop", () => seen.calls.push(["gateway_stop"]));
          api.registerCommand({ name: "echo", handler: () => ({ text: "no" }) });
        },
      },
    },
  };
}

test("the plugin registers on the first call and its engine's info is the contract's", () => {
  const { module, seen } = echoPlugin();
  fake.config = JSON.stringify({ threshold: 0.5 });
  const { engine } = openClawEngine(module, { manifest, packageJson });
  assert.equal(seen.api, undefined, "nothing of the plugin runs before a call");
  assert.deepEqual(engine.info(), {
    id: "echo-claw",
    name: "Echo engine",
    version: "9",
    ownsCompaction: true,
    acceptedHostParams: ["session-key", "runtime-context"],
    turnMaintenanceMode: "background",
  });
  assert.deepEqual(seen.api.pluginConfig, { threshold: 0.5 });
  assert.deepEqual(seen.api.config.plugins.entries["echo-claw"].config, { threshold: 0.5 });
  assert.deepEqual(seen.api.runtime.config.current(), seen.api.config);
  assert.equal(seen.api.id, "echo-claw");
  assert.deepEqual(seen.calls, [["gateway_start"]]);
  assert.ok(fake.logs.some(({ level, message }) => level === "error" && /contracts\.tools for: undeclared/.test(message)));
  assert.ok(fake.logs.some(({ message }) => message === "[echo-claw] registered, never called in the sandbox: registerCommand"));
});

/** The engine configuration that lets a plugin's conversation hooks run, as OpenClaw's `hooks.allowConversationAccess` does. */
const HOOKS_ALLOWED = JSON.stringify({ hooks: { allowConversationAccess: true } });

test("assemble: history messages the engine answers are kept, the others inserted; hook and engine text reach the system prompt", async () => {
  fake.config = HOOKS_ALLOWED;
  const { module, seen } = echoPlugin();
  const { engine } = openClawEngine(module, { manifest, packageJson });
  const history = new History(conversation(user("one"), assistant("two"), user("three"), assistant("four")));
  const result = await engine.assemble(session, history, { tokenBudget: 1000n, availableTools: ["echo_recall"], prompt: "five" });
  assert.deepEqual(result.items, [
    { tag: "insert", val: user("summary of 2 messages") },
    { tag: "keep", val: { start: 2, end: 4 } },
  ]);
  assert.equal(result.estimatedTokens, 42n);
  assert.equal(result.systemPromptAddition, "Recall with echo_recall.\n\nengine note");
  const [, params] = seen.calls.find(([name]) => name === "assemble");
  assert.equal(params.sessionKey, "agent:main:s1");
  // The hook's text is outside OpenClaw's engine budget: the engine gets the budget less its tokens (7, the fake host's estimate).
  assert.equal(params.tokenBudget, 993);
  assert.deepEqual([...params.availableTools], ["echo_recall"]);
  assert.deepEqual(params.messages[1], { ...entryToOpenClaw(history.entries[1]) });
  assert.equal(params.messages[0].timestamp, 1000);
});

test("a hook text over half the budget is left out, and the engine has the whole budget", async () => {
  fake.config = HOOKS_ALLOWED;
  const { module, seen } = echoPlugin();
  const { engine } = openClawEngine(module, { manifest, packageJson });
  const original = fake.host.estimateTokens;
  fake.host.estimateTokens = (entries) => (entries[0]?.id === "hook" ? 600n : original(entries));
  try {
    const result = await engine.assemble(session, new History(conversation(user("one"))), { tokenBudget: 1000n, availableTools: [] });
    assert.equal(result.systemPromptAddition, "engine note");
    assert.equal(seen.calls.find(([name]) => name === "assemble")[1].tokenBudget, 1000);
    assert.ok(fake.logs.some(({ level, message }) => level === "warn" && /before_prompt_build text \(~600 tokens\) left out/.test(message)));
  } finally {
    fake.host.estimateTokens = original;
  }
});

test("a conversation hook is blocked unless the engine's configuration allows it, as OpenClaw blocks it for a plugin it did not bundle", async () => {
  fake.config = JSON.stringify({ threshold: 0.5 });
  fake.logs.length = 0;
  const { module, seen } = echoPlugin();
  const { engine } = openClawEngine(module, { manifest, packageJson });
  const result = await engine.assemble(session, new History(conversation(user("one"))), { tokenBudget: 1000n, availableTools: [] });
  assert.equal(result.systemPromptAddition, "engine note", "the hook's text is not in the prompt");
  assert.deepEqual(seen.calls.filter(([name]) => name === "gateway_start"), [["gateway_start"]], "gateway_start, not a conversation hook, ran");
  assert.ok(
    fake.logs.some(({ level, message }) => level === "warn" && /typed hook "before_prompt_build" blocked/.test(message) && /hooks\.allowConversationAccess = true/.test(message)),
    JSON.stringify(fake.logs),
  );
});

test("keep ranges follow the history's order: a message moved earlier is inserted", () => {
  const entries = conversation(user("a"), assistant("b"), user("c"), user("a"));
  const items = itemsAgainstHistory(entries, [
    toOpenClaw(user("c"), 0),
    toOpenClaw(user("a"), 0),
    toOpenClaw(assistant("b"), 0),
  ]);
  // "c" and the second "a" are entries 2 and 3, one range; "b" (entry 1) would go back.
  assert.deepEqual(items, [
    { tag: "keep", val: { start: 2, end: 4 } },
    { tag: "insert", val: fromOpenClaw(toOpenClaw(assistant("b"), 0)) },
  ]);
});

test("bootstrap, ingestBatch and afterTurn hand the engine OpenClaw messages", async () => {
  const { module, seen } = echoPlugin();
  const { engine } = openClawEngine(module, { manifest, packageJson });
  const history = new History(conversation(user("hello"), assistant("hi"), user("more"), assistant("sure")));
  assert.deepEqual(await engine.bootstrap(session, history), { bootstrapped: true, importedMessages: 4, reason: undefined });
  // The engine has no ingestBatch: OpenClaw ingests one by one.
  assert.deepEqual(await engine.ingestBatch(session, history.entries.slice(0, 2), false), { ingestedCount: 2 });
  await engine.afterTurn(session, history, {
    prePromptMessageCount: 2,
    isHeartbeat: false,
    tokenBudget: 500n,
    runtimeContext: JSON.stringify({ sessionTarget: { sessionKey: "agent:main:s1", sessionId: "s1" }, currentTokenCount: 7 }),
  });
  const [, params] = seen.calls.find(([name]) => name === "afterTurn");
  assert.equal(params.prePromptMessageCount, 2);
  assert.equal(params.tokenBudget, 500);
  assert.deepEqual(params.sessionTarget, { sessionKey: "agent:main:s1", sessionId: "s1" });
  assert.equal(params.runtimeContext.currentTokenCount, 7);
  assert.deepEqual(
    seen.ingested.map((message) => [message.role, message.content[0].text]),
    [["user", "hello"], ["assistant", "hi"], ["user", "more"], ["assistant", "sure"]],
  );
});

test("an assemble of a session the plugin was never bootstrapped for bootstraps it first, once for every instance of the engine", async () => {
  const names = (seen) => seen.calls.map(([name]) => name).filter((name) => name === "bootstrap" || name === "assemble");
  const history = new History(conversation(user("hello"), assistant("hi"), user("more")));
  const params = { tokenBudget: 1000n, availableTools: [] };
  const sessionNamed = (id) => ({ sessionId: id, sessionKey: `agent:main:${id}`, sessionFile: `/sessions/${id}.jsonl` });
  fake.state.clear();

  // A session never bootstrapped: bootstrap with the history, once.
  const fresh = echoPlugin();
  const { engine } = openClawEngine(fresh.module, { manifest, packageJson });
  await engine.assemble(sessionNamed("new"), history, params);
  await engine.assemble(sessionNamed("new"), history, params);
  assert.deepEqual(names(fresh.seen), ["bootstrap", "assemble", "assemble"]);
  const [, bootstrap] = fresh.seen.calls.find(([name]) => name === "bootstrap");
  assert.deepEqual(bootstrap.messages.map((message) => message.role), ["user", "assistant", "user"]);
  assert.equal(bootstrap.sessionKey, "agent:main:new");

  // Another instance of the engine (a replacement, a restart) knows it was done.
  const replacement = echoPlugin();
  await openClawEngine(replacement.module, { manifest, packageJson }).engine.assemble(sessionNamed("new"), history, params);
  assert.deepEqual(names(replacement.seen), ["assemble"]);

  // The host's own bootstrap counts; an empty history (no transcript yet) bootstraps nothing.
  const hosted = echoPlugin();
  const second = openClawEngine(hosted.module, { manifest, packageJson }).engine;
  await second.bootstrap(sessionNamed("hosted"), history);
  await second.assemble(sessionNamed("hosted"), history, params);
  await second.assemble(sessionNamed("empty"), new History([]), params);
  assert.deepEqual(names(hosted.seen), ["bootstrap", "assemble", "assemble"]);

  // A bootstrap that fails is logged, and the assemble goes on (OpenClaw warns and runs the turn).
  fake.logs.length = 0;
  const assembled = [];
  const failing = {
    default: {
      id: "echo-claw",
      register(api) {
        api.registerContextEngine("echo-claw", () => ({
          info: { id: "echo-claw", ownsCompaction: true },
          async bootstrap() {
            throw new Error("disk on fire");
          },
          async assemble(request) {
            assembled.push(request.messages.length);
            return { messages: request.messages, estimatedTokens: 3 };
          },
        }));
      },
    },
  };
  const third = openClawEngine(failing, { manifest, packageJson }).engine;
  const result = await third.assemble(sessionNamed("failing"), history, params);
  assert.deepEqual(result.items, [{ tag: "keep", val: { start: 0, end: 3 } }]);
  assert.deepEqual(assembled, [3]);
  assert.ok(
    fake.logs.some(({ level, message }) => level === "warn" && message === "[echo-claw] context engine bootstrap failed: Error: disk on fire"),
    JSON.stringify(fake.logs),
  );
});

/**
 * A plugin that, as lossless-claw does, schedules background work with
 * `setImmediate` (the SDK's, as the build gives it) for after its calls
 * answer; `seen` records what ran.
 */
function backgroundPlugin(timers, seen) {
  const engine = {
    info: { id: "echo-claw", name: "Background engine", version: "1", ownsCompaction: true },
    async assemble(params) {
      timers.setImmediate(() => seen.push("what assemble scheduled"));
      return { messages: params.messages, estimatedTokens: 1 };
    },
    async afterTurn() {
      timers.setImmediate(() => {
        seen.push("what afterTurn scheduled");
        timers.setImmediate(() => seen.push("what that scheduled"));
      });
      timers.clearImmediate(timers.setImmediate(() => seen.push("a cleared immediate")));
    },
    async compact() {
      return { ok: true, compacted: false };
    },
  };
  return { default: { id: "echo-claw", register: (api) => api.registerContextEngine("echo-claw", () => engine) } };
}

test("a call but assemble ends once the background work it scheduled with setImmediate has run, as Node runs it right after", async () => {
  const timers = await sdkModule("node/timers");
  const seen = [];
  const { engine } = openClawEngine(backgroundPlugin(timers, seen), { manifest, packageJson });
  const history = new History(conversation(user("hello"), assistant("hi")));
  await engine.assemble(session, history, { tokenBudget: 1000n, availableTools: [], prompt: "next" });
  assert.deepEqual(seen, [], "assemble answers without waiting for its background work");
  await engine.afterTurn(session, history, { prePromptMessageCount: 0, isHeartbeat: false, tokenBudget: 500n });
  assert.deepEqual(seen, ["what assemble scheduled", "what afterTurn scheduled", "what that scheduled"]);
  assert.equal(timers.immediatesPending(), false);
});

test("a history entry is the same message object in every call of its session, as in OpenClaw's live session", async () => {
  const { module, seen } = echoPlugin();
  const { engine } = openClawEngine(module, { manifest, packageJson });
  const first = conversation(user("hello"), assistant("hi"));
  await engine.ingestBatch(session, first, false);
  await engine.assemble(session, new History(first), { tokenBudget: 1000n, availableTools: [], prompt: "more" });
  const grown = [...first, entry(2, user("more"))];
  await engine.assemble(session, new History(grown), { tokenBudget: 1000n, availableTools: [], prompt: "x" });
  const [before, after] = seen.calls.filter(([name]) => name === "assemble").map(([, params]) => params.messages);
  assert.equal(seen.ingested[0], before[0], "the ingested object is the one assembled");
  assert.equal(after[0], before[0]);
  assert.equal(after[1], before[1]);
  assert.equal(after[2].content[0].text, "more");
  // An entry that is not the one kept under its id (another timestamp) is converted afresh.
  const replaced = [entry(0, user("hello")), { ...entry(1, assistant("hi")), timestampMs: 5n }];
  await engine.assemble(session, new History(replaced), { tokenBudget: 1000n, availableTools: [], prompt: "x" });
  const [, , third] = seen.calls.filter(([name]) => name === "assemble").map(([, params]) => params.messages);
  assert.equal(third[0], before[0]);
  assert.notEqual(third[1], before[1]);
  assert.equal(third[1].timestamp, 5);
  // Another session's entries with the same ids are its own objects.
  const other = { ...session, sessionId: "s2", sessionKey: "agent:main:s2" };
  await engine.assemble(other, new History(first), { tokenBudget: 1000n, availableTools: [], prompt: "x" });
  const fourth = seen.calls.filter(([name]) => name === "assemble").at(-1)[1].messages;
  assert.notEqual(fourth[0], before[0]);
  assert.deepEqual(fourth[0], before[0]);
});

test("assemble: an answer that breaks tool pairing is repaired as OpenClaw repairs it for the model", async () => {
  const openclaw = [
    { role: "user", content: "run it", timestamp: 1 },
    { role: "assistant", content: [{ type: "toolCall", id: "c1", name: "exec", arguments: {} }], stopReason: "toolUse", timestamp: 2 },
    { role: "toolResult", toolCallId: "c1", toolName: "exec", content: [{ type: "text", text: "ok" }], isError: false, timestamp: 3 },
    { role: "assistant", content: [{ type: "text", text: "done" }], stopReason: "stop", timestamp: 4 },
  ];
  const history = new History(openclaw.map((message, at) => entry(at, fromOpenClaw(message))));
  const plugin = {
    default: {
      id: "echo-claw",
      register(api) {
        // Its summary replaced the call but kept the call's result.
        api.registerContextEngine("echo-claw", () => ({
          info: { id: "echo-claw", name: "Orphaning engine", ownsCompaction: true },
          ingest: async () => ({ ingested: true }),
          assemble: async ({ messages }) => ({ messages: [{ role: "user", content: "summary", timestamp: 0 }, ...messages.slice(2)], estimatedTokens: 10 }),
          compact: async () => ({ ok: true, compacted: false }),
        }));
      },
    },
  };
  const { engine } = openClawEngine(plugin, { manifest, packageJson });
  const assembled = await engine.assemble(session, history, { tokenBudget: 1000n, availableTools: [], prompt: "x" });
  assert.deepEqual(assembled.items.map((item) => item.tag === "keep" ? ["keep", item.val.start, item.val.end] : ["insert", item.val.tag]), [["insert", "user"], ["keep", 3, 4]]);
});

test("compact: the engine's summary comes from the host's model; its result is checked into the contract's", async () => {
  const { module, seen } = echoPlugin();
  const { engine } = openClawEngine(module, { manifest, packageJson });
  fake.completions.length = 0;
  const history = new History(conversation(user("x"), assistant("y")));
  const result = await engine.compact(session, history, { force: true, compactionTarget: "budget", tokenBudget: 64n });
  assert.deepEqual(fake.completions, [
    { messages: [{ role: "user", text: "summarize please" }], system: "be brief", maxTokens: 50, purpose: "echo summary" },
  ]);
  assert.equal(result.summary, "[model] summarize please");
  assert.equal(result.ok, true);
  assert.equal(result.tokensBefore, 100n);
  assert.equal(result.tokensAfter, 100n, "never more after than before: the host refuses that");
  assert.equal(result.details, JSON.stringify({ by: "fake-model" }));
  const [, params] = seen.calls.find(([name]) => name === "compact");
  assert.equal(params.tokenBudget, 64);
  assert.equal(params.force, true);
});

test("compact: delegateCompactionToRuntime runs the host's native compaction, for this session and during compact only", async () => {
  const { module } = echoPlugin();
  const { engine } = openClawEngine(module, { manifest, packageJson });
  fake.delegated.length = 0;
  const history = new History(conversation(user("x")));
  const result = await engine.compact(session, history, {
    force: false,
    compactionTarget: "threshold",
    customInstructions: "delegate",
    currentTokenCount: 900n,
  });
  assert.equal(fake.delegated.length, 1);
  assert.equal(fake.delegated[0].compactionTarget, "threshold");
  assert.equal(fake.delegated[0].currentTokenCount, 900n);
  assert.equal(fake.delegated[0].customInstructions, "delegate");
  assert.deepEqual(result, { ok: true, compacted: false, reason: "fake", summary: undefined, firstKeptEntryId: undefined, tokensBefore: 0n, tokensAfter: undefined, rotatedSession: undefined, details: undefined });
  await assert.rejects(core.delegateCompactionToRuntime({ sessionId: "s1" }), /only available during an engine call/);
});

test("tools: registered tools are listed with their schema and answer with their result's text", async () => {
  const { module, seen } = echoPlugin();
  const { engine, tools } = openClawEngine(module, { manifest, packageJson });
  assert.deepEqual(tools.listTools(), [
    {
      name: "echo_recall",
      description: "Finds ingested messages",
      parameters: JSON.stringify({ type: "object", properties: { query: { type: "string" } } }),
    },
  ]);
  await engine.ingest(session, entry(0, user("the blue whale")), false);
  assert.equal(await tools.callTool(session, "echo_recall", JSON.stringify({ query: "whale" })), "1 found");
  const [, toolCallId, ctx, params] = seen.calls.find(([name]) => name === "tool");
  assert.match(toolCallId, /^ctxbox-/);
  assert.equal(ctx.sessionKey, "agent:main:s1");
  assert.deepEqual(params, { query: "whale" });
  await assert.rejects(Promise.resolve().then(() => tools.callTool(session, "nope", "{}")), { kind: "unsupported" });
  await assert.rejects(Promise.resolve().then(() => tools.callTool(session, "echo_recall", "[1]")), { kind: "invalid-input" });
});

test("dispose disposes the engine and stops the gateway; a plugin that never ran is left alone", async () => {
  const { module, seen } = echoPlugin();
  const { engine } = openClawEngine(module, { manifest, packageJson });
  await engine.dispose();
  assert.equal(seen.api, undefined);
  engine.info();
  await engine.dispose();
  assert.deepEqual(seen.calls, [["gateway_start"], ["gateway_stop"]]);
});

test("an async register and engine factory are awaited; a failing register is the call's error and is tried again", async () => {
  let attempts = 0;
  const engineObject = { info: { id: "slow" }, assemble: async (params) => ({ messages: params.messages, estimatedTokens: 1 }) };
  const module = {
    default: async (api) => {
      attempts += 1;
      await new Promise((resolve) => setTimeout(resolve, 1));
      if (attempts === 1) throw new Error("not yet");
      api.registerContextEngine("slow", async () => engineObject);
    },
  };
  const { engine } = openClawEngine(module, { manifest: { id: "slow" }, packageJson: {} });
  // `info` cannot wait: it answers from the manifest.
  assert.deepEqual(engine.info(), { id: "slow", name: "slow", version: undefined, ownsCompaction: false, acceptedHostParams: undefined, turnMaintenanceMode: undefined });
  const history = new History(conversation(user("a"), user("b")));
  await assert.rejects(engine.assemble(session, history, { availableTools: [] }), { kind: "internal", message: "not yet" });
  const result = await engine.assemble(session, history, { availableTools: [] });
  assert.deepEqual(result.items, [{ tag: "keep", val: { start: 0, end: 2 } }]);
  assert.equal(attempts, 2, "the first assemble waited for info's attempt, which failed; the second registered");
});

test("the plugin definition is found as OpenClaw finds it", () => {
  const register = () => {};
  assert.equal(pluginDefinition({ default: register }).register, register);
  assert.equal(pluginDefinition({ default: { default: { register } } }).register, register);
  assert.equal(pluginDefinition({ module: { register } }).register, register);
  assert.throws(() => pluginDefinition({ default: { id: "x" } }), /no plugin definition/);
  assert.throws(() => openClawEngine({ default: register }, { manifest: {}, packageJson: {} }), /no id/);
});

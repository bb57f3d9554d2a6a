// End to end against the real OpenClaw (2026.9.6, from the npm registry):
// the plugin installed from this folder, a warm `openclaw gateway`, turns
// sent with `openclaw agent`, and a loopback fake model that records every
// request body. Run by ci.sh with:
//   CTXBOX_BIN            the built ctxbox binary
//   OPENCLAW_MJS          node_modules/openclaw/openclaw.mjs
//   CTXBOX_SPIN_WASM      the `spin` test engine (hangs in assemble)
//   CTXBOX_PANICKER_WASM  the `panicker` test engine (panics in assemble)
//   CTXBOX_PARAM_ECHO_WASM the `param-echo` test engine (tells what reached it
//                         in a system prompt addition)
//   CTXBOX_TOOL_SPINNER_WASM the `tool-spinner` test engine (offers a tool
//                         that spins when called)
// under Node 26 (`node --test test/e2e.mjs`). Every process it starts is
// ended by its PID; every server binds 127.0.0.1.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { test } from "node:test";

import { startFakeModel } from "./fake-model.mjs";
import { CTXBOX_BIN, ENGINE_DEADLINE_MS, OpenClaw, need, pluginDeclaring, root, run, sidecarsUnder, started, texts } from "./harness.mjs";

const SPIN_WASM = need("CTXBOX_SPIN_WASM");
const PANICKER_WASM = need("CTXBOX_PANICKER_WASM");
const PARAM_ECHO_WASM = need("CTXBOX_PARAM_ECHO_WASM");
const TOOL_SPINNER_WASM = need("CTXBOX_TOOL_SPINNER_WASM");

/** How much longer than a normal turn a turn with a hanging engine may take. */
const HANG_ALLOWANCE_MS = ENGINE_DEADLINE_MS + 6_000;
/** The slowest warm turn of the lossless test (a normal turn on this machine). */
let warmTurnMs = 15_000;

/** The text of one chat-completions message. */
const textOf = (message) => (typeof message.content === "string" ? message.content : JSON.stringify(message.content ?? ""));

/** The messages after the last assistant message: the turn's prompt, or a tool's result and what OpenClaw adds. */
function sinceAssistant(request) {
  return request.messages.slice(request.messages.findLastIndex((message) => message.role === "assistant") + 1);
}

/** The names of the tools a request offers the model. */
const toolNames = (request) => (request?.tools ?? []).map((tool) => tool.function?.name);

/** Arguments a tool's JSON Schema accepts: `text` in its required strings (or its first string), 1 in required numbers. */
function argumentsFor(schema, text) {
  const properties = schema?.properties ?? {};
  const strings = Object.keys(properties).filter((key) => properties[key]?.type === "string");
  const required = schema?.required ?? [];
  const args = Object.fromEntries((required.some((key) => strings.includes(key)) ? required : strings.slice(0, 1)).map((key) => [key, text]));
  for (const key of required) {
    if (["integer", "number"].includes(properties[key]?.type)) args[key] = properties[key].minimum ?? 1;
  }
  return args;
}


/** How OpenClaw's own compaction asks the model for a summary. */
const OPENCLAW_SUMMARY_PROMPT = "You are a context summarization assistant";
const isOpenClawSummarization = (request) =>
  request.messages.some((message) => ["system", "developer"].includes(message.role) && textOf(message).startsWith(OPENCLAW_SUMMARY_PROMPT));

/** How lossless's summarization prompt begins (its completions through OpenClaw's model are known by it). */
const LOSSLESS_SUMMARY_PROMPT = "You summarize conversation history for ctxbox's lossless engine";
const isSummarization = (request) =>
  request.messages.some((message) => ["system", "developer"].includes(message.role) && textOf(message).startsWith(LOSSLESS_SUMMARY_PROMPT));

/** The tools `wasm` reports to a protocol-2 client of `ctxbox serve` (run in a data dir of its own). */
async function engineTools(wasm) {
  const child = spawn(CTXBOX_BIN, ["serve", "--engine", wasm, "--data-dir", mkdtempSync(join(root, "tools-"))], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  started.add(child);
  let stdout = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stdin.write(`${JSON.stringify({ id: 1, method: "hello", params: { protocol: 2, client: "ctxbox-e2e" } })}\n`);
  child.stdin.write(`${JSON.stringify({ id: 2, method: "tools", params: { engine: wasm } })}\n`);
  child.stdin.end();
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  await new Promise((done) => child.on("exit", done));
  clearTimeout(timer);
  started.delete(child);
  const answer = stdout
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line))
    .find((line) => line.id === 2);
  assert.ok(Array.isArray(answer?.result?.tools), `tools of ${wasm}: ${stdout}`);
  return answer.result.tools;
}

/** Answers that grow the session quickly, so a budget is reached in a few turns. */
const longReply = (_body, index) => `reply ${index}: ${"the quick brown fox jumps over the lazy dog ".repeat(450)}`;

/**
 * Asks a new `ctxbox serve` directly to commit `key` again, telling it the
 * session (empty: a new server holds none, and refuses a commit for a
 * session it was not told of).
 */
async function replayCommit(dataDir, session, key) {
  const child = spawn(CTXBOX_BIN, ["serve", "--engine", "keep-recent", "--data-dir", dataDir], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  started.add(child);
  const lines = [];
  child.stdout.on("data", (chunk) => lines.push(...String(chunk).split("\n").filter(Boolean)));
  child.stdin.write(`${JSON.stringify({ id: 1, method: "hello", params: { protocol: 1 } })}\n`);
  child.stdin.write(
    `${JSON.stringify({ id: 2, method: "commitTurn", params: { sessionId: session, advancementKey: key, messages: [], sync: { base: 0, messages: [] } } })}\n`,
  );
  child.stdin.end();
  await new Promise((done) => child.on("exit", done));
  started.delete(child);
  return JSON.parse(lines.find((line) => JSON.parse(line).id === 2));
}

test("keep-recent: five turns trimmed by the engine, each committed once; the sidecar survives SIGKILL", async () => {
  const model = await startFakeModel({ reply: longReply });
  const openclaw = new OpenClaw("keep-recent", "keep-recent", model);
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    for (let turn = 1; turn <= 5; turn++) await openclaw.turn("kr", `question number ${turn}`);

    // Once the session outgrows the budget the engine's context reaches the
    // model: the newest turns, and keep-recent's note instead of the oldest.
    writeFileSync(join(openclaw.home, "model-requests.json"), JSON.stringify(model.requests, null, 1));
    const trimmed = model.requests.filter((request) => texts(request).some((text) => text.includes("[keep-recent:")));
    assert.ok(trimmed.length > 0, "the model saw keep-recent's note about what it left out");
    const latest = texts(trimmed.at(-1));
    assert.ok(latest.some((text) => /\[keep-recent: \d+ earlier messages/.test(text)), latest.join("\n").slice(0, 2000));
    assert.ok(!latest.some((text) => text.startsWith("reply 0:")), "the oldest reply was left out by the engine");
    assert.ok(!latest.some((text) => /^\[[^\]]*\] question number 1\b/.test(text)), "so was the oldest question");
    assert.ok(latest.some((text) => /question number [45]\b/.test(text)), "the newest turns are kept");

    const commits = openclaw.commits("kr");
    assert.equal(commits.length, 5, `one commit per turn: ${JSON.stringify(commits)}`);
    assert.equal(new Set(commits.map((commit) => commit.key)).size, 5);
    assert.ok(commits.every((commit) => commit.count >= 2), "each commit holds the turn's messages");

    // SIGKILL the sidecar between turns: the next turn completes, a new one runs.
    const [sidecar] = sidecarsUnder(openclaw.gateway.pid);
    assert.ok(sidecar, "the gateway runs a ctxbox sidecar");
    process.kill(sidecar, "SIGKILL");
    await openclaw.turn("kr", "question number 6");
    let back = [];
    for (let tries = 0; tries < 40 && back.length === 0; tries++) {
      back = sidecarsUnder(openclaw.gateway.pid).filter((pid) => pid !== sidecar);
      if (back.length === 0) await new Promise((done) => setTimeout(done, 250));
    }
    assert.equal(back.length, 1, "the sidecar is back");
    const before = model.requests.length;
    await openclaw.turn("kr", "question number 7");
    const sinceKill = model.requests.slice(before).map((request) => texts(request).join("\n"));
    assert.ok(sinceKill.some((all) => all.includes("question number 7")), "the turn after the restart reached the model");
    openclaw.stop();

    const replay = await replayCommit(openclaw.dataDir, "kr", commits[0].key);
    assert.equal(replay.result?.status, "duplicate", JSON.stringify(replay));
  } finally {
    openclaw.stop();
    await model.close();
  }
});

test("lossless: five turns with every earlier message kept, each committed once", async () => {
  const model = await startFakeModel({ reply: (_body, index) => `lossless reply ${index}` });
  const openclaw = new OpenClaw("lossless", "lossless", model);
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    const durations = [];
    for (let turn = 1; turn <= 5; turn++) durations.push(await openclaw.turn("ll", `lossless question ${turn}`));
    warmTurnMs = Math.max(...durations.slice(1));
    const all = texts(model.requests.at(-1)).join("\n");
    for (let turn = 1; turn <= 5; turn++) assert.ok(all.includes(`lossless question ${turn}`), `turn ${turn} is in the context`);
    for (let reply = 0; reply < 4; reply++) assert.ok(all.includes(`lossless reply ${reply}`), `reply ${reply} is in the context`);
    const commits = openclaw.commits("ll");
    assert.equal(commits.length, 5, JSON.stringify(commits));
    const health = await openclaw.health();
    assert.equal(health.status, 0, `nothing quarantined: ${JSON.stringify(health.records)}`);
  } finally {
    openclaw.stop();
    await model.close();
  }
});

test("param-echo: the engine's systemPromptAddition reaches the model, with only the host params it accepts", async () => {
  const model = await startFakeModel({ reply: (_body, index) => `echo reply ${index}` });
  const openclaw = new OpenClaw("param-echo", PARAM_ECHO_WASM, model);
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    for (let turn = 1; turn <= 2; turn++) await openclaw.turn("pe", `echo question ${turn}`);
    const system = model.requests
      .at(-1)
      .messages.filter((message) => message.role === "system" || message.role === "developer")
      .map((message) => (typeof message.content === "string" ? message.content : JSON.stringify(message.content)))
      .join("\n");
    // param-echo accepts only `session-key`: OpenClaw's session key reaches
    // it, the prompt (which it did not ask for) does not.
    assert.match(system, /key=Some\("[^"]+"\) prompt=None/, system.slice(-2000));
    const all = texts(model.requests.at(-1)).join("\n");
    assert.ok(all.includes("echo question 1") && all.includes("echo reply 0"), "the engine kept the history");
    assert.equal(openclaw.commits("pe").length, 2);
  } finally {
    openclaw.stop();
    await model.close();
  }
});

// The hostile engines get a one-second quarantine back-off, so after the
// gateway's cold first turn every turn tries the engine again: each of them
// must still finish within a warm turn's time plus the engine deadline and a
// few seconds. `panicker` panics when the prompt is "panic".
for (const [name, wasm, message, classifications] of [
  ["spin", SPIN_WASM, "spin question", ["timeout", "out-of-fuel"]],
  ["panicker", PANICKER_WASM, "panic", ["panic"]],
]) {
  test(`${name}: every turn completes in time with the pass-through context and the engine is quarantined`, async () => {
    assert.ok(existsSync(wasm), `${wasm} exists`);
    const model = await startFakeModel({ reply: (_body, index) => `${name} reply ${index}` });
    const openclaw = new OpenClaw(name, wasm, model, { ctxboxToml: "[quarantine]\nretryAfterSeconds = 1\n" });
    try {
      await openclaw.setUp();
      await openclaw.startGateway();
      await openclaw.turn(name, message);
      for (let turn = 2; turn <= 3; turn++) {
        const took = await openclaw.turn(name, message);
        assert.ok(took <= warmTurnMs + HANG_ALLOWANCE_MS, `turn ${turn} took ${took} ms (a warm turn: ${warmTurnMs} ms)`);
      }
      const last = texts(model.requests.at(-1)).join("\n");
      assert.ok(last.includes(`${name} reply 0`) && last.includes(`${name} reply 1`), "pass-through: the whole history reaches the model");

      // Every turn's assemble went to legacy: the first tried the engine
      // and quarantined it, and so did the next one after the one-second
      // back-off; a failure on a retry doubles the back-off (it decays
      // slowly), so the third turn may come before it is over and be served
      // by legacy without trying the engine. The sidecar's own figures count
      // each assemble that ended so. (The quarantine record itself may be
      // gone by now: the back-off is soon over on a loaded machine.)
      const failed = (outcomes) => (outcomes.quarantined ?? 0) + (outcomes.deadline ?? 0);
      const elsewhere = (outcomes) => failed(outcomes) + (outcomes.fell_back ?? 0);
      const outcomes = await openclaw.callOutcomes(name, "assemble", (seen) => failed(seen) >= 2 && elsewhere(seen) >= 3);
      assert.ok(failed(outcomes) >= 2, `the engine was tried again after its back-off, and cut and quarantined again: ${JSON.stringify(outcomes)}`);
      assert.ok(elsewhere(outcomes) >= 3, `every turn's assemble was served elsewhere: ${JSON.stringify(outcomes)}`);
      assert.ok(!outcomes.served, `none was served by the engine: ${JSON.stringify(outcomes)}`);
      const health = await openclaw.health();
      const record = health.records.find((entry) => entry.engineId === name);
      if (record) {
        assert.equal(health.status, 2, "ctxbox health exits 2 while an engine is quarantined");
        assert.ok(classifications.includes(record.classification), JSON.stringify(record));
        assert.ok(record.retryAtMs > record.atMs, `the back-off is set: ${JSON.stringify(record)}`);
        const shown = await run(CTXBOX_BIN, ["health", "--data-dir", openclaw.dataDir]);
        assert.match(shown.stdout, new RegExp(`${name} \\(plugin:serve\\)[\\s\\S]*failed in +assemble`), shown.stdout);
      }
      assert.equal(openclaw.commits(name).length, 3, "every turn was committed");
    } finally {
      openclaw.stop();
      await model.close();
    }
  });
}

// Ordinary turns in the real OpenClaw, as a user has them: lossless (which
// owns compaction), Tool Search on (OpenClaw's default: its own tools'
// schemas stay out of the request, so they do not fill the window), no
// manual and no forced compaction. The session outgrows lossless's threshold
// (3/4 of the turn's budget, the window), so after some turn lossless
// summarizes the oldest messages on its own, asking OpenClaw's model through
// the plugin (a reverse `complete`). The window is one where that comes
// first: OpenClaw forces a compaction (its preflight) once the model reports
// a prompt past the window less min(20k, 1/4 of it), and besides the
// messages its prompt holds ~12k tokens of its own (system prompt, Tool
// Search's tools), which lossless does not count. At 32k that is always
// before lossless's 24k (a forced compaction every turn from the tenth on);
// at 200k lossless summarizes at 150k and OpenClaw would force at 180k. Every turn OpenClaw assembles more than once; the sidecar
// must still hold the whole session after the last turn — as many messages
// as OpenClaw's own transcript — and the model's grep (`ctxbox_grep`, which
// Tool Search shows in its directory and the model calls through
// `tool_call`) finds the first question, summarized away from the prompt.
const ORDINARY_TURNS = 30;
/** The fake model's window in that test, tokens. */
const ORDINARY_WINDOW = 200_000;
/** ~6k tokens a reply: the session passes lossless's 150k after some 25 turns. */
const ORDINARY_REPLY_REPEATS = 545;
test(`lossless, ${ORDINARY_TURNS} ordinary turns: it summarizes through OpenClaw's model unasked, the sidecar keeps the whole session, and ctxbox_grep finds the first question`, { timeout: 1_500_000 }, async () => {
  const marker = "zanzibar42";
  const grep = (await engineTools("lossless")).find((tool) => tool.name === "grep");
  assert.ok(grep, "lossless offers grep");
  const session = "ordinary";
  const model = await startFakeModel({
    reply: (body, index) => {
      if (isSummarization(body)) return `Summary ${index}: the user asked numbered questions and got long answers.`;
      const prompt = sinceAssistant(body);
      if (prompt.some((message) => message.role === "tool")) return `ordinary reply ${index} after the tool`;
      if (prompt.some((message) => textOf(message).includes("please search for the word"))) {
        return { toolCall: { name: "tool_call", arguments: { id: "ctxbox_grep", args: argumentsFor(grep.parameters, marker) } } };
      }
      return `ordinary reply ${index}: ${"the quick brown fox jumps over the lazy dog ".repeat(ORDINARY_REPLY_REPEATS)}`;
    },
  });
  // Room for OpenClaw's first model call (cold) inside the engine's deadline.
  const openclaw = new OpenClaw("lossless-ordinary", "lossless", model, {
    contextWindow: ORDINARY_WINDOW,
    engineDeadlineMs: 8_000,
    pluginTimeoutMs: 20_000,
  });
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    const begun = Date.now();
    await openclaw.turn(session, `my first question mentions the word ${marker}`);
    for (let turn = 2; turn <= ORDINARY_TURNS; turn++) await openclaw.turn(session, `ordinary question number ${turn}`);
    console.log(`# lossless: ${ORDINARY_TURNS} ordinary turns took ${Date.now() - begun} ms`);
    writeFileSync(join(openclaw.home, "model-requests.json"), JSON.stringify(model.requests, null, 1));

    assert.deepEqual(model.refused.length, 0, "OpenClaw never asked the model for a reply it has no room for");
    const summarizations = model.requests.filter(isSummarization);
    assert.ok(summarizations.length > 0, "lossless summarized during ordinary turns, through OpenClaw's model");
    assert.ok(summarizations.every((request) => !request.tools), "as plain completions (OpenClaw's llm.complete), not agent turns");
    assert.ok(
      summarizations.some((request) => texts(request).join("\n").includes(marker)),
      "the first question was among what lossless summarized",
    );
    const trace = openclaw.trace().filter((entry) => entry.sessionId === session);
    assert.deepEqual(trace.filter((entry) => entry.method === "compact"), [], "OpenClaw asked for no compaction");
    assert.equal(openclaw.fallbacks, 0, "OpenClaw's own compaction never ran");
    assert.ok(!model.requests.some(isOpenClawSummarization), "nor summarized through the model");
    const projections = trace.filter((entry) => entry.method === "assemble" && entry.relation === "projection");
    // Once lossless summarized, its prompt is no longer the session: OpenClaw's second assemble of each turn passes that prompt.
    assert.ok(projections.length > 0, "the plugin recognised OpenClaw's second assemble over lossless's prompt");
    assert.deepEqual(trace.filter((entry) => entry.sync?.reset), [], "no sync was a reset");
    assert.deepEqual(
      trace.slice(1).filter((entry) => entry.sync?.base === 0 && entry.sync.messages > 0),
      [],
      "after the first, no sync resent the session from 0: each sent only what was new",
    );
    const lastCommit = trace.filter((entry) => entry.method === "commitTurn").at(-1);
    assert.equal(lastCommit?.length, openclaw.transcript(session).length, "the sidecar holds the whole session after the last turn");

    const before = model.requests.length;
    await openclaw.turn(session, "please search for the word from my first question");
    // (Besides the turn's own requests, OpenClaw may make others: lossless's summaries.)
    const turn = model.requests.slice(before).filter((request) => !isSummarization(request));
    const asking = turn.find((request) => sinceAssistant(request).some((message) => textOf(message).includes("please search for the word")));
    assert.ok(asking, "the turn reached the model");
    assert.ok(texts(asking).join("\n").includes("ctxbox_grep"), "Tool Search lists ctxbox_grep for the model");
    assert.ok(toolNames(asking).includes("tool_call"), `and offers tool_call to call it: ${toolNames(asking).join(", ")}`);
    assert.ok(!texts(asking).join("\n").includes(marker), "the first question is summarized away: the prompt no longer holds it");
    const results = turn.flatMap(sinceAssistant).filter((message) => message.role === "tool");
    assert.ok(results.length >= 1, "the model got the tool's result");
    const result = textOf(results[0]);
    assert.ok(result.includes(marker), `grep found the first question: ${result.slice(0, 2000)}`);
    assert.doesNotMatch(result, /"status":\s*"error"/, "the tool did not fail");
    const final = openclaw.trace().filter((entry) => entry.sessionId === session && entry.method === "commitTurn").at(-1);
    assert.equal(final?.length, openclaw.transcript(session).length, "after the tool turn too");
    const health = await openclaw.health();
    assert.equal(health.status, 0, `nothing quarantined: ${JSON.stringify(health.records)}`);
  } finally {
    openclaw.stop();
    await model.close();
  }
});

// An engine whose tool spins (`tool-spinner` offers `echo` and `spin`, which
// never returns): the call is cut at the engine's deadline, the model is
// told the tool failed, the turn completes, and the engine is quarantined
// (its tools are not offered again). Its tools are not among those the
// plugin declares: the test adds them to a copy of the plugin's manifest,
// as an operator would.
test("tool-spinner: a spinning tool is cut at its deadline, the engine quarantined, and the turn completes", { timeout: 420_000 }, async () => {
  assert.ok(existsSync(TOOL_SPINNER_WASM), `${TOOL_SPINNER_WASM} exists`);
  const offered = (await engineTools(TOOL_SPINNER_WASM)).map((tool) => `ctxbox_${tool.name}`);
  assert.ok(offered.includes("ctxbox_spin"), `the engine offers spin: ${offered.join(", ")}`);
  const model = await startFakeModel({
    reply: (body, index) => {
      const prompt = sinceAssistant(body);
      if (prompt.some((message) => message.role === "tool")) return `tool-spinner reply ${index} after the tool`;
      const spin = body.tools?.find((tool) => tool.function?.name === "ctxbox_spin");
      if (spin && prompt.some((message) => textOf(message).includes("please call the spinning tool"))) {
        return { toolCall: { name: "ctxbox_spin", arguments: argumentsFor(spin.function.parameters, "spin") } };
      }
      return `tool-spinner reply ${index}`;
    },
  });
  const openclaw = new OpenClaw("tool-spinner", TOOL_SPINNER_WASM, model, {
    directTools: true,
    pluginDir: pluginDeclaring(offered),
  });
  const engineId = basename(TOOL_SPINNER_WASM, ".wasm").replaceAll("_", "-");
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    await openclaw.turn("ts", "a first question");
    // A warm turn here (every schema in the request) may take longer than
    // the lossless test's.
    const warm = Math.max(warmTurnMs, await openclaw.turn("ts", "a second question"));
    const before = model.requests.length;
    const took = await openclaw.turn("ts", "please call the spinning tool");
    assert.ok(took <= warm + HANG_ALLOWANCE_MS, `the turn took ${took} ms (a warm turn: ${warm} ms)`);
    // (Besides the turn's own requests, OpenClaw may make others first — its
    // compaction's summary, a memory flush — with other tools.)
    const turn = model.requests.slice(before);
    assert.ok(
      turn.some((request) => toolNames(request).includes("ctxbox_spin")),
      `the engine's tool was offered: ${turn.map((request) => toolNames(request).join(", ")).join(" | ")}`,
    );
    const results = turn.flatMap(sinceAssistant).filter((message) => message.role === "tool");
    assert.equal(results.length, 1, "the model got the tool's result");
    assert.match(textOf(results[0]), /"status":\s*"error"/, "an error result");

    const health = await openclaw.health();
    assert.equal(health.status, 2, "ctxbox health exits 2 while an engine is quarantined");
    const record = health.records.find((entry) => entry.engineId === engineId);
    assert.ok(record, JSON.stringify(health.records));
    assert.ok(["timeout", "out-of-fuel"].includes(record.classification), JSON.stringify(record));

    const after = model.requests.length;
    await openclaw.turn("ts", "a question after the quarantine");
    const names = model.requests.slice(after).flatMap(toolNames);
    assert.ok(model.requests.length > after, "the turn reached the model");
    assert.ok(!offered.some((name) => names.includes(name)), `the quarantined engine's tools are no longer offered: ${names.join(", ")}`);
  } finally {
    openclaw.stop();
    await model.close();
  }
});

// What ctxbox is for, measured on the same OpenClaw: a plain JavaScript
// context engine whose `assemble` never answers holds the turn until
// OpenClaw's own run timeout (set to 20 s here; 600 s by default) and
// more, where the sandboxed `spin` above is answered within the engine
// deadline. The figure goes to BENCHMARKS.md.
test("without ctxbox: a hanging JavaScript engine holds the turn until OpenClaw's run timeout", async () => {
  const dir = join(root, "hang-js-plugin");
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({ name: "hang-js", version: "0.0.0", type: "module", openclaw: { extensions: ["./index.js"] } }),
  );
  writeFileSync(
    join(dir, "openclaw.plugin.json"),
    JSON.stringify({ id: "hang-js", name: "hang-js", kind: "context-engine", configSchema: { type: "object" } }),
  );
  writeFileSync(
    join(dir, "index.js"),
    `export default function register(api) {
  api.registerContextEngine("hang-js", () => ({
    info: { id: "hang-js", name: "hang-js", version: "0.0.0", ownsCompaction: false,
      transcriptSemantics: { currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1" } },
    async bootstrap() { return { bootstrapped: true }; },
    async ingest() { return { ingested: false }; },
    assemble: () => new Promise(() => {}),
    async commitTurn() { return { status: "committed" }; },
    async afterTurn() {},
    async compact() { return { ok: true, compacted: false }; },
    async dispose() {},
  }));
}
`,
  );
  const timeoutSeconds = 20;
  const model = await startFakeModel({ reply: (_body, index) => `hang reply ${index}` });
  const openclaw = new OpenClaw("hang-js", "hang-js", model, { plugin: { dir, id: "hang-js", config: {}, timeoutSeconds } });
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    const result = await openclaw.rawTurn("hj", "hang question");
    console.log(
      `# without ctxbox: a hanging assemble ended the turn after ${result.ms} ms (run timeout ${timeoutSeconds} s), exit ${result.status}`,
    );
    assert.ok(result.ms >= timeoutSeconds * 1000, `the turn waited for the run timeout: ${result.ms} ms`);
    assert.equal(model.requests.length, 0, "the model was never asked");
  } finally {
    openclaw.stop();
    await model.close();
  }
});

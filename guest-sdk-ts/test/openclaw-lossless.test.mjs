// lossless-claw 1.0.0-beta.4 (the test subject in shared/subjects/), its own
// TypeScript source loaded in Node, run through openClawEngine over the
// fake host: a conversation bootstrapped, assembled and ingested turn by
// turn, compacted with summaries the host's model writes, and recalled with
// its lcm_grep tool from its SQL store.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { History } from "./fake-host.mjs";
import { fakeSql } from "./fake-sql.mjs";
import { fake, loadPlugin, sdkModule } from "./openclaw-source.mjs";
import { pluginDependencies, subject } from "./openclaw-subject.mjs";

const dir = subject("lossless-claw-1.0.0-beta.4");
const skip = dir === undefined && "the lossless-claw subject (shared/subjects/) is not next to this clone";

const session = { sessionId: "lcm-s1", sessionKey: "agent:main:lcm-s1", sessionFile: "/sessions/lcm-s1.jsonl" };
const runtimeContext = JSON.stringify({ sessionTarget: { agentId: "main", sessionId: session.sessionId, sessionKey: session.sessionKey } });
const text = (value) => [{ tag: "text", val: value }];
const userMessage = (value) => ({ tag: "user", val: { content: text(value) } });
const assistantMessage = (value) => ({
  tag: "assistant",
  val: { content: text(value), model: "m", provider: "p", usage: undefined, stopReason: "stop", errorMessage: undefined },
});

/** The conversation: each turn states one fact worth recalling later, padded so that compaction has work. */
const FACTS = [
  "the staging database lives on host pelican-7",
  "the release train leaves every second Tuesday",
  "the cache eviction bug was traced to a stale ETag",
  "the on-call rotation swaps at 09:00 UTC on Mondays",
  "the payments service retries three times with jitter",
  "the design review for search moved to Thursday",
  "the flaky test is checkout_spec line 212",
  "the new region is eu-north with two zones",
];
const padding = "We went through the details of the logs and the dashboards once more to be sure. ".repeat(12);

/**
 * A session the way ctxbox's runner drives an engine that owns compaction
 * with background maintenance: bootstrap before the first turn's entries,
 * assemble with the user's message in the history (the host's transcript
 * reads fenced before it), the answer, afterTurn, maintain.
 */
class Conversation {
  constructor(engine, session, runtimeContext) {
    this.engine = engine;
    this.session = session;
    this.runtimeContext = runtimeContext;
    this.entries = [];
    /** How many entries the host's transcript reads see (the current-turn fence). */
    this.visible = 0;
  }
  append(message) {
    const at = this.entries.length;
    this.entries.push({ id: `m${at}`, parentId: at === 0 ? undefined : `m${at - 1}`, timestampMs: BigInt(Date.UTC(2026, 0, 1) + at * 60_000), message });
  }
  history() {
    return new History([...this.entries], 16);
  }
  /** The host's `read-transcript-delta` over this session, from a cursor that is a position. */
  readTranscriptDelta(cursor) {
    const from = cursor === undefined ? 0 : Number(cursor);
    const entries = this.entries.slice(from, this.visible);
    return { tag: "page", val: { cursor: String(from + entries.length), entries, hasMore: false } };
  }
  async turn(userText, answerText, tokenBudget) {
    const before = this.entries.length;
    const { session, runtimeContext } = this;
    if (before === 0) this.bootstrapped = await this.engine.bootstrap(session, this.history());
    this.append(userMessage(userText));
    this.visible = before;
    const assembled = await this.engine.assemble(session, this.history(), {
      tokenBudget: BigInt(tokenBudget),
      availableTools: ["lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query"],
      prompt: userText,
    });
    this.append(assistantMessage(answerText));
    this.visible = this.entries.length;
    const turn = { prePromptMessageCount: before, isHeartbeat: false, tokenBudget: BigInt(tokenBudget), runtimeContext };
    await this.engine.afterTurn(session, this.history(), turn);
    const background = JSON.stringify({ ...JSON.parse(runtimeContext), allowDeferredCompactionExecution: true });
    await this.engine.maintain(session, this.history(), "turn", background);
    return assembled;
  }
}

/** The summarizer behind the fake host's model: the facts its request mentions, short. */
function summarizingModel(request) {
  fake.completions.push(request);
  const asked = request.messages.map((message) => message.text).join("\n");
  const text = `SUMMARY: ${FACTS.filter((fact) => asked.includes(fact)).join("; ")}`;
  return { text, inputTokens: BigInt(Math.ceil(asked.length / 4)), outputTokens: BigInt(Math.ceil(text.length / 4)), model: "fake-summarizer" };
}

const textOf = (item) => (item.tag === "insert" ? item.val.val.content.map((block) => block.val).join("") : "");

let stateDir;
after(() => {
  if (stateDir) rmSync(stateDir, { recursive: true, force: true });
});

test("lossless-claw's own source runs as a ctxbox engine: turns, summaries by the host's model, compaction, recall from its store", { skip }, async () => {
  stateDir = mkdtempSync(path.join(tmpdir(), "ctxbox-lcm-"));
  // Its database path and large-file folder default under the state dir (Node's own fs in this test).
  process.env.OPENCLAW_STATE_DIR = stateDir;
  const module = await loadPlugin(dir, path.join(dir, "index.ts"), pluginDependencies(dir));
  const { openClawEngine } = await sdkModule("openclaw/index");
  // Its background work (`setImmediate`) on the SDK's immediates, as in the
  // sandbox, where the globals the build installs give it those: Node's own
  // would run it after the calls, where no host call is allowed.
  const timers = await sdkModule("node/timers");
  const nodeImmediates = [globalThis.setImmediate, globalThis.clearImmediate];
  [globalThis.setImmediate, globalThis.clearImmediate] = [timers.setImmediate, timers.clearImmediate];
  after(() => ([globalThis.setImmediate, globalThis.clearImmediate] = nodeImmediates));
  const manifest = JSON.parse(readFileSync(path.join(dir, "openclaw.plugin.json"), "utf8"));
  const packageJson = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
  // Its recall policy (a before_prompt_build hook) allowed, as an operator allows it in OpenClaw.
  fake.config = JSON.stringify({ freshTailCount: 4, leafChunkTokens: 800, leafMinFanout: 2, contextThreshold: 0.5, hooks: { allowConversationAccess: true } });
  fake.completions.length = 0;
  const conversation = { current: undefined };
  fake.host.readTranscriptDelta = (cursor) => conversation.current.readTranscriptDelta(cursor);
  fake.host.complete = summarizingModel;
  const { engine, tools } = openClawEngine(module, { manifest, packageJson });

  assert.deepEqual(engine.info(), {
    id: "lossless-claw",
    name: "Lossless Context Management Engine",
    version: "1.0.0-beta.4",
    ownsCompaction: true,
    acceptedHostParams: ["session-key", "prompt", "runtime-context", "runtime-settings"],
    turnMaintenanceMode: "background",
  });
  const listed = tools.listTools();
  assert.deepEqual(listed.map((tool) => tool.name), ["lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query"]);
  const grepSchema = JSON.parse(listed[0].parameters);
  assert.equal(grepSchema.type, "object");
  assert.deepEqual(grepSchema.required, ["pattern"]);

  const current = new Conversation(engine, session, runtimeContext);
  conversation.current = current;
  const assembled = [];
  for (const [at, fact] of FACTS.entries()) {
    assembled.push(await current.turn(`Note ${at}: ${fact}. ${padding}`, `Noted: ${fact}. ${padding}`, 6_000));
  }
  assert.deepEqual(current.bootstrapped, { bootstrapped: false, importedMessages: 0, reason: "no visible transcript messages in session" });
  // Before anything is compacted, the prompt is the history itself, the new message included.
  assert.deepEqual(assembled[0].items, [{ tag: "keep", val: { start: 0, end: 1 } }]);
  assert.deepEqual(assembled[1].items, [{ tag: "keep", val: { start: 0, end: 3 } }]);
  assert.match(assembled[0].systemPromptAddition, /^## Lossless Recall Policy/);

  // Its background maintenance summarized the oldest turns through the host's model.
  assert.ok(fake.completions.length > 0, "summaries were asked of the host's model");
  assert.deepEqual(
    fake.logs.filter(({ message }) => /only during a call/.test(message)),
    [],
    "its background work ran within the calls that scheduled it",
  );
  for (const request of fake.completions) {
    assert.equal(request.purpose, "lossless-claw compaction summarization");
    assert.match(request.system, /summar/i);
  }
  const compacted = await engine.compact(session, current.history(), {
    force: true,
    compactionTarget: "budget",
    tokenBudget: 1500n,
    runtimeContext,
  });
  assert.equal(compacted.compacted, true);
  assert.ok(compacted.tokensAfter < compacted.tokensBefore, `${compacted.tokensAfter} < ${compacted.tokensBefore}`);

  const history = current.history();
  const prompt = await engine.assemble(session, history, { tokenBudget: 4000n, availableTools: [], prompt: "what now?" });
  const summaries = prompt.items.filter((item) => textOf(item).startsWith("<summary "));
  assert.ok(summaries.length >= 2, "the compacted turns are summaries now");
  assert.match(textOf(summaries[0]), /SUMMARY: the staging database lives on host pelican-7; the release train leaves every second Tuesday/);
  // The fresh tail (freshTailCount 4) is the history's own last entries, kept.
  assert.deepEqual(prompt.items.at(-1), { tag: "keep", val: { start: history.len() - 4, end: history.len() } });
  assert.ok(prompt.estimatedTokens < 4000n);

  // The recall tool answers from its SQL store, the compacted turn included.
  const grep = await tools.callTool(session, "lcm_grep", JSON.stringify({ pattern: "pelican-7" }));
  assert.match(grep, /Total matches:\*\* 3/);
  assert.match(grep, /\(user, 2026-01-01 00:00 UTC\): pelican-7/);
  const summaryId = /<summary id="(sum_[0-9a-f]+)"/.exec(textOf(summaries[0]))[1];
  const described = await tools.callTool(session, "lcm_describe", JSON.stringify({ id: summaryId }));
  assert.match(described, /pelican-7/);
  assert.ok(fakeSql.databases.has("lcm"), "its database is one of the engine's SQL databases");

  // A session the host routes under no key (`ctxbox run`'s replays): its
  // sessionTarget carries none either. lossless-claw keeps nothing for a
  // keyless session (its afterTurn skips persisting "past an unreconciled
  // transcript frontier"), so the adapter gives it the key OpenClaw would.
  const keyless = { sessionId: "lcm-s2", sessionKey: undefined, sessionFile: "/sessions/lcm-s2.jsonl" };
  const keylessContext = JSON.stringify({ sessionTarget: { sessionId: keyless.sessionId } });
  const second = new Conversation(engine, keyless, keylessContext);
  conversation.current = second;
  fake.logs.length = 0;
  await second.turn("Note: the backup window is 02:00 to 03:00 on host heron-3.", "Noted: heron-3 backups.", 6_000);
  await second.turn("And the backup retention is 14 days.", "Noted: 14 days.", 6_000);
  assert.deepEqual(fake.logs.filter(({ message }) => /did not cover the transcript frontier/.test(message)), []);
  const stored = await tools.callTool(keyless, "lcm_grep", JSON.stringify({ pattern: "heron-3" }));
  assert.match(stored, /Total matches:\*\* 2/);

  await engine.dispose();
});

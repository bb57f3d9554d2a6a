// Unit tests of the session tracker: every list of messages OpenClaw passes
// is told apart — the session grown, a projection of an answered prompt (its
// second assemble of a turn, a retry, a tool-loop re-entry), a window of the
// newest turns, a reset the runtime made — and only a reset may shrink what
// the sidecar holds. Then the engine against the scripted fake sidecar: an
// OpenClaw turn sends its projection as nothing, a commit the sidecar cannot
// place is resent with the history, and a length that disagrees is mended.

import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { reverseOptions } from "../src/complete.js";
import { readConfig, serveArgs } from "../src/config.js";
import { createEngine } from "../src/engine.js";
import { Sidecar } from "../src/sidecar.js";
import type { TraceEntry } from "../src/trace.js";
import { SESSIONS_KEPT, SessionTracker, classify, digest, projectionLength } from "../src/tracker.js";
import type { AgentMessage, ContextEngine } from "../src/types.js";
import { closedAtEnd } from "./closed-at-end.js";
import { fakeSidecar } from "./fake-sidecar-bin.js";

const CTXBOX_BIN = process.env.CTXBOX_BIN;

const { opened, dirs } = closedAtEnd();

/** `turns` question/answer pairs from turn `first` on. */
function turns(first: number, count: number): AgentMessage[] {
  const messages: AgentMessage[] = [];
  for (let turn = first; turn < first + count; turn++) {
    messages.push({ role: "user", content: `question ${turn}`, timestamp: turn * 10 });
    messages.push({ role: "assistant", content: [{ type: "text", text: `answer ${turn}` }], timestamp: turn * 10 + 1 });
  }
  return messages;
}

const note = (text: string): AgentMessage => ({ role: "custom", customType: "keep-recent", content: text, display: false });

/** A tracker holding `history` of session "s" in the sidecar of `generation`. */
function holding(history: AgentMessage[], generation = { generation: 1 }): SessionTracker {
  const tracker = new SessionTracker();
  const plan = tracker.plan(generation, "s", history);
  assert.equal(plan.relation, "new");
  assert.equal(tracker.settle("s", plan, generation.generation, history.length), true);
  return tracker;
}

const sidecar = { generation: 1 };

test("the session grown sends only what is new, anchored on the last held message", () => {
  const history = turns(0, 30);
  const tracker = holding(history);
  const grown = [...history, ...turns(30, 1)];
  const plan = tracker.plan(sidecar, "s", grown);
  assert.equal(plan.relation, "extends");
  assert.deepEqual([plan.sync.base, plan.sync.baseDigest, plan.sync.messages.length], [60, digest(history[59]), 2]);
  assert.equal(plan.sync.reset, undefined);
  assert.equal(plan.history.length, 62);
  // A retry of the attempt passes the transcript again: nothing to send.
  tracker.settle("s", plan, 1, 62);
  const retry = tracker.plan(sidecar, "s", grown.map((message) => ({ ...message })));
  assert.deepEqual([retry.relation, retry.sync.base, retry.sync.messages.length], ["extends", 62, 0]);
});

test("OpenClaw's second assemble over the first answer's kept messages sends nothing and never shrinks the session", () => {
  const history = turns(0, 30);
  const tracker = holding(history);
  // The first answer: a note and the last 12 messages.
  const prompt = [note("48 earlier messages left out"), ...history.slice(48)];
  tracker.answered("s", prompt);

  const second = tracker.plan(sidecar, "s", prompt);
  assert.equal(second.relation, "projection");
  assert.deepEqual([second.sync.base, second.sync.messages.length], [60, 0], "nothing new, and not base 0 with 13");
  assert.equal(second.history.length, 60, "the sidecar's ranges still mean positions of the whole session");
  assert.equal(second.history[0], history[0]);

  // Without an admitted turn OpenClaw passes the projection followed by the
  // turn's new messages (the prompt, a tool call and its result): only
  // those are sent. OpenClaw may have left an orphan out of the projection.
  const pending = turns(30, 1);
  const reentry = tracker.plan(sidecar, "s", [...prompt.slice(0, 5), ...prompt.slice(6), ...pending]);
  assert.equal(reentry.relation, "projection");
  assert.deepEqual([reentry.sync.base, reentry.sync.messages], [60, pending]);
  assert.equal(reentry.history.length, 62);
});

test("a window of the newest turns (OpenClaw's history limit) is a projection of the history", () => {
  const history = turns(0, 30);
  const tracker = holding(history);
  const plan = tracker.plan(sidecar, "s", [...history.slice(40), ...turns(30, 1)]);
  assert.equal(plan.relation, "projection");
  assert.deepEqual([plan.sync.base, plan.sync.messages.length, plan.history.length], [60, 2, 62]);
  // Nothing at all is never taken for an emptied session either.
  assert.deepEqual(tracker.plan(sidecar, "s", []).sync.messages, []);
  assert.equal(tracker.plan(sidecar, "s", []).history.length, 60);
});

test("a reset the runtime made is sent marked reset, from where it departs from the history", () => {
  const history = turns(0, 30);
  const tracker = holding(history);
  // OpenClaw's own compaction rewrote the transcript: a summary and the newest turns.
  const summary: AgentMessage = { role: "compactionSummary", summary: "earlier: questions 0 to 24", tokensBefore: 9_000, timestamp: 1 };
  const compacted = [summary, ...history.slice(50)];
  const plan = tracker.plan(sidecar, "s", compacted);
  assert.equal(plan.relation, "reset");
  assert.deepEqual([plan.sync.base, plan.sync.reset, plan.sync.messages.length], [0, true, 11]);
  // A branch rolled back to turn 20 and answered differently.
  const rolledBack = [...history.slice(0, 41), { role: "assistant", content: [{ type: "text", text: "another answer" }] }];
  const rollback = tracker.plan(sidecar, "s", rolledBack);
  assert.equal(rollback.relation, "reset");
  assert.deepEqual(
    [rollback.sync.base, rollback.sync.baseDigest, rollback.sync.reset, rollback.sync.messages.length],
    [41, digest(history[40]), true, 1],
  );
  // A prompt's messages that do not reach its end are no projection of it.
  tracker.answered("s", history.slice(50));
  assert.equal(tracker.plan(sidecar, "s", history.slice(50, 55)).relation, "reset");
});

test("a new sidecar, or one whose length disagreed, is sent the kept history in full, even for a projection", () => {
  const history = turns(0, 30);
  const tracker = holding(history);
  const prompt = [note("left out"), ...history.slice(50)];
  tracker.answered("s", prompt);
  const restarted = tracker.plan({ generation: 2 }, "s", prompt);
  assert.deepEqual([restarted.relation, restarted.sync.base, restarted.sync.messages], ["projection", 0, history]);

  const plan = tracker.plan(sidecar, "s", history);
  assert.equal(tracker.settle("s", plan, 1, 12), false, "the sidecar answered 12 of 60");
  const mended = tracker.plan(sidecar, "s", history);
  assert.deepEqual([mended.sync.base, mended.sync.messages.length, mended.sync.reset], [0, 60, undefined]);
  assert.equal(tracker.resend(mended, true).reset, true, "a copy no longer than ours may be replaced");
});

test("a committed turn is appended to the kept history; the least recently used session is forgotten past the bound", () => {
  const history = turns(0, 2);
  const tracker = holding(history);
  const turn = turns(2, 1);
  assert.equal(tracker.appended("s", 1, true, turn, 6), true);
  assert.deepEqual(tracker.fullSync("s")?.messages, [...history, ...turn]);
  assert.equal(tracker.inStep(sidecar, "s"), true);
  assert.equal(tracker.appended("s", 1, true, turn, 99), false, "a length the plugin does not expect");
  assert.equal(tracker.inStep(sidecar, "s"), false);

  for (let index = 0; index < SESSIONS_KEPT; index++) {
    tracker.settle(`other-${index}`, tracker.plan(sidecar, `other-${index}`, history), 1, 4);
  }
  assert.equal(tracker.history("s"), undefined);
  assert.ok(tracker.history(`other-${SESSIONS_KEPT - 1}`));
});

test("a projection is an in-order selection reaching the candidate's last message", () => {
  assert.equal(projectionLength(["a", "c", "x"], ["a", "b", "c"]), 2);
  assert.equal(projectionLength(["a", "b"], ["a", "b", "c"]), 0, "stops short of the end");
  assert.equal(projectionLength(["c", "a"], ["a", "b", "c"]), 1, "c reaches the end; a after it is new");
  assert.equal(projectionLength(["x", "c"], ["a", "b", "c"]), 0, "starts with a message not taken from it");
  assert.deepEqual(classify(["a"], undefined), { relation: "new", kept: 0 });
});

/** The engine on a fake sidecar (scripted by `options`), with its warnings. */
function engineOn(options: Parameters<typeof fakeSidecar>[0]) {
  const fake = fakeSidecar(options);
  const sidecar = new Sidecar({ bin: fake.bin, args: [], reverse: reverseOptions(undefined) });
  opened.push(sidecar);
  const warnings: string[] = [];
  const engine: ContextEngine = createEngine(sidecar, new SessionTracker(), {
    engine: "lossless",
    callTimeoutMs: 5_000,
    ownsCompaction: true,
    warn: (message) => warnings.push(message),
  });
  const sent = (method: string) => fake.log().filter((entry) => entry.line.method === method).map((entry) => entry.line.params!);
  return { engine, warnings, sent };
}

test("an OpenClaw turn: the second assemble sends nothing, and the commit leaves the whole session", async () => {
  const { engine, warnings, sent } = engineOn({ protocol: 2, keepLast: 12 });
  const history = turns(0, 30);
  const first = await engine.assemble({ sessionId: "s", messages: history });
  assert.equal(first.messages.length, 13, "a note and the last 12");
  const second = await engine.assemble({ sessionId: "s", messages: first.messages });
  assert.deepEqual(second.messages, first.messages, "the same prompt, from the whole session");
  assert.deepEqual(await engine.commitTurn({ sessionId: "s", advancementKey: "t30", messages: turns(30, 1) }), { status: "committed" });
  const syncs = sent("assemble").map((params) => [params.sync.base, params.sync.messages.length, params.sync.reset ?? false]);
  assert.deepEqual(syncs, [[0, 60, false], [60, 0, false]]);
  assert.deepEqual(warnings, [], "every length the fake answered agreed");
  // The next turn's first assemble passes the transcript: only the turn is new to it, nothing is sent.
  await engine.assemble({ sessionId: "s", messages: [...history, ...turns(30, 1)] });
  assert.deepEqual(sent("assemble").at(-1)!.sync.base, 62);
});

test("a commit the sidecar cannot place (it gave the session up) is resent with the history and committed", async () => {
  const { engine, warnings, sent } = engineOn({ protocol: 2, evictBefore: ["commitTurn"] });
  const history = turns(0, 5);
  await engine.assemble({ sessionId: "s", messages: history });
  const turn = turns(5, 1);
  assert.deepEqual(await engine.commitTurn({ sessionId: "s", advancementKey: "t5", messages: turn }), { status: "committed" });
  const commits = sent("commitTurn");
  assert.equal(commits.length, 2);
  assert.equal(commits[0].sync, undefined);
  assert.deepEqual([commits[1].sync.base, commits[1].sync.messages.length, commits[1].advancementKey], [0, 10, "t5"]);
  assert.deepEqual(warnings, []);
  // Without the history (a process that never assembled it), the turn is left to the next sync.
  assert.deepEqual(await engine.commitTurn({ sessionId: "other", advancementKey: "t0", messages: turn }), { status: "committed" });
  assert.match(warnings.join("\n"), /commitTurn answered without the engine: session-unknown/);
});

test("a length the sidecar answers that is not the plugin's is mended by a full resend at the next call", async () => {
  const { engine, warnings, sent } = engineOn({ protocol: 2, evictBefore: ["ingest"] });
  const history = turns(0, 5);
  await engine.assemble({ sessionId: "s", messages: history });
  // The sidecar gave the session up before an ingest: it now holds 1 message, the plugin 11.
  const question = turns(5, 1)[0];
  await engine.ingest({ sessionId: "s", message: question });
  assert.match(warnings.join("\n"), /ingest: the sidecar holds 1 messages of session s, this plugin 11/);
  await engine.assemble({ sessionId: "s", messages: [...history, question] });
  const last = sent("assemble").at(-1)!;
  assert.deepEqual([last.sync.base, last.sync.messages.length], [0, 11]);
  assert.equal(warnings.length, 1, "agreed again");
});

test("with the real sidecar, a turn's second assemble and its commit leave the whole session", { skip: !CTXBOX_BIN && "set CTXBOX_BIN to a built ctxbox" }, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "ctxbox-tracker-"));
  dirs.push(dataDir);
  const sidecar = new Sidecar({ bin: CTXBOX_BIN!, args: serveArgs(readConfig({ engine: "keep-recent", dataDir })) });
  opened.push(sidecar);
  const warnings: string[] = [];
  const traced: TraceEntry[] = [];
  const engine = createEngine(sidecar, new SessionTracker(), {
    engine: "keep-recent",
    callTimeoutMs: 20_000,
    ownsCompaction: false,
    warn: (message) => warnings.push(message),
    trace: (entry) => traced.push(entry),
  });
  const padded = (text: string) => `${text} ${"words ".repeat(30)}`;
  const history = turns(0, 30).map((message, index) =>
    message.role === "user"
      ? { ...message, content: padded(message.content as string) }
      : { ...message, content: [{ type: "text", text: padded(`answer ${index}`) }] },
  );
  const first = await engine.assemble({ sessionId: "s", messages: history, tokenBudget: 800 });
  assert.ok(first.messages.length < 20, `keep-recent kept ${first.messages.length} of 60: ${warnings.join("; ")} ${JSON.stringify(traced)}`);
  const second = await engine.assemble({ sessionId: "s", messages: first.messages, tokenBudget: 800 });
  assert.equal(second.messages.length, first.messages.length, "the same prompt again");
  assert.equal(second.messages.at(-1), history.at(-1));
  const turn = turns(30, 1);
  assert.deepEqual(await engine.commitTurn({ sessionId: "s", advancementKey: "t30", messages: turn }), { status: "committed" });
  assert.deepEqual(
    traced.map((entry) => [entry.method, entry.length]),
    [
      ["assemble", 60],
      ["assemble", 60],
      ["commitTurn", 62],
    ],
  );
  assert.deepEqual(warnings, []);
});

// The OpenClaw SDK modules of the sandbox (src/openclaw/plugin-sdk/) and
// the message conversion under them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { fake, sdkModule } from "./openclaw-source.mjs";

const { fromOpenClaw, toOpenClaw, sameMessageKey } = await sdkModule("openclaw/messages");
const { duringSessionCall } = await sdkModule("openclaw/call");
const { readVisibleSessionTranscriptMessageEntries } = await sdkModule("openclaw/plugin-sdk/session-transcript-runtime");
const { redactSensitiveText } = await sdkModule("openclaw/plugin-sdk/logging-core");

const blocks = [
  { tag: "thinking", val: { text: "hmm", signature: "sig" } },
  { tag: "text", val: "reading" },
  { tag: "tool-call", val: { id: "c1", name: "read", argumentsJson: '{"path":"a"}' } },
];
const everyKind = [
  { tag: "user", val: { content: [{ tag: "text", val: "hi" }, { tag: "image", val: { mimeType: "image/png", data: "AAAA" } }] } },
  {
    tag: "assistant",
    val: {
      content: blocks,
      model: "m",
      provider: "p",
      usage: { input: 5n, output: 2n, cacheRead: 1n, cacheWrite: 0n, total: 8n },
      stopReason: "tool-use",
      errorMessage: undefined,
    },
  },
  { tag: "tool-result", val: { toolCallId: "c1", toolName: "read", content: [{ tag: "text", val: "data" }], isError: false, details: '{"lines":3}' } },
  { tag: "custom", val: { customType: "note", content: [{ tag: "text", val: "n" }], display: true, details: undefined } },
  { tag: "compaction-summary", val: { summary: "before", tokensBefore: 900n } },
  { tag: "branch-summary", val: { summary: "elsewhere", fromId: "e7" } },
];

test("every kind of message goes to OpenClaw's shape and back unchanged", () => {
  for (const message of everyKind) assert.deepEqual(fromOpenClaw(toOpenClaw(message, 5)), message);
  const openclaw = toOpenClaw(everyKind[1], 5);
  assert.equal(openclaw.stopReason, "toolUse");
  assert.deepEqual(openclaw.content[2], { type: "toolCall", id: "c1", name: "read", arguments: { path: "a" } });
  assert.deepEqual(openclaw.content[0], { type: "thinking", thinking: "hmm", thinkingSignature: "sig" });
  assert.equal(openclaw.usage.totalTokens, 8);
  assert.deepEqual(toOpenClaw(everyKind[2], 5).details, { lines: 3 });
});

test("OpenClaw messages the contract has no case for are kept as hidden custom messages", () => {
  assert.deepEqual(fromOpenClaw({ role: "user", content: "plain" }), { tag: "user", val: { content: [{ tag: "text", val: "plain" }] } });
  const odd = { role: "bashExecution", command: "ls", output: "a" };
  assert.deepEqual(fromOpenClaw(odd), {
    tag: "custom",
    val: { customType: "bashExecution", content: [{ tag: "text", val: JSON.stringify(odd) }], display: false, details: undefined },
  });
  // A provider's own block is kept as its JSON text.
  const unknownBlock = { type: "redacted_thinking", data: "x" };
  assert.deepEqual(fromOpenClaw({ role: "assistant", content: [unknownBlock] }).val.content, [{ tag: "text", val: JSON.stringify(unknownBlock) }]);
});

test("the same message is the same whatever the metadata an engine's store kept", () => {
  const stored = toOpenClaw(everyKind[1], 5);
  const rebuilt = { role: "assistant", content: [{ type: "thinking", thinking: "hmm" }, { type: "text", text: "reading" }, { type: "toolCall", id: "c1", name: "read", arguments: { path: "a" } }] };
  assert.equal(sameMessageKey(fromOpenClaw(rebuilt)), sameMessageKey(fromOpenClaw(stored)));
  assert.notEqual(sameMessageKey(fromOpenClaw({ ...rebuilt, content: "reading" })), sameMessageKey(fromOpenClaw(stored)));
});

const session = { sessionId: "s1", sessionKey: "k", sessionFile: "/s1.jsonl" };
const entryAt = (at) => ({ id: `e${at}`, parentId: at === 0 ? undefined : `e${at - 1}`, timestampMs: BigInt(at * 1000), message: { tag: "user", val: { content: [{ tag: "text", val: `m${at}` }] } } });

test("readVisibleSessionTranscriptMessageEntries pages the host's transcript and starts again when the branch moved", async () => {
  const page = (ids, cursor, hasMore) => ({ tag: "page", val: { cursor, entries: ids.map(entryAt), hasMore } });
  const reset = (cursor, reason) => ({ tag: "reset", val: { cursor, reason } });
  const script = [
    [undefined, page([0, 1], "c2", true)],
    ["c2", reset("c0", "anchor_missing: entry `e1` is no longer on the active branch")],
    [undefined, page([0, 1], "c2", true)],
    ["c2", page([2], "c3", true)],
    ["c3", reset("c4", "entry `e3` (99 bytes) is larger than the 10-byte page cap and was skipped")],
    ["c4", page([4, 5], "c6", false)],
  ];
  const reads = [];
  const original = fake.host.readTranscriptDelta;
  fake.host.readTranscriptDelta = (cursor) => {
    reads.push(cursor);
    const [expected, answer] = script[reads.length - 1];
    assert.equal(cursor, expected);
    return answer;
  };
  try {
    const entries = await duringSessionCall(session, "bootstrap", () => readVisibleSessionTranscriptMessageEntries({ sessionId: "s1", sessionKey: "k" }));
    assert.deepEqual(entries.map((entry) => entry.entryId), ["e0", "e1", "e2", "e4", "e5"]);
    assert.deepEqual(entries.map((entry) => entry.seq), [1, 2, 3, 4, 5]);
    assert.deepEqual(entries[1], {
      entryId: "e1",
      parentId: "e0",
      seq: 2,
      message: { role: "user", content: [{ type: "text", text: "m1" }], timestamp: 1000 },
      role: "user",
      createdAt: "1970-01-01T00:00:01.000Z",
    });
    assert.equal(reads.length, script.length);
    await assert.rejects(
      duringSessionCall(session, "assemble", () => readVisibleSessionTranscriptMessageEntries({ sessionId: "other", sessionKey: "k" })),
      /current session \(s1\) only, not other/,
    );
    fake.host.readTranscriptDelta = original;
    assert.deepEqual(await duringSessionCall(session, "assemble", () => readVisibleSessionTranscriptMessageEntries({ sessionId: "s1" })), []);
  } finally {
    fake.host.readTranscriptDelta = original;
  }
});

test("redactSensitiveText masks secrets as OpenClaw does and leaves text alone when off", () => {
  const key = "sk-proj-abcdefghijklmnopqrstuvwxyz123456";
  assert.equal(redactSensitiveText(`using ${key} now`), "using sk-pro…3456 now");
  assert.equal(redactSensitiveText("password=hunter2"), "password=***");
  assert.equal(redactSensitiveText("Authorization: Bearer abcdefghijklmnopqrstuvwxyz"), "Authorization: Bearer abcdef…wxyz");
  assert.equal(redactSensitiveText("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"), "[REDACTED_PRIVATE_KEY]");
  assert.equal(redactSensitiveText(`off ${key}`, { mode: "off" }), `off ${key}`);
  assert.equal(redactSensitiveText("plain words stay"), "plain words stay");
  assert.equal(redactSensitiveText("id 12345 and 67890", { patterns: ["\\d{5}", "/(\\d{3})90/"] }), "id *** and ***");
});

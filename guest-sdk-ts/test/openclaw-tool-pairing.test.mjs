// The repair OpenClaw applies to an engine's assembled messages before the
// model sees them (repairToolUseResultPairing), as the adapter ports it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { sdkModule } from "./sdk-source.mjs";

const { repairToolPairing, MISSING_TOOL_RESULT_TEXT } = await sdkModule("openclaw/tool-pairing");

const user = (text) => ({ role: "user", content: text, timestamp: 1 });
const call = (...ids) => ({ role: "assistant", content: ids.map((id) => ({ type: "toolCall", id, name: "exec", arguments: {} })), stopReason: "toolUse", timestamp: 2 });
const result = (id, text = `out ${id}`) => ({ role: "toolResult", toolCallId: id, toolName: "exec", content: [{ type: "text", text }], isError: false, timestamp: 3 });
const reply = (text) => ({ role: "assistant", content: [{ type: "text", text }], stopReason: "stop", timestamp: 4 });

test("a well-paired prompt is the same array", () => {
  const messages = [user("hi"), call("a", "b"), result("a"), result("b"), reply("done")];
  assert.equal(repairToolPairing(messages), messages);
});

test("a result whose call was left out is dropped, as are results before any call and second results", () => {
  const messages = [user("summary"), result("gone"), user("next"), call("a"), result("a"), result("a", "again"), reply("done")];
  assert.deepEqual(repairToolPairing(messages), [user("summary"), user("next"), call("a"), result("a"), reply("done")]);
});

test("results follow their call in call order, the frame's other messages after them", () => {
  const messages = [call("a", "b"), user("steer"), result("b"), result("a")];
  assert.deepEqual(repairToolPairing(messages), [call("a", "b"), result("a"), result("b"), user("steer")]);
});

test("a result arriving after a later call answers its own earlier call", () => {
  const messages = [call("a"), call("b"), result("b"), result("a")];
  assert.deepEqual(repairToolPairing(messages), [call("a"), result("a"), call("b"), result("b")]);
});

test("a call without a result gets OpenClaw's error result", () => {
  const [assistant, missing, last] = repairToolPairing([call("a"), reply("done")]);
  assert.deepEqual(assistant, call("a"));
  assert.equal(missing.role, "toolResult");
  assert.equal(missing.toolCallId, "a");
  assert.equal(missing.isError, true);
  assert.equal(missing.content[0].text, MISSING_TOOL_RESULT_TEXT);
  assert.deepEqual(last, reply("done"));
});

test("a failed assistant message's frame is dropped with its results; what followed stays", () => {
  const failed = { ...call("a"), stopReason: "error" };
  assert.deepEqual(repairToolPairing([user("hi"), failed, result("a"), user("again")]), [user("hi"), user("again")]);
});

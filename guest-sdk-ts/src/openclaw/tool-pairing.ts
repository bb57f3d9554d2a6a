/**
 * What OpenClaw does to an engine's assembled messages before the model sees
 * them (its transcript policy's `repairToolUseResultPairing`, on by
 * default): every tool call is followed by its result. OpenClaw engines are
 * written against that repair and may answer a prompt that breaks the
 * pairing (lossless-claw keeps a tool result whose call was summarized
 * away); the ctxbox contract refuses such an answer, so the adapter repairs
 * it first, the way OpenClaw does it for the model:
 *
 * - an assistant message with tool calls starts a frame that runs to the
 *   next such message; the results in it answer its calls in call order,
 *   right after it, and the frame's other messages follow them;
 * - a result that answers no call of its frame goes to the one unanswered
 *   call of that id in this or an earlier frame, else it is dropped, as are
 *   results before any frame and second results for the same call;
 * - a call left without a result gets an error result saying so;
 * - a frame whose assistant message failed (`error`, `aborted`) is dropped
 *   with its results; the frame's other messages stay.
 */
import type { OpenClawMessage } from "./messages.js";

/** Block types OpenClaw reads as a tool call. */
const TOOL_CALL_TYPES = new Set(["toolCall", "toolUse", "functionCall"]);

/** The text of the result OpenClaw writes for a call left without one. */
export const MISSING_TOOL_RESULT_TEXT = "[openclaw] missing tool result in session history; inserted synthetic error result for transcript repair.";

/** One tool call of a frame and the result found for it. */
interface Call {
  id: string;
  name: string | undefined;
  result?: OpenClawMessage;
}

/** An assistant message with tool calls and what follows it up to the next one. */
interface Frame {
  assistant: OpenClawMessage;
  calls: Call[];
  others: OpenClawMessage[];
  failed: boolean;
}

const record = (value: unknown): Record<string, unknown> => (value !== null && typeof value === "object" ? (value as Record<string, unknown>) : {});

/** The tool calls of an assistant message (none for any other). */
function callsOf(message: OpenClawMessage): Call[] {
  const content = record(message).content;
  if (message.role !== "assistant" || !Array.isArray(content)) return [];
  return content.flatMap((block) => {
    const { type, id, name } = record(block);
    if (typeof type !== "string" || !TOOL_CALL_TYPES.has(type) || typeof id !== "string" || id === "") return [];
    return [{ id, name: typeof name === "string" ? name : undefined }];
  });
}

/** The call id a tool result answers, under any of the names OpenClaw reads. */
function resultId(message: OpenClawMessage): string | undefined {
  const fields = record(message);
  for (const key of ["toolCallId", "toolUseId", "tool_call_id", "tool_use_id", "callId", "call_id"]) {
    const value = fields[key];
    if (typeof value === "string" && value.trim() !== "") return value.trim();
  }
  return undefined;
}

/** The error result OpenClaw writes for a call left without one. */
function missingResult(call: Call): OpenClawMessage {
  return {
    role: "toolResult",
    toolCallId: call.id,
    toolName: call.name ?? "unknown",
    content: [{ type: "text", text: MISSING_TOOL_RESULT_TEXT }],
    details: { openclawSyntheticMissingToolResult: true, reason: "missing_tool_result" },
    isError: true,
    timestamp: Date.now(),
  };
}

/** `messages` with every tool call followed by its result (see the module's comment); the same array when nothing changes. */
export function repairToolPairing(messages: OpenClawMessage[]): OpenClawMessage[] {
  const before: OpenClawMessage[] = [];
  const frames: Frame[] = [];
  const unanswered = new Map<string, Call[]>();
  for (const message of messages) {
    const calls = callsOf(message);
    if (calls.length > 0) {
      const stopReason = record(message).stopReason;
      frames.push({ assistant: message, calls, others: [], failed: stopReason === "error" || stopReason === "aborted" });
      for (const call of calls) unanswered.set(call.id, [...(unanswered.get(call.id) ?? []), call]);
      continue;
    }
    const frame = frames.at(-1);
    if (message.role !== "toolResult") {
      (frame ? frame.others : before).push(message);
      continue;
    }
    const id = resultId(message);
    const own = frame?.calls.find((call) => call.id === id && call.result === undefined);
    const open = own ? [own] : (unanswered.get(id ?? "") ?? []).filter((call) => call.result === undefined);
    // Before any call, a second result for a call, or one no single call is waiting for: dropped.
    if (open.length !== 1) continue;
    open[0]!.result = message;
  }
  const repaired = [...before];
  for (const frame of frames) {
    if (!frame.failed) repaired.push(frame.assistant, ...frame.calls.map((call) => call.result ?? missingResult(call)));
    repaired.push(...frame.others);
  }
  const same = repaired.length === messages.length && repaired.every((message, at) => message === messages[at]);
  return same ? messages : repaired;
}

/**
 * OpenClaw's `AgentMessage` objects (the JSON of its session transcripts) and
 * the contract's `agent-message`, both ways: what an OpenClaw engine is given
 * is read from the history the host lends, what it answers is mapped back.
 * The shapes follow the host's own reading of transcripts
 * (`host/src/transcript/wire.rs`): block and field names, stop reasons,
 * `custom` and the two summary roles.
 */
import type { AgentMessage, ContentBlock, MessageEntry, StopReason, Usage } from "../wit.js";

/** An OpenClaw message: `role` and the fields of that role, as plain JSON. */
export type OpenClawMessage = { role: string; [field: string]: unknown };

/** The contract's stop reasons by their OpenClaw names (the same words but `toolUse`). */
const STOP_REASONS: Record<string, StopReason> = {
  stop: "stop",
  length: "length",
  toolUse: "tool-use",
  error: "error",
  aborted: "aborted",
};

/** A JSON value the contract carries as text, parsed (`undefined` stays undefined, bad JSON stays text). */
function parsed(json: string | undefined): unknown {
  if (json === undefined) return undefined;
  try {
    return JSON.parse(json);
  } catch {
    return json;
  }
}

/** One content block as OpenClaw writes it. */
function blockToOpenClaw(block: ContentBlock): Record<string, unknown> {
  switch (block.tag) {
    case "text":
      return { type: "text", text: block.val };
    case "thinking":
      return {
        type: "thinking",
        thinking: block.val.text,
        ...(block.val.signature === undefined ? {} : { thinkingSignature: block.val.signature }),
      };
    case "image":
      return { type: "image", data: block.val.data, mimeType: block.val.mimeType };
    case "tool-call":
      return { type: "toolCall", id: block.val.id, name: block.val.name, arguments: parsed(block.val.argumentsJson) ?? {} };
  }
}

/** A usage record as OpenClaw's assistant messages carry it (with a zero cost: the host does not price). */
function usageToOpenClaw(usage: Usage): Record<string, unknown> {
  return {
    input: Number(usage.input),
    output: Number(usage.output),
    cacheRead: Number(usage.cacheRead),
    cacheWrite: Number(usage.cacheWrite),
    totalTokens: Number(usage.total),
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  };
}

/** `message` as an OpenClaw `AgentMessage` stamped `timestamp` (ms since the epoch). */
export function toOpenClaw(message: AgentMessage, timestamp: number): OpenClawMessage {
  switch (message.tag) {
    case "user":
      return { role: "user", content: message.val.content.map(blockToOpenClaw), timestamp };
    case "assistant": {
      const { content, model, provider, usage, stopReason, errorMessage } = message.val;
      return {
        role: "assistant",
        content: content.map(blockToOpenClaw),
        api: "ctxbox",
        provider: provider ?? "ctxbox",
        model: model ?? "ctxbox",
        usage: usageToOpenClaw(usage ?? { input: 0n, output: 0n, cacheRead: 0n, cacheWrite: 0n, total: 0n }),
        stopReason: stopReason === "tool-use" ? "toolUse" : stopReason,
        ...(errorMessage === undefined ? {} : { errorMessage }),
        timestamp,
      };
    }
    case "tool-result": {
      const { toolCallId, toolName, content, isError, details } = message.val;
      return {
        role: "toolResult",
        toolCallId,
        toolName,
        content: content.map(blockToOpenClaw),
        isError,
        ...(details === undefined ? {} : { details: parsed(details) }),
        timestamp,
      };
    }
    case "custom": {
      const { customType, content, display, details } = message.val;
      return {
        role: "custom",
        customType,
        content: content.map(blockToOpenClaw),
        display,
        ...(details === undefined ? {} : { details: parsed(details) }),
        timestamp,
      };
    }
    case "compaction-summary":
      return {
        role: "compactionSummary",
        summary: message.val.summary,
        tokensBefore: Number(message.val.tokensBefore),
        timestamp,
      };
    case "branch-summary":
      return { role: "branchSummary", summary: message.val.summary, fromId: message.val.fromId, timestamp };
  }
}

/** A history entry's message as OpenClaw's engines receive it. */
export function entryToOpenClaw(entry: MessageEntry): OpenClawMessage {
  return toOpenClaw(entry.message, Number(entry.timestampMs));
}

const text = (value: unknown): string => (typeof value === "string" ? value : "");

/** A non-negative count from whatever a message wrote. */
function count(value: unknown): bigint {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? BigInt(Math.floor(value)) : 0n;
}

/**
 * One OpenClaw content block in the contract's terms: the four kinds it has
 * as themselves, anything else (a provider's own block) kept as its JSON text.
 */
function blockFromOpenClaw(block: unknown): ContentBlock {
  if (typeof block === "string") return { tag: "text", val: block };
  const fields = (block ?? {}) as Record<string, unknown>;
  switch (fields.type) {
    case "text":
      return { tag: "text", val: text(fields.text) };
    case "thinking":
      return {
        tag: "thinking",
        val: {
          text: text(fields.thinking),
          signature: typeof fields.thinkingSignature === "string" ? fields.thinkingSignature : undefined,
        },
      };
    case "image":
      return { tag: "image", val: { data: text(fields.data), mimeType: text(fields.mimeType) } };
    case "toolCall":
      return {
        tag: "tool-call",
        val: { id: text(fields.id), name: text(fields.name), argumentsJson: JSON.stringify(fields.arguments ?? {}) },
      };
    default:
      return { tag: "text", val: JSON.stringify(block) };
  }
}

/** A message's `content` (a string or a list of blocks) as blocks. */
function contentFromOpenClaw(content: unknown): ContentBlock[] {
  if (typeof content === "string") return [{ tag: "text", val: content }];
  return Array.isArray(content) ? content.map(blockFromOpenClaw) : [];
}

/** A `details` bag as the contract's JSON text. */
const detailsJson = (details: unknown): string | undefined =>
  details === undefined ? undefined : JSON.stringify(details);

/**
 * An OpenClaw message in the contract's terms. A role the contract has no
 * case for is kept, as the host keeps it, as a hidden custom message of that
 * type holding the message's JSON, so it still reaches the model.
 */
export function fromOpenClaw(message: OpenClawMessage): AgentMessage {
  const fields = message as Record<string, unknown>;
  switch (message.role) {
    case "user":
      return { tag: "user", val: { content: contentFromOpenClaw(fields.content) } };
    case "assistant": {
      const usage = fields.usage as Record<string, unknown> | undefined;
      return {
        tag: "assistant",
        val: {
          content: contentFromOpenClaw(fields.content),
          model: typeof fields.model === "string" ? fields.model : undefined,
          provider: typeof fields.provider === "string" ? fields.provider : undefined,
          usage:
            usage === undefined
              ? undefined
              : {
                  input: count(usage.input),
                  output: count(usage.output),
                  cacheRead: count(usage.cacheRead),
                  cacheWrite: count(usage.cacheWrite),
                  total: count(usage.totalTokens),
                },
          stopReason: STOP_REASONS[text(fields.stopReason)] ?? "stop",
          errorMessage: typeof fields.errorMessage === "string" ? fields.errorMessage : undefined,
        },
      };
    }
    case "toolResult":
      return {
        tag: "tool-result",
        val: {
          toolCallId: text(fields.toolCallId ?? fields.toolUseId),
          toolName: text(fields.toolName),
          content: contentFromOpenClaw(fields.content),
          isError: fields.isError === true,
          details: detailsJson(fields.details),
        },
      };
    case "custom":
      return {
        tag: "custom",
        val: {
          customType: text(fields.customType),
          content: contentFromOpenClaw(fields.content),
          display: fields.display === true,
          details: detailsJson(fields.details),
        },
      };
    case "compactionSummary":
      return { tag: "compaction-summary", val: { summary: text(fields.summary), tokensBefore: count(fields.tokensBefore) } };
    case "branchSummary":
      return { tag: "branch-summary", val: { summary: text(fields.summary), fromId: text(fields.fromId) } };
    default:
      return {
        tag: "custom",
        val: {
          customType: text(message.role),
          content: [{ tag: "text", val: JSON.stringify(message) }],
          display: false,
          details: undefined,
        },
      };
  }
}

/**
 * What makes two messages the same message for the model: the kind, the
 * content and what pairs a tool result with its call, without the metadata
 * an engine's store may not keep (usage, model, timestamps, details). A
 * message an engine answers that has the key of a history entry is that
 * entry, kept as it is.
 */
export function sameMessageKey(message: AgentMessage): string {
  const content = (blocks: ContentBlock[]): unknown[] =>
    blocks.map((block) => {
      if (block.tag === "thinking") return { tag: block.tag, text: block.val.text };
      // Arguments as parsed and written again: the same object whatever its spacing.
      if (block.tag === "tool-call") return { ...block.val, argumentsJson: JSON.stringify(parsed(block.val.argumentsJson)) };
      return block;
    });
  switch (message.tag) {
    case "user":
    case "assistant":
      return JSON.stringify([message.tag, content(message.val.content)]);
    case "tool-result":
      return JSON.stringify([message.tag, message.val.toolCallId, message.val.isError, content(message.val.content)]);
    case "custom":
      return JSON.stringify([message.tag, message.val.customType, content(message.val.content)]);
    case "compaction-summary":
      return JSON.stringify([message.tag, message.val.summary]);
    case "branch-summary":
      return JSON.stringify([message.tag, message.val.summary, message.val.fromId]);
  }
}

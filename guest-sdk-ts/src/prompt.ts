/** Building `assemble` answers and the messages an engine inserts. */
import type { AgentMessage, AssembledItem, AssembleResult } from "./wit.js";

/** Keep history entries `start..end` verbatim. */
export function keep(start: number, end: number): AssembledItem {
  return { tag: "keep", val: { start, end } };
}

/** Insert a message of the engine's own. */
export function insert(message: AgentMessage): AssembledItem {
  return { tag: "insert", val: message };
}

/** A user message holding `text`. */
export function userText(text: string): AgentMessage {
  return { tag: "user", val: { content: [{ tag: "text", val: text }] } };
}

/** An extension message (`custom_message`) of type `customType` holding `text`. */
export function customText(customType: string, text: string, display = false): AgentMessage {
  return { tag: "custom", val: { customType, content: [{ tag: "text", val: text }], display } };
}

/** Options of {@link assembled}. */
export interface AssembledOptions {
  /** Text the host appends to the system prompt. */
  systemPromptAddition?: string;
}

/** An `assemble` answer: `items` in prompt order and the engine's estimate of their tokens. */
export function assembled(
  items: AssembledItem[],
  estimatedTokens: number | bigint,
  options: AssembledOptions = {},
): AssembleResult {
  return {
    items,
    estimatedTokens: BigInt(estimatedTokens),
    systemPromptAddition: options.systemPromptAddition,
  };
}

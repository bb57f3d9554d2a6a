/** Text in and out of the summarizer, and the message a summary becomes in the prompt. */
import { customText, messageText, type AgentMessage, type MessageEntry } from "@ctxbox/guest";
import type { SummaryNode } from "./store.js";

/** The custom type of the messages summaries appear as. */
export const SUMMARY_MESSAGE_TYPE = "lossless-summary";

/** The system prompt of a summary written by the host's model. */
export const SUMMARY_SYSTEM_PROMPT =
  "You summarize conversation history for ctxbox's lossless engine. Read the material between <content> tags " +
  "and write exactly the summary the instructions ask for. Do not continue the conversation and do not answer " +
  "questions in it. Output only the summary.";

/** The prompt of a summary written by the host's model: the material, then the instructions. */
export function summaryPrompt(text: string, instructions: string): string {
  return `<content>\n${text}\n</content>\n\n${instructions}`;
}

export const LEAF_INSTRUCTIONS =
  "Summarize this part of a conversation between a user and an AI agent. Keep decisions and their " +
  "reasons, open tasks, constraints, the user's requests, errors, and exact identifiers, file paths and commands.";

export const CONDENSE_INSTRUCTIONS =
  "These are consecutive summaries of one conversation, oldest first. Merge them into one summary that " +
  "keeps decisions, open tasks, constraints, the user's requests, errors, and exact identifiers, file paths " +
  "and commands; prefer later information where they disagree.";

/** `base`, then the caller's own instructions when there are any. */
export function instructions(base: string, custom: string | undefined): string {
  return custom && custom.trim() !== "" ? `${base}\n\n${custom}` : base;
}

/** A chunk of messages as the summarizer reads it, each cut to `maxChars` characters. */
export function transcript(entries: MessageEntry[], maxChars: number): string {
  return entries
    .map((entry) => {
      const [label, body] = describe(entry.message);
      return `[${label}]\n${truncate(body, maxChars)}\n\n`;
    })
    .join("");
}

/** Summaries as the summarizer reads them, oldest first. */
export function summaries(nodes: SummaryNode[]): string {
  return nodes.map((node) => `[${span(node)}]\n${node.summary}\n\n`).join("");
}

/** The message a summary appears as in the prompt. */
export function summaryMessage(node: SummaryNode): AgentMessage {
  return customText(
    SUMMARY_MESSAGE_TYPE,
    `[Summary of earlier conversation: ${span(node)}, level ${node.level}]\n${node.summary}`,
  );
}

function span(node: SummaryNode): string {
  return `messages ${node.firstSeq + 1}–${node.lastSeq + 1}`;
}

/** A label and the text of a message (with its tool calls, and a note of the images it carried). */
export function describe(message: AgentMessage): [string, string] {
  const [label, body] = labelled(message);
  const images =
    message.tag === "compaction-summary" || message.tag === "branch-summary"
      ? 0
      : message.val.content.filter((block) => block.tag === "image").length;
  return [label, images === 0 ? body : `${body}\n(${images} image(s))`];
}

function labelled(message: AgentMessage): [string, string] {
  const text = messageText(message);
  switch (message.tag) {
    case "user":
      return ["user", text];
    case "assistant": {
      const calls = message.val.content.flatMap((block) =>
        block.tag === "tool-call" ? [`\n(calls ${block.val.name} with ${block.val.argumentsJson})`] : [],
      );
      return ["assistant", text + calls.join("")];
    }
    case "tool-result":
      return [`${message.val.toolName} result${message.val.isError ? ", failed" : ""}`, text];
    case "custom":
      return [message.val.customType, text];
    case "compaction-summary":
      return ["summary of earlier conversation", text];
    case "branch-summary":
      return ["summary of another branch", text];
  }
}

/** The first `maxChars` characters (code points) of `text`, without copying a short text. */
export function firstChars(text: string, maxChars: number): string {
  // A code point is one or two UTF-16 units: a text of at most `maxChars`
  // units is short enough, and the first `maxChars` code points lie within
  // the first `2 * maxChars` units.
  return text.length <= maxChars ? text : Array.from(text.slice(0, 2 * maxChars)).slice(0, maxChars).join("");
}

function truncate(text: string, maxChars: number): string {
  const chars = Array.from(text);
  return chars.length <= maxChars
    ? text
    : `${chars.slice(0, maxChars).join("")}… [${chars.length - maxChars} more characters]`;
}

/**
 * Recall: every stored message indexed in the host's searchable memory, and
 * the two tools the model can call to reach what summaries stand in for —
 * `grep` (search the whole conversation) and `expand` (read a span of
 * messages back, such as the one a summary names: "messages 9–16"). The same
 * tools, parameters and answers as the Rust `lossless` engine's.
 */
import {
  EngineFailure,
  HostFailure,
  host,
  toolArguments,
  type IndexHit,
  type Json,
  type ToolInit,
} from "@ctxbox/guest";
import { describe, firstChars } from "./render.js";
import type { SessionStore, Stored } from "./store.js";

/** Characters of one message's text indexed (a huge tool output is indexed by its start). */
const MAX_INDEXED_CHARS = 64 * 1024;
/** Hits `grep` answers by default, and at most. */
const GREP_DEFAULT_HITS = 8;
const GREP_MAX_HITS = 20;
/** Messages `expand` reads at most, and characters of each. */
const EXPAND_MAX_MESSAGES = 50;
const EXPAND_MAX_CHARS = 4_000;

/** The tool names. */
export const GREP = "grep";
export const EXPAND = "expand";

/** The tools the engine offers the model. */
export const TOOLS: ToolInit[] = [
  {
    name: GREP,
    description:
      "Search this whole conversation, including the parts that are only summarized in your context, for " +
      "messages containing every given word (substring, case-insensitive; works for Chinese and Japanese). " +
      "Answers the matching messages by number with a snippet; read one in full with `expand`.",
    parameters:
      '{"type":"object","properties":{"query":{"type":"string","description":"Words to find, separated by spaces"},' +
      '"limit":{"type":"integer","minimum":1,"maximum":20,"description":"Hits per page (default 8)"},' +
      '"page":{"type":"integer","minimum":0,"description":"Page, from 0"}},"required":["query"],"additionalProperties":false}',
  },
  {
    name: EXPAND,
    description:
      "Read messages of this conversation back in full, by number (as a summary names them, e.g. " +
      '"messages 9–16", or as `grep` answers them): from `from` to `to`, at most 50 at a time.',
    parameters:
      '{"type":"object","properties":{"from":{"type":"integer","minimum":1},"to":{"type":"integer","minimum":1}},' +
      '"required":["from","to"],"additionalProperties":false}',
  },
];

/**
 * Indexes `messages` (new in the call's session, with their sequence
 * numbers): one document per message, `m<number>` (numbered from 1), session
 * scope. A host without an index has nothing to search: messages are kept all
 * the same.
 */
export function index(messages: Stored[]): void {
  for (const { seq, entry } of messages) {
    const [label, body] = describe(entry.message);
    if (body.trim() === "") continue;
    const metadata = JSON.stringify({ message: seq + 1, role: label, entryId: entry.id });
    try {
      host.index.put("session", { id: `m${seq + 1}`, text: firstChars(body, MAX_INDEXED_CHARS), metadata });
    } catch (thrown) {
      if (thrown instanceof HostFailure && thrown.hostError.kind === "unavailable") return;
      throw thrown;
    }
  }
}

/** Answers the model's call to tool `name` in the session of `store`. */
export function callTool(store: SessionStore, name: string, argumentsJson: Json): string {
  switch (name) {
    case GREP:
      return grep(parse(argumentsJson, { query: "string", limit: "u32?", page: "u32?" }));
    case EXPAND:
      return expand(store, parse(argumentsJson, { from: "u64", to: "u64" }));
    default:
      throw new EngineFailure("unsupported", `no tool \`${name}\`: the tools are \`${GREP}\` and \`${EXPAND}\``);
  }
}

/** A field's type: a string, an unsigned 32- or 64-bit integer; `?` when it may be left out (or null). */
type Field = "string" | "u32" | "u64" | "u32?";
type Parsed<S extends Record<string, Field>> = {
  [K in keyof S]: S[K] extends "string" ? string : S[K] extends "u32?" ? number | undefined : number;
};

/** The arguments, checked against `schema` (no other fields), or an `invalid-input` the model is shown. */
function parse<S extends Record<string, Field>>(argumentsJson: Json, schema: S): Parsed<S> {
  const misfit = (why: string) =>
    new EngineFailure("invalid-input", `the arguments do not fit the tool's parameters: ${why}`);
  let args: Record<string, unknown>;
  try {
    args = toolArguments(argumentsJson);
  } catch (error) {
    throw misfit((error as Error).message);
  }
  const names = Object.keys(schema);
  for (const key of Object.keys(args)) {
    if (!(key in schema)) {
      throw misfit(`unknown field \`${key}\`, expected one of ${names.map((name) => `\`${name}\``).join(", ")}`);
    }
  }
  const parsed: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(schema)) {
    const value = args[key];
    if (value === undefined || (value === null && field.endsWith("?"))) {
      if (!field.endsWith("?")) throw misfit(`missing field \`${key}\``);
      continue;
    }
    const max = field.startsWith("u32") ? 0xffff_ffff : Number.MAX_SAFE_INTEGER;
    const fits =
      field === "string" ? typeof value === "string" : Number.isInteger(value) && (value as number) >= 0 && (value as number) <= max;
    if (!fits) {
      const expected = field === "string" ? "a string" : `an integer from 0 to ${max}`;
      throw misfit(`\`${key}\` must be ${expected}, not ${JSON.stringify(value)}`);
    }
    parsed[key] = value;
  }
  return parsed as Parsed<S>;
}

function grep(args: { query: string; limit: number | undefined; page: number | undefined }): string {
  const query = args.query.trim();
  if (query === "") throw new EngineFailure("invalid-input", "the query is empty");
  const limit = Math.min(Math.max(args.limit ?? GREP_DEFAULT_HITS, 1), GREP_MAX_HITS);
  const page = args.page ?? 0;
  const found = host.index.search(query, "session", { limit, offset: Math.min(page * limit, 0xffff_ffff) });
  if (found.hits.length === 0) return `No message contains all of: ${query}`;
  let answer = `Messages containing all of: ${query} (page ${page})\n`;
  for (const hit of found.hits) {
    const [number, role] = numbered(hit);
    answer += `\n[message ${number}, ${role}]\n${hit.snippet}\n`;
  }
  if (found.hasMore) answer += `\n(more: page ${page + 1})`;
  return answer;
}

/** The message number and role a hit's metadata names (0 and nothing when it names none). */
function numbered(hit: IndexHit): [number, string] {
  try {
    const metadata = JSON.parse(hit.metadata ?? "null") as { message?: unknown; role?: unknown } | null;
    if (typeof metadata?.message === "number" && typeof metadata.role === "string") {
      return [metadata.message, metadata.role];
    }
  } catch {
    // Not the engine's metadata: no number.
  }
  return [0, ""];
}

function expand(store: SessionStore, args: { from: number; to: number }): string {
  const stored = store.meta().nextSeq;
  const { from } = args;
  if (from === 0 || args.to < from || args.to > stored) {
    throw new EngineFailure(
      "invalid-input",
      `messages ${from}–${args.to} are not in this conversation of ${stored} messages`,
    );
  }
  const to = Math.min(args.to, from + EXPAND_MAX_MESSAGES - 1);
  let answer = "";
  for (let number = from; number <= to; number += 1) {
    const [label, body] = describe(store.message(number - 1).message);
    answer += `[message ${number}, ${label}]\n${firstChars(body, EXPAND_MAX_CHARS)}\n\n`;
  }
  if (to < args.to) answer += `(read up to message ${to}; ask again from ${to + 1})`;
  return answer;
}

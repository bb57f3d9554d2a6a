/**
 * `@ctxbox/guest`: write ctxbox context engines in TypeScript.
 *
 * ```ts
 * import { defineEngine, keep, assembled, tokens } from "@ctxbox/guest";
 *
 * export const engine = defineEngine({
 *   info: { id: "everything", name: "Everything" },
 *   assemble(_session, history) {
 *     const len = history.len();
 *     return assembled([keep(0, len)], tokens(history, 0, len));
 *   },
 * });
 * ```
 */
export * from "./wit.js";
export {
  defineEngine,
  toolArguments,
  toolsOf,
  type Engine,
  type EngineInfoInit,
  type EngineSpec,
  type ToolInit,
  type Tools,
} from "./engine.js";
export { EngineFailure, HostFailure, toEngineError } from "./errors.js";
export * as host from "./host.js";
export {
  state,
  toJson,
  fromJson,
  promptRequest,
  type SummarizeOptions,
  type DeltaOptions,
  type PageOptions,
  type TranscriptPageRead,
  type TranscriptRead,
  type PromptOptions,
  type SearchOptions,
} from "./host.js";
export { fittingSuffix, messageText, pages, readRange, splitPair, toArray, tokens } from "./history.js";
export { assembled, customText, insert, keep, userText, type AssembledOptions } from "./prompt.js";
export { hostConsole } from "./console.js";
export {
  DatabaseSync,
  StatementSync,
  type DatabaseSyncOptions,
  type Row,
  type SQLInputValue,
  type SQLOutputValue,
  type SqliteError,
  type StatementColumnMetadata,
  type StatementResultingChanges,
} from "./sqlite.js";

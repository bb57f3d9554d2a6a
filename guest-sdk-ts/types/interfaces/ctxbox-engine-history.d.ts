/// <reference path="./ctxbox-engine-types.d.ts" />
declare module 'ctxbox:engine/history@0.1.0' {
  export type MessageEntry = import('ctxbox:engine/types@0.1.0').MessageEntry;
  export type MessageKind = import('ctxbox:engine/types@0.1.0').MessageKind;
  /**
   * An entry's role in tool-call pairing.
   */
  export type ToolPairing = ToolPairingNone | ToolPairingToolCalls | ToolPairingToolResult;
  /**
   * Not part of a tool-call pair.
   */
  export interface ToolPairingNone {
    tag: 'none',
  }
  /**
   * An assistant message with tool calls, whose results in the history
   * end at this index (inclusive; the message's own index when none of
   * its calls has a result yet).
   */
  export interface ToolPairingToolCalls {
    tag: 'tool-calls',
    val: number,
  }
  /**
   * A tool result answering a call made by the assistant message at this
   * index (`none` when the call is not in the history).
   */
  export interface ToolPairingToolResult {
    tag: 'tool-result',
    val: number | undefined,
  }
  
  export class History implements Disposable {
    /**
     * This type does not have a public constructor.
     */
    private constructor();
    /**
    * Number of entries.
    */
    len(): number;
    /**
    * The entry at `index`, or none past the end.
    */
    entry(index: number): MessageEntry | undefined;
    /**
    * Entries `start..end` (end exclusive, clamped to `len`). The host caps
    * the bytes one call copies into the guest, so the answer may be a
    * shorter prefix of the range (never empty while `start < len`): page
    * through long histories (the SDK's `History::to_vec` does).
    */
    range(start: number, end: number): Array<MessageEntry>;
    /**
    * The kind of the entry at `index` without copying it.
    */
    kind(index: number): MessageKind | undefined;
    /**
    * Whether the entry at `index` is an assistant message with tool calls,
    * or a tool result: the two halves of a pair that must never be split.
    */
    toolPairing(index: number): ToolPairing | undefined;
    /**
    * Position of the entry with this transcript id.
    */
    find(entryId: string): number | undefined;
    /**
    * The host's token estimate for entries `start..end` (cached per entry,
    * O(1) after the first call), the same estimator the host budgets with.
    */
    tokens(start: number, end: number): bigint;
    /**
    * The start of the newest suffix that fits `max-tokens` without
    * separating a tool call from its result: the smallest `start` with
    * `tokens(start, len) <= max-tokens` such that no assistant message
    * before `start` has a tool result at or after it. `0` when the whole
    * history fits; `len` when no such suffix but the empty one does (the
    * newest entries alone are too large, or are results whose call is
    * too large to keep with them). O(log n) in the host: one crossing
    * for the plan a keep-recent engine would otherwise search for with
    * `tokens` and `tool-pairing`.
    * 
    * Added within contract version 0.1.0: it only adds a function to
    * this interface, so every engine built before loads and behaves as
    * it did; an engine that imports it needs a host that offers it (an
    * older host refuses it at load, naming the missing import).
    */
    fittingSuffix(maxTokens: bigint): number;
    /**
    * Entries `start..end` like `range`, packed into one byte string:
    * the bulk path for an engine that reads many messages. One copy
    * crosses the boundary, where `range` makes the guest allocate every
    * string and list of every entry; the SDK reads the entries in place
    * (`History::scan`). Paged under the same byte cap as `range`.
    * 
    * The bytes are the entries one after another, each a LEB128 length
    * then that many bytes of the entry in the SDK's codec layout
    * (`ctxbox_guest::codec`, `Encoder::entry`): strings as a LEB128 byte
    * length and UTF-8, optional values behind a presence byte, signed
    * integers zig-zag encoded, the message as a tag byte (0 user,
    * 1 assistant, 2 tool-result, 3 custom, 4 compaction-summary,
    * 5 branch-summary) and its fields in this file's order.
    * 
    * Added within contract version 0.1.0, as `fitting-suffix` was.
    */
    packedRange(start: number, end: number): Uint8Array;
    [Symbol.dispose](): void;
  }
}

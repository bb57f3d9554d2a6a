/**
 * Compaction in OpenClaw's terms and the contract's, both ways: the
 * parameters `engine.compact` is given become OpenClaw's `compact` params, an
 * OpenClaw `CompactResult` becomes the contract's `compact-result`, and the
 * reverse for `delegateCompactionToRuntime`, which runs the host's native
 * compaction (`host.delegate-compaction`).
 */
import type { CompactParams, CompactResult, SessionRef } from "../wit.js";
import { openClawSessionKey } from "./call.js";

/** OpenClaw's `CompactResult` (`result` holds what a compaction produced). */
export interface OpenClawCompactResult {
  ok: boolean;
  compacted: boolean;
  reason?: string;
  error?: string;
  result?: {
    summary?: string;
    firstKeptEntryId?: string;
    tokensBefore?: number;
    tokensAfter?: number;
    details?: unknown;
    sessionId?: string;
    sessionFile?: string;
  };
  [field: string]: unknown;
}

/** JSON text of the contract parsed into an object (`undefined` when absent or not an object). */
export function jsonObject(json: string | undefined): Record<string, unknown> | undefined {
  if (json === undefined) return undefined;
  const value: unknown = JSON.parse(json);
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

const optionalNumber = (value: bigint | undefined): number | undefined => (value === undefined ? undefined : Number(value));

/**
 * The params of OpenClaw's `compact` for a contract compaction of
 * `session`; the runtime context is `base` (what OpenClaw's always carry)
 * with the host's over it.
 */
export function compactParamsToOpenClaw(
  session: SessionRef,
  params: CompactParams,
  base: Record<string, unknown>,
): Record<string, unknown> {
  const runtimeContext: Record<string, unknown> = { ...base, ...jsonObject(params.runtimeContext) };
  return {
    sessionId: session.sessionId,
    sessionKey: openClawSessionKey(session),
    sessionFile: session.sessionFile,
    tokenBudget: optionalNumber(params.tokenBudget),
    currentTokenCount: optionalNumber(params.currentTokenCount),
    compactionTarget: params.compactionTarget,
    customInstructions: params.customInstructions,
    force: params.force,
    runtimeContext,
    runtimeSettings: jsonObject(params.runtimeSettings),
    ...(runtimeContext.sessionTarget === undefined ? {} : { sessionTarget: runtimeContext.sessionTarget }),
  };
}

/** A count the contract can carry (a u64): whole, not negative. */
function tokenCount(value: unknown): bigint | undefined {
  return typeof value === "number" && Number.isFinite(value) ? BigInt(Math.max(0, Math.floor(value))) : undefined;
}

/**
 * An OpenClaw `CompactResult` as the contract's: its `result` fields lifted,
 * `error` folded into `reason` when there is no reason, `tokensAfter` capped
 * at `tokensBefore` (the host refuses more), `details` as JSON text.
 */
export function compactResultFromOpenClaw(result: OpenClawCompactResult): CompactResult {
  const produced = result.result ?? {};
  const tokensBefore = tokenCount(produced.tokensBefore) ?? 0n;
  const after = tokenCount(produced.tokensAfter);
  return {
    ok: result.ok === true,
    compacted: result.compacted === true,
    reason: result.reason ?? result.error,
    summary: typeof produced.summary === "string" ? produced.summary : undefined,
    firstKeptEntryId: typeof produced.firstKeptEntryId === "string" ? produced.firstKeptEntryId : undefined,
    tokensBefore,
    tokensAfter: after === undefined || after <= tokensBefore ? after : tokensBefore,
    rotatedSession:
      typeof produced.sessionId === "string" && typeof produced.sessionFile === "string"
        ? { sessionId: produced.sessionId, sessionFile: produced.sessionFile }
        : undefined,
    details: produced.details === undefined ? undefined : JSON.stringify(produced.details),
  };
}

/** OpenClaw's params of `delegateCompactionToRuntime` as the contract's `compact-params`. */
export function compactParamsFromOpenClaw(params: Record<string, unknown>): CompactParams {
  const count = (value: unknown): bigint | undefined => tokenCount(value);
  const object = (value: unknown): string | undefined =>
    value !== null && typeof value === "object" ? JSON.stringify(value) : undefined;
  return {
    tokenBudget: count(params.tokenBudget),
    force: params.force === true,
    currentTokenCount: count(params.currentTokenCount),
    compactionTarget: params.compactionTarget === "threshold" ? "threshold" : "budget",
    customInstructions: typeof params.customInstructions === "string" ? params.customInstructions : undefined,
    runtimeSettings: object(params.runtimeSettings),
    runtimeContext: object(params.runtimeContext),
  };
}

/** The contract's `compact-result` as OpenClaw's `CompactResult`. */
export function compactResultToOpenClaw(result: CompactResult): OpenClawCompactResult {
  const produced = {
    ...(result.summary === undefined ? {} : { summary: result.summary }),
    ...(result.firstKeptEntryId === undefined ? {} : { firstKeptEntryId: result.firstKeptEntryId }),
    tokensBefore: Number(result.tokensBefore),
    ...(result.tokensAfter === undefined ? {} : { tokensAfter: Number(result.tokensAfter) }),
    ...(result.details === undefined ? {} : { details: JSON.parse(result.details) as unknown }),
    ...(result.rotatedSession === undefined
      ? {}
      : { sessionId: result.rotatedSession.sessionId, sessionFile: result.rotatedSession.sessionFile }),
  };
  return {
    ok: result.ok,
    compacted: result.compacted,
    ...(result.reason === undefined ? {} : { reason: result.reason }),
    result: produced,
  };
}

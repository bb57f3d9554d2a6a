/**
 * How failures cross the contract: every export answers `result<_, engine-error>`,
 * and whatever an engine throws becomes that error instead of a trap.
 */
import type { EngineError, EngineErrorKind, HostError, HostErrorKind } from "./wit.js";

/** An error the engine throws on purpose, with the `engine-error` kind to report. */
export class EngineFailure extends Error {
  /** The `engine-error-kind` the host records. */
  readonly kind: EngineErrorKind;

  constructor(kind: EngineErrorKind, message: string) {
    super(message);
    this.name = "EngineFailure";
    this.kind = kind;
  }
}

/** A host service refused or failed: thrown by the SDK's host wrappers. */
export class HostFailure extends Error {
  /** The host's own answer. */
  readonly hostError: HostError;

  constructor(service: string, hostError: HostError) {
    super(`host.${service} failed (${hostError.kind}): ${hostError.message}`);
    this.name = "HostFailure";
    this.hostError = hostError;
  }
}

const HOST_ERROR_KINDS: ReadonlySet<string> = new Set<HostErrorKind>([
  "unavailable",
  "invalid-argument",
  "quota-exceeded",
  "aborted",
  "failed",
]);

/** The `host-error` a raw import threw (componentize-js puts it in `payload`), if it is one. */
export function hostErrorOf(thrown: unknown): HostError | undefined {
  const payload = (thrown as { payload?: unknown } | null)?.payload;
  if (payload && typeof payload === "object") {
    const { kind, message } = payload as { kind?: unknown; message?: unknown };
    if (typeof kind === "string" && HOST_ERROR_KINDS.has(kind) && typeof message === "string") {
      return { kind: kind as HostErrorKind, message };
    }
  }
  return undefined;
}

/**
 * The `engine-error` for anything thrown by engine code: an {@link EngineFailure}
 * keeps its kind, a host error (an {@link HostFailure} or a raw import's) is
 * `host-failure`, any other `Error` is `internal` with its message, and any
 * other value `internal` with its text.
 */
export function toEngineError(thrown: unknown): EngineError {
  if (thrown instanceof EngineFailure) {
    return { kind: thrown.kind, message: thrown.message };
  }
  if (thrown instanceof HostFailure) {
    return { kind: "host-failure", message: thrown.message };
  }
  const host = hostErrorOf(thrown);
  if (host) {
    return { kind: "host-failure", message: `host service failed (${host.kind}): ${host.message}` };
  }
  if (thrown instanceof Error) {
    const name = thrown.name && thrown.name !== "Error" ? `${thrown.name}: ` : "";
    return { kind: "internal", message: `${name}${thrown.message}` };
  }
  return { kind: "internal", message: `thrown: ${describe(thrown)}` };
}

function describe(value: unknown): string {
  try {
    return typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    return String(value);
  }
}

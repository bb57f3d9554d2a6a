// The `ctxbox serve` process: started on first use, spoken to in
// newline-delimited JSON (PROTOCOL.md), restarted with back-off when it dies.
// Every call has its own timeout; a call the sidecar cannot answer in time
// rejects, and the caller answers OpenClaw without it. With protocol 2 the
// sidecar may also ask this client things (reverse requests, e.g. a model
// completion); those are answered beside the calls, never blocking them.

import { AsyncLocalStorage } from "node:async_hooks";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";

import type { LlmCapability } from "./types.js";

/** The newest protocol version this client speaks. */
export const PROTOCOL_VERSION = 2;

/** The oldest protocol version this client still speaks (one without reverse calls or tools). */
const OLDEST_PROTOCOL_VERSION = 1;

/** Error codes that mean "try again shortly": the session is in another call, or the sidecar is at its in-flight limit. */
const RETRIED_CODES = new Set(["session-busy", "overloaded"]);

/** First pause before retrying a `session-busy` or `overloaded` call, ms (doubles each time). */
export const BUSY_FIRST_BACKOFF_MS = 50;
/** Longest pause between retries, ms. */
const BUSY_MAX_BACKOFF_MS = 1_000;
/** A retry is made only if at least this much of the call's time is left after the pause, ms. */
const BUSY_MIN_ATTEMPT_MS = 300;

/** How long a reverse request may take when the sidecar names no `deadlineMs`. */
const REVERSE_DEFAULT_DEADLINE_MS = 60_000;
/** A reverse request is answered this long before its deadline, so the answer arrives while the sidecar still waits. */
const REVERSE_ANSWER_MARGIN_MS = 50;

/** What the client passed with a call, for the reverse requests the sidecar makes while serving it. */
export interface CallContext {
  /** OpenClaw's session-bound model (`runtimeContext.llm`). */
  llm?: LlmCapability;
}

/** A request the sidecar makes of the client (protocol 2). */
export interface ReverseRequest {
  method: string;
  params: Record<string, unknown>;
  /** The context of the client call named by `params.requestId`, while that call runs. */
  context: CallContext | undefined;
  /** Aborted at the request's deadline, when the sidecar cancels it, or when the sidecar exits. */
  signal: AbortSignal;
}

/** How the client answers reverse requests. */
export interface ReverseOptions {
  /** What `hello` announces (e.g. `complete`). */
  capabilities: string[];
  /** Resolves with the result, or rejects (a `SidecarError` gives the code, anything else answers `failed`). */
  handle: (request: ReverseRequest) => Promise<unknown>;
}

/** How to start the sidecar. */
export interface SidecarOptions {
  /** The ctxbox binary. */
  bin: string;
  /** Arguments after the binary (`serve --engine … --data-dir …`). */
  args: string[];
  /** Where the sidecar's stderr goes, line by line. */
  log?: (line: string) => void;
  /** First restart delay, ms (doubles up to `maxBackoffMs`). */
  initialBackoffMs?: number;
  /** Longest restart delay, ms. */
  maxBackoffMs?: number;
  /** Answers the sidecar's reverse requests; without it none are announced and any is answered `unavailable`. */
  reverse?: ReverseOptions;
  /** Told what each started process answers to `hello` (its `version`, `defaultEngine`, `engines`, …). */
  onHello?: (answer: Record<string, unknown>) => void;
}

/** What `call` may carry besides the request. */
export interface CallOptions {
  /** Handed to the reverse requests the sidecar makes while serving this call. */
  context?: CallContext;
  /** Abandons the call (and cancels it on the sidecar). */
  signal?: AbortSignal;
  /**
   * Told the `generation` of the process each attempt is sent to: an answer
   * came from the running process only if it is still the current one.
   */
  onSent?: (generation: number) => void;
}

/** An error answer with its `code` as in PROTOCOL.md: one the sidecar sent, or one a reverse-request handler gives. */
export class SidecarError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = "SidecarError";
  }
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  context: CallContext | undefined;
  /** Runs a function in the async context the call was made in (OpenClaw's scope of the plugin call). */
  within: <R>(fn: () => R) => R;
}

interface WireError {
  code: string;
  message: string;
  data?: unknown;
}

/** One supervised `ctxbox serve` process shared by every engine object. */
export class Sidecar {
  private child: ChildProcessWithoutNullStreams | undefined;
  private ready: Promise<void> | undefined;
  private readonly pending = new Map<number, Pending>();
  /** Reverse requests being answered, by their id. */
  private readonly serving = new Map<string, AbortController>();
  private nextId = 1;
  private backoffMs: number;
  private restartAt = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Bumped at every start: session state held by an older process is gone. */
  generation = 0;
  /** How many times the process has exited unasked. */
  deaths = 0;
  /** The protocol version agreed with the running process (undefined until `hello` is answered). */
  protocol: number | undefined;

  constructor(private readonly options: SidecarOptions) {
    this.backoffMs = options.initialBackoffMs ?? 200;
  }

  /** The running process's id, if one runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /**
   * Calls `method`; resolves with its result, rejects with a `SidecarError`
   * for an error answer, or with an `Error` when the sidecar is down,
   * restarting, or does not answer within `timeoutMs` (then the request is
   * cancelled on the sidecar). A `session-busy` or `overloaded` answer is retried with
   * exponential back-off while the time allows.
   */
  async call(method: string, params: object, timeoutMs: number, options: CallOptions = {}): Promise<unknown> {
    const deadline = Date.now() + timeoutMs;
    const started = Date.now();
    let tries = 0;
    for (let backoff = BUSY_FIRST_BACKOFF_MS; ; backoff = Math.min(backoff * 2, BUSY_MAX_BACKOFF_MS)) {
      tries += 1;
      try {
        return await this.attempt(method, params, deadline, timeoutMs, options);
      } catch (error) {
        if (!(error instanceof SidecarError && RETRIED_CODES.has(error.code))) throw error;
        if (deadline - Date.now() < backoff + BUSY_MIN_ATTEMPT_MS || options.signal?.aborted) {
          throw new SidecarError(
            error.code,
            `${error.message} (tried ${tries} times in ${Date.now() - started} ms)`,
            error.data,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, backoff));
      }
    }
  }

  /**
   * Starts the process if none runs and says `hello`; resolves once the
   * protocol is agreed. Rejects while a restart is pending or when the
   * sidecar speaks no version this client does.
   */
  connect(): Promise<void> {
    if (this.closed) return Promise.reject(new Error("the sidecar is closed"));
    if (this.ready) return this.ready;
    const wait = this.restartAt - Date.now();
    if (wait > 0) {
      return Promise.reject(new Error(`the sidecar is restarting (in ${wait} ms)`));
    }
    this.ready = this.launch();
    this.ready.catch(() => undefined);
    return this.ready;
  }

  /** Stops the process and refuses further calls. */
  close(): void {
    this.closed = true;
    clearTimeout(this.restartTimer);
    this.abortServing("the sidecar is closed");
    this.child?.stdin.end();
    this.child?.kill("SIGTERM");
    this.child = undefined;
  }

  private async attempt(
    method: string,
    params: object,
    deadline: number,
    timeoutMs: number,
    options: CallOptions,
  ): Promise<unknown> {
    const left = () => Math.max(1, deadline - Date.now());
    await withTimeout(this.connect(), left(), "the sidecar did not start in time", options.signal);
    const remaining = left();
    // The sidecar gives up a little before we do, so its answer (often the
    // guard's fallback) arrives rather than our timeout.
    const deadlineMs = Math.max(1, remaining - 250);
    const id = this.nextId++;
    options.onSent?.(this.generation);
    const answer = this.send(id, method, params, deadlineMs, options.context);
    try {
      return await withTimeout(answer, remaining, `${method} timed out after ${timeoutMs} ms`, options.signal);
    } catch (error) {
      if (this.pending.delete(id)) {
        this.sendQuietly({ id: this.nextId++, method: "cancel", params: { target: id } });
      }
      throw error;
    }
  }

  private async launch(): Promise<void> {
    const child = spawn(this.options.bin, this.options.args, {
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child = child;
    this.generation += 1;
    this.protocol = undefined;
    // The sidecar must never keep OpenClaw alive; it exits when its stdin closes.
    child.unref();
    for (const stream of [child.stdin, child.stdout, child.stderr] as const) {
      (stream as unknown as { unref?: () => void }).unref?.();
    }
    const startedAt = Date.now();
    child.on("error", (error) => this.exited(child, `cannot run ${this.options.bin}: ${error.message}`, startedAt));
    child.on("exit", (code, signal) => this.exited(child, `exited (${signal ?? code})`, startedAt));
    child.stdin.on("error", () => undefined);
    createInterface({ input: child.stdout }).on("line", (line) => this.receive(child, line));
    createInterface({ input: child.stderr }).on("line", (line) => this.options.log?.(line.slice(0, 2000)));
    this.protocol = await this.hello();
  }

  /** Agrees on a protocol version: asks for the newest, then for the oldest if the sidecar refuses it. */
  private async hello(): Promise<number> {
    const client = "ctxbox-openclaw";
    let answer: { protocol?: unknown; version?: unknown };
    try {
      answer = (await this.send(
        this.nextId++,
        "hello",
        { protocol: PROTOCOL_VERSION, client, capabilities: this.options.reverse?.capabilities ?? [] },
        10_000,
        undefined,
      )) as { protocol?: unknown };
    } catch (error) {
      if (!offersOldest(error)) throw error;
      answer = (await this.send(this.nextId++, "hello", { protocol: OLDEST_PROTOCOL_VERSION, client }, 10_000, undefined)) as {
        protocol?: unknown;
      };
    }
    this.options.onHello?.(typeof answer === "object" && answer !== null ? (answer as Record<string, unknown>) : {});
    const protocol = answer?.protocol;
    if (typeof protocol !== "number" || protocol < OLDEST_PROTOCOL_VERSION || protocol > PROTOCOL_VERSION) {
      throw new Error(
        `the sidecar answered protocol ${JSON.stringify(protocol)}; this plugin speaks ${OLDEST_PROTOCOL_VERSION} to ${PROTOCOL_VERSION}`,
      );
    }
    return protocol;
  }

  private exited(child: ChildProcessWithoutNullStreams, why: string, startedAt: number): void {
    if (this.child !== child) return;
    this.child = undefined;
    this.ready = undefined;
    this.protocol = undefined;
    for (const [id, pending] of this.pending) {
      pending.reject(new Error(`the sidecar ${why}`));
      this.pending.delete(id);
    }
    this.abortServing(`the sidecar ${why}`);
    if (this.closed) return;
    this.deaths += 1;
    this.options.log?.(`ctxbox sidecar ${why}; restarting in ${this.backoffMs} ms`);
    // A process that stayed up a while earns a fresh back-off.
    if (Date.now() - startedAt > 30_000) this.backoffMs = this.options.initialBackoffMs ?? 200;
    this.restartAt = Date.now() + this.backoffMs;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.options.maxBackoffMs ?? 5_000);
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => {
      this.connect().catch((error: Error) => this.options.log?.(`ctxbox sidecar restart failed: ${error.message}`));
    }, delay);
    this.restartTimer.unref();
  }

  private send(id: number, method: string, params: object, deadlineMs: number, context: CallContext | undefined): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, context, within: AsyncLocalStorage.snapshot() });
      if (!this.sendQuietly({ id, method, params, deadlineMs })) {
        this.pending.delete(id);
        reject(new Error("the sidecar is not running"));
      }
    });
  }

  private sendQuietly(message: object, to = this.child): boolean {
    const child = this.child;
    if (!child || child !== to || !child.stdin.writable) return false;
    child.stdin.write(`${JSON.stringify(message)}\n`);
    return true;
  }

  private receive(child: ChildProcessWithoutNullStreams, line: string): void {
    if (line.trim() === "") return;
    let message: { id?: unknown; method?: unknown; params?: unknown; deadlineMs?: unknown; result?: unknown; error?: WireError };
    try {
      message = JSON.parse(line);
    } catch {
      this.options.log?.(`ctxbox sidecar wrote a line that is not JSON: ${line.slice(0, 200)}`);
      return;
    }
    if (typeof message !== "object" || message === null) {
      this.options.log?.(`ctxbox sidecar wrote a line that is not an object: ${line.slice(0, 200)}`);
      return;
    }
    if (typeof message.method === "string") {
      this.reverseRequest(child, message.id, message.method, message.params, message.deadlineMs);
      return;
    }
    if (typeof message.id !== "number") {
      if (message.error) this.options.log?.(`ctxbox sidecar: ${message.error.code}: ${message.error.message}`);
      return;
    }
    const pending = this.pending.get(message.id);
    if (!pending) return;
    this.pending.delete(message.id);
    if (message.error) {
      pending.reject(new SidecarError(message.error.code, message.error.message, message.error.data));
    } else {
      pending.resolve(message.result);
    }
  }

  /** Answers (or, for `cancel`, stops answering) a request the sidecar made. Never throws. */
  private reverseRequest(child: ChildProcessWithoutNullStreams, id: unknown, method: string, rawParams: unknown, rawDeadline: unknown): void {
    const params = (typeof rawParams === "object" && rawParams !== null && !Array.isArray(rawParams) ? rawParams : {}) as Record<
      string,
      unknown
    >;
    if (method === "cancel" && id === null) {
      const target = params.target;
      if (typeof target === "string") this.serving.get(target)?.abort(new SidecarError("cancelled", "the sidecar cancelled the request"));
      return;
    }
    if (typeof id !== "string") {
      this.options.log?.(`ctxbox sidecar sent a ${method} request without a string id; ignored`);
      return;
    }
    if (this.serving.has(id)) {
      this.options.log?.(`ctxbox sidecar sent request ${id} again while it is being answered; ignored`);
      return;
    }
    const controller = new AbortController();
    this.serving.set(id, controller);
    const deadlineMs = typeof rawDeadline === "number" && rawDeadline > 0 ? rawDeadline : REVERSE_DEFAULT_DEADLINE_MS;
    const timer = setTimeout(
      () => controller.abort(new SidecarError("failed", `${method} had no answer within its ${deadlineMs} ms deadline`)),
      Math.max(1, deadlineMs - REVERSE_ANSWER_MARGIN_MS),
    );
    let answered = false;
    const answer = (outcome: { result: unknown } | { error: WireError }) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      if (this.serving.get(id) === controller) this.serving.delete(id);
      try {
        this.sendQuietly({ id, ...outcome }, child);
      } catch (error) {
        // A result JSON cannot hold (a cycle, a BigInt).
        this.sendQuietly({ id, error: wireError(error) }, child);
      }
    };
    controller.signal.addEventListener("abort", () => answer({ error: wireError(controller.signal.reason) }), { once: true });
    const handle = this.options.reverse?.handle;
    const requestId = params.requestId;
    // Served as if the call the sidecar was serving made it: with its context, in its scope.
    const served = typeof requestId === "number" ? this.pending.get(requestId) : undefined;
    const within = served?.within ?? ((fn) => fn());
    const work = handle
      ? Promise.resolve().then(() => within(() => handle({ method, params, context: served?.context, signal: controller.signal })))
      : Promise.reject(new SidecarError("unavailable", `this client answers no ${method} requests`));
    work.then(
      (result) => answer({ result: result ?? {} }),
      (error: unknown) => answer({ error: wireError(error) }),
    );
  }

  private abortServing(why: string): void {
    for (const controller of this.serving.values()) controller.abort(new SidecarError("cancelled", why));
    this.serving.clear();
  }
}

/** Whether `error` refused the newest protocol from a sidecar that speaks the oldest. */
function offersOldest(error: unknown): boolean {
  if (!(error instanceof SidecarError) || error.code !== "unsupported-protocol") return false;
  const supported = (error.data as { supported?: unknown } | undefined)?.supported;
  return Array.isArray(supported) && supported.includes(OLDEST_PROTOCOL_VERSION);
}

/** `error` as a protocol error answer: its own code if it has one, else `failed`. */
function wireError(error: unknown): WireError {
  if (error instanceof SidecarError) return { code: error.code, message: error.message };
  return { code: "failed", message: error instanceof Error ? error.message : String(error) };
}

/** `promise`, or a rejection with `message` after `ms` (or when `signal` aborts). */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cancelled = () => finish(() => reject(new Error("the call was cancelled")));
    // Left referenced: a pending call keeps the process alive until it ends.
    const timer = setTimeout(() => finish(() => reject(new Error(message))), ms);
    const finish = (settle: () => void) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", cancelled);
      settle();
    };
    if (signal?.aborted) return cancelled();
    signal?.addEventListener("abort", cancelled, { once: true });
    promise.then(
      (value) => finish(() => resolve(value)),
      (error) => finish(() => reject(error)),
    );
  });
}

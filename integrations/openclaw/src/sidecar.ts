// The `ctxbox serve` process: started on first use, spoken to in
// newline-delimited JSON (PROTOCOL.md), restarted with back-off when it dies.
// Every call has its own timeout; a call the sidecar cannot answer in time
// rejects, and the caller answers OpenClaw without it.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";

/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = 1;

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
}

/** An error the sidecar answered with (`code` as in PROTOCOL.md). */
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
}

/** One supervised `ctxbox serve` process shared by every engine object. */
export class Sidecar {
  private child: ChildProcessWithoutNullStreams | undefined;
  private ready: Promise<void> | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private backoffMs: number;
  private restartAt = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Bumped at every start: session state held by an older process is gone. */
  generation = 0;
  /** How many times the process has exited unasked. */
  deaths = 0;

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
   * cancelled on the sidecar).
   */
  async call(method: string, params: object, timeoutMs: number): Promise<unknown> {
    const deadline = Date.now() + timeoutMs;
    await withTimeout(this.start(), timeoutMs, "the sidecar did not start in time");
    const remaining = Math.max(1, deadline - Date.now());
    // The sidecar gives up a little before we do, so its answer (often the
    // guard's fallback) arrives rather than our timeout.
    const deadlineMs = Math.max(1, remaining - 250);
    const id = this.nextId++;
    const answer = this.send(id, method, params, deadlineMs);
    try {
      return await withTimeout(answer, remaining, `${method} timed out after ${timeoutMs} ms`);
    } catch (error) {
      if (this.pending.delete(id)) {
        this.sendQuietly({ id: this.nextId++, method: "cancel", params: { target: id } });
      }
      throw error;
    }
  }

  /** Stops the process and refuses further calls. */
  close(): void {
    this.closed = true;
    clearTimeout(this.restartTimer);
    this.child?.stdin.end();
    this.child?.kill("SIGTERM");
    this.child = undefined;
  }

  private start(): Promise<void> {
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

  private async launch(): Promise<void> {
    const child = spawn(this.options.bin, this.options.args, {
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child = child;
    this.generation += 1;
    // The sidecar must never keep OpenClaw alive; it exits when its stdin closes.
    child.unref();
    for (const stream of [child.stdin, child.stdout, child.stderr] as const) {
      (stream as unknown as { unref?: () => void }).unref?.();
    }
    const startedAt = Date.now();
    child.on("error", (error) => this.exited(child, `cannot run ${this.options.bin}: ${error.message}`, startedAt));
    child.on("exit", (code, signal) => this.exited(child, `exited (${signal ?? code})`, startedAt));
    child.stdin.on("error", () => undefined);
    createInterface({ input: child.stdout }).on("line", (line) => this.receive(line));
    createInterface({ input: child.stderr }).on("line", (line) => this.options.log?.(line.slice(0, 2000)));
    const id = this.nextId++;
    const hello = (await this.send(id, "hello", { protocol: PROTOCOL_VERSION, client: "ctxbox-openclaw" }, 10_000)) as {
      protocol?: number;
    };
    if (hello?.protocol !== PROTOCOL_VERSION) {
      throw new Error(`the sidecar speaks protocol ${hello?.protocol}, not ${PROTOCOL_VERSION}`);
    }
  }

  private exited(child: ChildProcessWithoutNullStreams, why: string, startedAt: number): void {
    if (this.child !== child) return;
    this.child = undefined;
    this.ready = undefined;
    for (const [id, pending] of this.pending) {
      pending.reject(new Error(`the sidecar ${why}`));
      this.pending.delete(id);
    }
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
      this.start().catch((error: Error) => this.options.log?.(`ctxbox sidecar restart failed: ${error.message}`));
    }, delay);
    this.restartTimer.unref();
  }

  private send(id: number, method: string, params: object, deadlineMs: number): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      if (!this.sendQuietly({ id, method, params, deadlineMs })) {
        this.pending.delete(id);
        reject(new Error("the sidecar is not running"));
      }
    });
  }

  private sendQuietly(request: object): boolean {
    const child = this.child;
    if (!child || !child.stdin.writable) return false;
    child.stdin.write(`${JSON.stringify(request)}\n`);
    return true;
  }

  private receive(line: string): void {
    let answer: { id?: unknown; result?: unknown; error?: { code: string; message: string; data?: unknown } };
    try {
      answer = JSON.parse(line);
    } catch {
      this.options.log?.(`ctxbox sidecar wrote a line that is not JSON: ${line.slice(0, 200)}`);
      return;
    }
    if (typeof answer.id !== "number") {
      if (answer.error) this.options.log?.(`ctxbox sidecar: ${answer.error.code}: ${answer.error.message}`);
      return;
    }
    const pending = this.pending.get(answer.id);
    if (!pending) return;
    this.pending.delete(answer.id);
    if (answer.error) {
      pending.reject(new SidecarError(answer.error.code, answer.error.message, answer.error.data));
    } else {
      pending.resolve(answer.result);
    }
  }
}

/** `promise`, or a rejection with `message` after `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    // Left referenced: a pending call keeps the process alive until it ends.
    const timer = setTimeout(() => reject(new Error(message)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

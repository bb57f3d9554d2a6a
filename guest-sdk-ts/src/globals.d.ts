/**
 * The globals an engine can use inside the component (StarlingMonkey's web
 * APIs), declared without the DOM library so nothing unavailable type-checks.
 */
declare class TextEncoder {
  encode(input?: string): Uint8Array;
}
declare class TextDecoder {
  constructor(label?: string, options?: { fatal?: boolean });
  decode(input?: Uint8Array): string;
}
/** Writes to `host.log` once `defineEngine` has run (see `console.ts`). */
declare var console: {
  log(...args: unknown[]): void;
  info(...args: unknown[]): void;
  debug(...args: unknown[]): void;
  warn(...args: unknown[]): void;
  error(...args: unknown[]): void;
  trace(...args: unknown[]): void;
};
declare class URL {
  constructor(url: string, base?: string);
  readonly href: string;
  readonly pathname: string;
}
/** StarlingMonkey's timers: they run while an export call waits on a Promise. */
declare function setTimeout(callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]): number;
declare function clearTimeout(id?: number): void;
declare function queueMicrotask(callback: () => void): void;

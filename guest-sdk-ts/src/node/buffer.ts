/**
 * `Buffer` for engine code written for Node: the `buffer` npm package
 * (feross/buffer 6.0.3, MIT; Node's Buffer API over `Uint8Array`, as
 * bundlers give browsers), bundled only into engines that import this
 * module. `byteLength`, `from`, `alloc`, `concat`, `toString` in Node's
 * encodings but `base64url` (the package predates it: "Unknown encoding"),
 * the typed reads and writes.
 */
import { Buffer as PackageBuffer } from "buffer";

/** Node's `Buffer`. */
export const Buffer = PackageBuffer;

/** The most bytes a Buffer may hold (the package's limit). */
export const kMaxLength = 0x7fffffff;

/** Makes {@link Buffer} the global `Buffer` unless the runtime has one. */
export function installBuffer(): void {
  if ((globalThis as { Buffer?: unknown }).Buffer === undefined) {
    Object.defineProperty(globalThis, "Buffer", { value: Buffer, writable: true, configurable: true });
  }
}

export default { Buffer, kMaxLength };

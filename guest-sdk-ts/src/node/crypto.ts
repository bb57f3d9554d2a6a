/**
 * `node:crypto`, the part engines use: `createHash` (`sha256`, `sha1`; pure
 * JavaScript, synchronous), `randomUUID`, `randomBytes` and
 * `getRandomValues` (WebCrypto's, which the host seeds). Anything else is not
 * offered.
 */
import { decode, encode } from "./encoding.js";
import { mayBeRemembered, rememberDigest, rememberedDigest, worthRemembering } from "./digest-memo.js";
import { Sha1, Sha256, type Hasher } from "./sha.js";

/** WebCrypto as the guest has it (StarlingMonkey's `crypto`). */
const webcrypto = (globalThis as unknown as { crypto: { randomUUID(): string; getRandomValues<T extends Uint8Array>(array: T): T } })
  .crypto;

/** Bytes as Node answers them: a `Buffer` when the global is installed, else a `Uint8Array`. */
function nodeBytes(bytes: Uint8Array): Uint8Array {
  const buffer = (globalThis as { Buffer?: { from(bytes: ArrayBuffer, offset: number, length: number): Uint8Array } }).Buffer;
  return buffer ? buffer.from(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.length) : bytes;
}

const HASHES: Record<string, () => Hasher> = { sha256: () => new Sha256(), sha1: () => new Sha1() };

/**
 * A hash in progress, like `node:crypto`'s `Hash`. A hash of UTF-8 texts
 * alone (the common `createHash(…).update(text).digest(…)`, or a few texts in
 * a row such as a role, a separator and a message) is answered from the
 * digests of recent inputs when it can be (see `digest-memo.ts`).
 */
export class Hash {
  #algorithm: string;
  #hasher: Hasher;
  /** The UTF-8 texts fed so far and not yet hashed, while they are all the input. */
  #texts: string[] | undefined = [];
  #heldCharacters = 0;
  #done = false;

  /** @internal Made by {@link createHash}. */
  constructor(algorithm: string, hasher: Hasher) {
    this.#algorithm = algorithm;
    this.#hasher = hasher;
  }

  /** Adds `data` (text in `inputEncoding`, UTF-8 by default, or bytes). */
  update(data: string | ArrayBufferView, inputEncoding = "utf8"): this {
    if (this.#done) throw new Error("Digest already called");
    const utf8 = inputEncoding === "utf8" || inputEncoding === "utf-8";
    if (typeof data === "string" && utf8 && this.#texts !== undefined && mayBeRemembered(this.#heldCharacters + data.length)) {
      this.#texts.push(data);
      this.#heldCharacters += data.length;
      return this;
    }
    this.#feedTexts();
    if (typeof data === "string") this.#hasher.update(decode(data, inputEncoding));
    else if (ArrayBuffer.isView(data)) this.#hasher.update(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    else throw invalidData(data);
    return this;
  }

  /** The digest: text in `encoding` (`hex`, `base64`, `base64url`, `latin1`), or the bytes. */
  digest(): Uint8Array;
  digest(encoding: string): string;
  digest(encoding?: string): string | Uint8Array {
    if (this.#done) throw new Error("Digest already called");
    const bytes = this.#texts === undefined ? this.#hasher.finish() : this.#digestOfTexts(this.#texts);
    this.#done = true;
    return encoding === undefined || encoding === "buffer" ? nodeBytes(bytes) : encode(bytes, encoding);
  }

  /** The digest of the texts fed, remembered or hashed now. */
  #digestOfTexts(texts: readonly string[]): Uint8Array {
    if (!worthRemembering(this.#heldCharacters)) {
      this.#feedTexts();
      return this.#hasher.finish();
    }
    const remembered = rememberedDigest(this.#algorithm, texts);
    if (remembered !== undefined) return remembered;
    this.#feedTexts();
    const digest = this.#hasher.finish();
    rememberDigest(this.#algorithm, texts, digest);
    return digest;
  }

  /** Hashes the texts held back, once other input follows them (or they were not remembered). */
  #feedTexts(): void {
    if (this.#texts === undefined) return;
    for (const text of this.#texts) this.#hasher.update(decode(text, "utf8"));
    this.#texts = undefined;
  }
}

function invalidData(data: unknown): TypeError {
  const error = new TypeError(
    `The "data" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received ${typeof data}`,
  ) as TypeError & { code: string };
  error.code = "ERR_INVALID_ARG_TYPE";
  return error;
}

/** A hash of `algorithm` (`sha256` or `sha1`; the guest offers no other). */
export function createHash(algorithm: string): Hash {
  const name = algorithm.toLowerCase().replace("-", "");
  const make = HASHES[name];
  if (!make) {
    const error = new Error(`Digest method not supported: ${algorithm} (the guest's node:crypto offers sha256 and sha1)`) as Error & {
      code: string;
    };
    error.code = "ERR_CRYPTO_INVALID_DIGEST";
    throw error;
  }
  return new Hash(name, make());
}

/** A random version 4 UUID. */
export function randomUUID(): string {
  return webcrypto.randomUUID();
}

/** `size` random bytes. */
export function randomBytes(size: number): Uint8Array {
  if (!Number.isInteger(size) || size < 0 || size > 2 ** 31 - 1) {
    throw new RangeError(`The value of "size" is out of range. It must be >= 0 && <= 2147483647. Received ${size}`);
  }
  const bytes = new Uint8Array(size);
  // getRandomValues fills at most 65,536 bytes at a time.
  for (let at = 0; at < size; at += 65_536) webcrypto.getRandomValues(bytes.subarray(at, at + 65_536));
  return nodeBytes(bytes);
}

/** Fills `array` with random values. */
export function getRandomValues<T extends Uint8Array>(array: T): T {
  return webcrypto.getRandomValues(array);
}

export default { createHash, randomUUID, randomBytes, getRandomValues, Hash };

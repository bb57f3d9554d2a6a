/**
 * SHA-256 and SHA-1 in plain JavaScript (FIPS 180-4), incremental: the guest
 * has WebCrypto's `subtle.digest`, but only as a Promise, and `node:crypto`'s
 * `createHash` is synchronous.
 */

/** An incremental hash: feed bytes with `update`, read the digest once with `finish`. */
export interface Hasher {
  update(bytes: Uint8Array): void;
  finish(): Uint8Array;
}

/** The Merkle–Damgård frame both hashes share: 64-byte blocks, a 64-bit big-endian length. */
abstract class BlockHasher implements Hasher {
  #block = new Uint8Array(64);
  #filled = 0;
  #length = 0;
  #done = false;

  /** Folds one 64-byte block at `at` of `bytes` into the state. */
  protected abstract compress(bytes: Uint8Array, at: number): void;

  /** The 16 big-endian words of the block at `at` of `bytes`, into the start of `schedule`. */
  protected static words(bytes: Uint8Array, at: number, schedule: Int32Array): void {
    for (let i = 0; i < 16; i += 1, at += 4) {
      schedule[i] =
        ((bytes[at] as number) << 24) | ((bytes[at + 1] as number) << 16) | ((bytes[at + 2] as number) << 8) | (bytes[at + 3] as number);
    }
  }
  /** The state as the digest. */
  protected abstract digest(): Uint8Array;

  update(bytes: Uint8Array): void {
    if (this.#done) throw new Error("Digest already called");
    this.#length += bytes.length;
    let at = 0;
    if (this.#filled > 0) {
      const take = Math.min(64 - this.#filled, bytes.length);
      this.#block.set(bytes.subarray(0, take), this.#filled);
      this.#filled += take;
      at = take;
      if (this.#filled < 64) return;
      this.compress(this.#block, 0);
      this.#filled = 0;
    }
    for (; at + 64 <= bytes.length; at += 64) this.compress(bytes, at);
    this.#block.set(bytes.subarray(at), 0);
    this.#filled = bytes.length - at;
  }

  finish(): Uint8Array {
    if (this.#done) throw new Error("Digest already called");
    this.#done = true;
    const bits = this.#length * 8;
    const tail = new Uint8Array(this.#filled < 56 ? 64 : 128);
    tail.set(this.#block.subarray(0, this.#filled));
    tail[this.#filled] = 0x80;
    const view = new DataView(tail.buffer);
    view.setUint32(tail.length - 8, Math.floor(bits / 2 ** 32));
    view.setUint32(tail.length - 4, bits >>> 0);
    for (let at = 0; at < tail.length; at += 64) this.compress(tail, at);
    return this.digest();
  }
}

/** The state words as big-endian bytes. */
function bigEndian(words: Int32Array): Uint8Array {
  const out = new Uint8Array(words.length * 4);
  const view = new DataView(out.buffer);
  words.forEach((word, i) => view.setUint32(i * 4, word));
  return out;
}

// The rotations below are written out, not helper calls: the guest interprets
// this code, and a function call costs it more than the rest of a round.

/** SHA-256's round constants: the first 32 bits of the cube roots' fractions of the first 64 primes. */
const K256 = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

/** SHA-256. */
export class Sha256 extends BlockHasher {
  #h = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  #w = new Int32Array(64);

  protected compress(bytes: Uint8Array, at: number): void {
    const w = this.#w;
    BlockHasher.words(bytes, at, w);
    for (let i = 16; i < 64; i += 1) {
      const x = w[i - 15] as number;
      const y = w[i - 2] as number;
      const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      w[i] = ((w[i - 16] as number) + s0 + (w[i - 7] as number) + s1) | 0;
    }
    const h = this.#h;
    let a = h[0] as number, b = h[1] as number, c = h[2] as number, d = h[3] as number;
    let e = h[4] as number, f = h[5] as number, g = h[6] as number, hh = h[7] as number;
    for (let i = 0; i < 64; i += 1) {
      const s1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const choice = (e & f) ^ (~e & g);
      const t1 = (hh + s1 + choice + (K256[i] as number) + (w[i] as number)) | 0;
      const s0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const majority = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (s0 + majority) | 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0] = (h[0] as number) + a;
    h[1] = (h[1] as number) + b;
    h[2] = (h[2] as number) + c;
    h[3] = (h[3] as number) + d;
    h[4] = (h[4] as number) + e;
    h[5] = (h[5] as number) + f;
    h[6] = (h[6] as number) + g;
    h[7] = (h[7] as number) + hh;
  }

  protected digest(): Uint8Array {
    return bigEndian(this.#h);
  }
}

/** SHA-1 (for what still names it, such as content ids; not for security). */
export class Sha1 extends BlockHasher {
  #h = new Int32Array([0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0]);
  #w = new Int32Array(80);

  protected compress(bytes: Uint8Array, at: number): void {
    const w = this.#w;
    BlockHasher.words(bytes, at, w);
    for (let i = 16; i < 80; i += 1) {
      const x = (w[i - 3] as number) ^ (w[i - 8] as number) ^ (w[i - 14] as number) ^ (w[i - 16] as number);
      w[i] = (x << 1) | (x >>> 31);
    }
    const h = this.#h;
    let a = h[0] as number, b = h[1] as number, c = h[2] as number, d = h[3] as number, e = h[4] as number;
    for (let i = 0; i < 80; i += 1) {
      let f: number;
      let k: number;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5a827999;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ed9eba1;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8f1bbcdc;
      } else {
        f = b ^ c ^ d;
        k = 0xca62c1d6;
      }
      const t = (((a << 5) | (a >>> 27)) + f + e + k + (w[i] as number)) | 0;
      e = d;
      d = c;
      c = (b << 30) | (b >>> 2);
      b = a;
      a = t;
    }
    h[0] = (h[0] as number) + a;
    h[1] = (h[1] as number) + b;
    h[2] = (h[2] as number) + c;
    h[3] = (h[3] as number) + d;
    h[4] = (h[4] as number) + e;
  }

  protected digest(): Uint8Array {
    return bigEndian(this.#h);
  }
}

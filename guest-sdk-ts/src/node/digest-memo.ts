/**
 * The digests of texts hashed lately, so a text hashed again is answered
 * without hashing it. The guest's SHA-256 is interpreted JavaScript, about a
 * thousand times slower than Node's: an engine written for Node that hashes
 * the same message text over and over inside one call (lossless-claw matches
 * its protected tail by hashing every assembled message once per tail
 * message) ran out of a call's fuel doing only that. Looking a text up in a
 * `Map` compares it in the engine's native code.
 */

/** Texts shorter than this are hashed again: the lookup would cost about as much. */
const SHORTEST_TEXT = 512;
/** The most characters of text the memo holds; the least recently used go first. */
const MOST_CHARACTERS = 2_000_000;

/** Remembered digests by algorithm and text (`algorithm`, NUL, text), in order of last use. */
const digests = new Map<string, Uint8Array>();
let heldCharacters = 0;

/** Whether the digest of `text` is worth remembering. */
export function worthRemembering(text: string): boolean {
  return text.length >= SHORTEST_TEXT && text.length <= MOST_CHARACTERS / 4;
}

/** The digest of `text` under `algorithm`, if it is remembered (now the most recently used). */
export function rememberedDigest(algorithm: string, text: string): Uint8Array | undefined {
  const key = `${algorithm}\u0000${text}`;
  const digest = digests.get(key);
  if (digest === undefined) return undefined;
  digests.delete(key);
  digests.set(key, digest);
  return digest.slice();
}

/** Remembers `digest` of `text`, forgetting the least recently used texts past the cap. */
export function rememberDigest(algorithm: string, text: string, digest: Uint8Array): void {
  if (!worthRemembering(text)) return;
  const key = `${algorithm}\u0000${text}`;
  if (digests.has(key)) return;
  digests.set(key, digest.slice());
  heldCharacters += key.length;
  for (const oldest of digests.keys()) {
    if (heldCharacters <= MOST_CHARACTERS) break;
    digests.delete(oldest);
    heldCharacters -= oldest.length;
  }
}

/** The characters of text held, at most two million (tests). */
export function heldTextCharacters(): number {
  return heldCharacters;
}

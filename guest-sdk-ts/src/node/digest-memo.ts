/**
 * The digests of texts hashed lately, so a text hashed again is answered
 * without hashing it. The guest's SHA-256 is interpreted JavaScript, about a
 * thousand times slower than Node's: an engine written for Node that hashes
 * the same message text over and over inside one call (lossless-claw matches
 * its protected tail by hashing every assembled message once per tail
 * message) ran out of a call's fuel doing only that. Looking a text up in a
 * `Map` compares it in the engine's native code.
 */

/** Inputs shorter than this are hashed again: the lookup would cost about as much. */
const SHORTEST_TEXT = 512;
/** The most characters of text the memo holds; the least recently used go first. */
const MOST_CHARACTERS = 2_000_000;
/** The longest input remembered. */
const LONGEST_TEXT = MOST_CHARACTERS / 4;

/**
 * Remembered digests by key, in order of last use. A key is the algorithm,
 * the length of each text fed, and the texts: texts fed one by one are
 * hashed one by one (a surrogate pair split between two is not one
 * character), so the same characters cut differently are another input.
 */
const digests = new Map<string, Uint8Array>();
let heldCharacters = 0;

/** The key of `texts` fed in a row to a hash of `algorithm`. */
function keyOf(algorithm: string, texts: readonly string[]): string {
  return `${algorithm}\u0000${texts.map((text) => text.length).join(",")}\u0000${texts.join("")}`;
}

/** Whether input of `characters` in all may still be remembered (more may follow). */
export function mayBeRemembered(characters: number): boolean {
  return characters <= LONGEST_TEXT;
}

/** Whether the digest of input of `characters` in all is worth remembering. */
export function worthRemembering(characters: number): boolean {
  return characters >= SHORTEST_TEXT && characters <= LONGEST_TEXT;
}

/** The digest of `texts` fed in a row under `algorithm`, if it is remembered (now the most recently used). */
export function rememberedDigest(algorithm: string, texts: readonly string[]): Uint8Array | undefined {
  const key = keyOf(algorithm, texts);
  const digest = digests.get(key);
  if (digest === undefined) return undefined;
  digests.delete(key);
  digests.set(key, digest);
  return digest.slice();
}

/** Remembers `digest` of `texts` fed in a row, forgetting the least recently used inputs past the cap. */
export function rememberDigest(algorithm: string, texts: readonly string[], digest: Uint8Array): void {
  const key = keyOf(algorithm, texts);
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

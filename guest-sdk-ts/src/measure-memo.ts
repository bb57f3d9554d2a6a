/**
 * The answers of pure text measures, remembered by their text. The build of
 * an OpenClaw plugin (`ctxbox-ts-build --openclaw-plugin`) routes every call
 * of a module-level function it has proved to compute its answer from one
 * text and nothing else (a token estimate walking the text character by
 * character) through {@link measureOnce}. The plugin's JavaScript is
 * interpreted here, thousands of instructions a character, while a `Map`
 * finds a text in the engine's native code; lossless-claw estimates the
 * same message texts again on every call.
 */

/** What the build's wrapper calls: `globalThis[MEASURE_MEMO_GLOBAL](measure, text)`. */
export const MEASURE_MEMO_GLOBAL = Symbol.for("@ctxbox/guest/measure-memo");

/** Texts shorter than this are measured again: the lookup would cost about as much. */
const SHORTEST_TEXT = 16;
/** The most characters of text remembered, over every measure; then all are forgotten at once. */
export const MOST_CHARACTERS = 8_000_000;

/** Remembered answers by measure, then by text. */
let answers = new Map<Function, Map<string, number | boolean>>();
let heldCharacters = 0;

/**
 * `measure(text)`, answered from memory when the same measure was given the
 * same text before. Only a string's answer that is a number or a boolean
 * is remembered; any other argument or answer is passed through.
 */
export function measureOnce(measure: (text: unknown) => unknown, text: unknown): unknown {
  if (typeof text !== "string" || text.length < SHORTEST_TEXT) return measure(text);
  let byText = answers.get(measure);
  const known = byText?.get(text);
  if (known !== undefined) return known;
  const answer = measure(text);
  if (typeof answer !== "number" && typeof answer !== "boolean") return answer;
  if (heldCharacters + text.length > MOST_CHARACTERS) {
    answers = new Map();
    heldCharacters = 0;
    byText = undefined;
  }
  if (text.length > MOST_CHARACTERS) return answer;
  if (byText === undefined) {
    byText = new Map();
    answers.set(measure, byText);
  }
  byText.set(text, answer);
  heldCharacters += text.length;
  return answer;
}

/** The characters of text held now (tests). */
export function heldMeasuredCharacters(): number {
  return heldCharacters;
}

Object.defineProperty(globalThis, MEASURE_MEMO_GLOBAL, { value: measureOnce, configurable: true });

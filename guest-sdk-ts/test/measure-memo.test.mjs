// The SDK's memo of pure text measures (src/measure-memo.ts): a text is
// measured once, only strings' numeric and boolean answers are remembered, and what
// it holds is capped.
import assert from "node:assert/strict";
import { test } from "node:test";
import { sdkModule } from "./openclaw-source.mjs";

const { measureOnce, heldMeasuredCharacters, MOST_CHARACTERS, MEASURE_MEMO_GLOBAL } = await sdkModule("measure-memo");

test("a text is measured once per measure; short texts, other arguments and other answers pass through", () => {
  let runs = 0;
  const length = (text) => {
    runs += 1;
    return typeof text === "string" ? text.length : -1;
  };
  const text = "a message long enough to remember";
  assert.equal(measureOnce(length, text), text.length);
  assert.equal(measureOnce(length, `${text}`), text.length);
  assert.equal(runs, 1, "the second call was answered from memory");
  const other = (value) => (runs += 1, value.length * 2);
  assert.equal(measureOnce(other, text), text.length * 2, "another measure of the same text is its own");
  assert.equal(runs, 2);
  measureOnce(length, "short");
  measureOnce(length, "short");
  measureOnce(length, 42);
  assert.equal(runs, 5, "short texts and non-strings are measured every time");
  const listed = (value) => (runs += 1, [value.length]);
  measureOnce(listed, text);
  measureOnce(listed, text);
  assert.equal(runs, 7, "an answer that is not a number or a boolean is not remembered");
  const clean = (value) => (runs += 1, !value.includes("\u0000"));
  measureOnce(clean, text);
  assert.equal(measureOnce(clean, text), true);
  assert.equal(runs, 8, "a boolean answer is remembered");
  assert.equal(globalThis[MEASURE_MEMO_GLOBAL], measureOnce, "installed for the build's wrappers");
});

test("past the cap, everything remembered is forgotten at once", () => {
  const length = (text) => text.length;
  const big = "x".repeat(MOST_CHARACTERS / 2 + 1);
  measureOnce(length, big);
  assert.ok(heldMeasuredCharacters() >= big.length);
  measureOnce(length, `${big}y`);
  assert.equal(heldMeasuredCharacters(), big.length + 1, "the first was dropped to make room");
  measureOnce(length, "z".repeat(MOST_CHARACTERS + 1));
  assert.equal(heldMeasuredCharacters(), 0, "a text over the cap is measured, not kept");
});

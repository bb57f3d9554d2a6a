// The source rewrites of ctxbox-ts-build --openclaw-plugin
// (bin/plugin-transforms.mjs), run in Node: rewritten code behaves as the
// original did, with the module map in place of import().
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  IMPORTER,
  fastPathForOf,
  inlineArithmeticHelpers,
  lowerUnicodePropertyEscapes,
  memoizeTextMeasures,
  rewriteDynamicImports,
  rewriteImportMeta,
} from "../bin/plugin-transforms.mjs";

/** `lines` as the body of an async function (what the tests rewrite and run). */
const asyncBody = (lines) => `(async () => {\n${lines.join("\n")}\n})`;

/** Evaluates `code` (an async arrow function's source) with a module map holding `modules`. */
async function run(code, modules) {
  const key = Symbol.for("@ctxbox/guest/import");
  const saved = globalThis[key];
  globalThis[key] = (specifier) =>
    specifier in modules ? Promise.resolve(modules[specifier]) : Promise.reject(new Error(`unknown ${specifier}`));
  try {
    return await new Function(`return ${code};`)()();
  } finally {
    globalThis[key] = saved;
  }
}

test("every import() becomes a call of the module map, strings and comments untouched", async () => {
  const lines = [
    'const name = "b"; // import(name) in a comment',
    "const a = await import('a');",
    "const b = await import(/* kept */ name, { with: {} });",
    'const text = "import(x) in a string";',
    "return [a.v, b.v, text];",
  ];
  const source = asyncBody(lines);
  const { code, rewritten } = rewriteDynamicImports(source);
  assert.equal(rewritten, 2);
  assert.doesNotMatch(code.replace(/\/\/.*|"[^"]*"/g, ""), /\bimport\s*\(/);
  assert.ok(code.includes(`${IMPORTER}('a')`));
  assert.deepEqual(await run(code, { a: { v: 1 }, b: { v: 2 } }), [1, 2, "import(x) in a string"]);
});

test("Function(…) and new Function(…) bodies built from literals are rewritten inside their string", async () => {
  const source = asyncBody([
    'const load = Function("specifier", "return import(specifier)");',
    'const load2 = new globalThis.Function("s", `return import(s).then((m) => m.v)`);',
    'const other = Function("a", "return a + 1");',
    'let failed; try { await load("nope"); } catch (e) { failed = e.message; }',
    'return [(await load("a")).v, await load2("a"), other(1), failed];',
  ]);
  const { code, rewritten } = rewriteDynamicImports(source);
  assert.equal(rewritten, 2);
  assert.ok(code.includes('Function("a", "return a + 1")'), "a body without import() is left as it was");
  assert.deepEqual(await run(code, { a: { v: 7 } }), [7, 7, 2, "unknown nope"]);
});

test("import.meta becomes the module's path under the mount", () => {
  const source = "const r = createRequire(import.meta.url); const m = import.meta; const d = import.meta.dirname; const e = import.meta.env;";
  const { code, rewritten } = rewriteImportMeta(source, "a.ts", "/plugin/src/lcm file.ts");
  assert.equal(rewritten, 4);
  assert.doesNotMatch(code, /import\.meta/);
  assert.ok(code.includes('createRequire("file:///plugin/src/lcm%20file.ts")'));
  assert.ok(code.includes('const d = "/plugin/src"'));
  assert.ok(code.includes('const e = undefined'));
  const meta = new Function(`${code.replace("createRequire", "String")}; return m;`)();
  assert.deepEqual(meta, { url: "file:///plugin/src/lcm%20file.ts", filename: "/plugin/src/lcm file.ts", dirname: "/plugin/src" });
});

test("\\p{…} in literals and literal RegExp calls is lowered to classes matching as the original", () => {
  const source = 'const a = /\\p{Lu}+/u; const b = new RegExp("[\\\\p{L}\\\\p{N}]+", "gu"); const c = RegExp(pattern, "u"); const d = /\\p{L}/;';
  const { code, dynamic } = lowerUnicodePropertyEscapes(source, "m.ts");
  assert.doesNotMatch(code.replace(/const d = .*/, ""), /\\p\{/);
  assert.deepEqual(dynamic, []);
  const [a, b] = new Function(`const pattern = "x"; ${code} return [a, b];`)();
  const samples = ["abcDÉF", "ÆØÅ and 123 Ωmega", "日本語テキスト 42", "😀 émoji"];
  for (const sample of samples) {
    assert.deepEqual(sample.match(a), sample.match(/\p{Lu}+/u), sample);
    assert.deepEqual(sample.match(b), sample.match(/[\p{L}\p{N}]+/gu), sample);
  }
  const built = lowerUnicodePropertyEscapes("const e = new RegExp(`\\\\p{L}${suffix}`, 'u');", "m.js");
  assert.deepEqual(built.dynamic, [1]);
});

/** The functions `source` (a script of function declarations) defines, by name, evaluated as it is. */
function functionsOf(source, names) {
  return new Function(`${source}\nreturn { ${names.join(", ")} };`)();
}

/** Loops over strings, arrays and other iterables, each returning what it saw. */
const LOOPS = `
function codePoints(text) { const out = []; for (const ch of text) out.push(ch); return out; }
function tokens(text) { let t = 0; for (const ch of text) { const cp = ch.codePointAt(0); t += cp > 0xffff ? 2 : cp >= 0x4e00 ? 1.5 : 0.25; } return Math.ceil(t); }
function steps(xs) { const out = []; for (let x of xs) { if (x === 3) continue; if (x === 9) break; out.push(() => x); } return out.map((f) => f()); }
function growing(xs) { const out = []; for (const x of xs) { out.push(x); if (xs.length < 6) xs.push(x * 10); } return out; }
function holes(xs) { const out = []; for (var x of xs) out.push(x === undefined ? "hole" : x); return [out, x]; }
function pairs(map) { const out = []; for (const [k, v] of map) out.push(k + "=" + v); return out; }
function early(xs) { for (const x of xs) if (x > 1) return x; return -1; }
function nested(rows) { let n = 0; for (const row of rows) { for (const cell of row) n += cell; } return n; }
function labelled(xs) { let n = 0; outer: for (const x of xs) { if (x > 2) break outer; n += x; } return n; }
`;
const LOOP_NAMES = ["codePoints", "tokens", "steps", "growing", "holes", "pairs", "early", "nested", "labelled"];

test("a for…of over a plain string or array takes the indexed twin and sees what the iterator would", () => {
  const { code, rewritten } = fastPathForOf(LOOPS, "loops.js");
  // Innermost, unlabelled loops only: not `nested`'s outer loop or `labelled`'s.
  assert.equal(rewritten, 8);
  assert.match(code, /outer: for \(const x of xs\)/);
  const original = functionsOf(LOOPS, LOOP_NAMES);
  const twin = functionsOf(code, LOOP_NAMES);
  const text = "ab😀c中文\ud800x\udc00y\ud83d";
  // Each case makes its arguments afresh: both versions get their own.
  const inputs = {
    codePoints: [() => [text], () => [""], () => [new String("s😀")]],
    tokens: [() => [text], () => ["运维窗口 the log ".repeat(20)]],
    steps: [() => [[1, 2, 3, 4, 9, 5]], () => [new Set([1, 3, 4])], () => [(function* () { yield 1; yield 9; yield 2; })()]],
    growing: [() => [[1, 2]]],
    holes: [() => [[1, , 3]], () => ["xy"]],
    pairs: [() => [new Map([["a", 1], ["b", 2]])], () => [[["c", 3]]]],
    early: [() => [[0, 1, 2, 3]], () => [[0]]],
    nested: [() => [[[1, 2], [3]]], () => [[new Set([4, 5])]]],
    labelled: [() => [[1, 2, 3, 1]]],
  };
  for (const [name, cases] of Object.entries(inputs)) {
    for (const args of cases) {
      assert.deepEqual(twin[name](...args()), original[name](...args()), `${name}(${String(args()[0])})`);
    }
  }
  const { __ctxbox_iterationKind: kind } = functionsOf(code, ["__ctxbox_iterationKind"]);
  assert.deepEqual([kind("s"), kind([1]), kind(new Set([1])), kind(new String("s")), kind(new Uint8Array(1))], [2, 1, 0, 0, 0]);
  assert.deepEqual(twin.codePoints(text), [..."ab😀c中文\ud800x\udc00y\ud83d"]);
});

test("code that replaces strings' or arrays' iteration runs the original loop", () => {
  const { code } = fastPathForOf(LOOPS, "loops.js");
  const twin = functionsOf(code, LOOP_NAMES);
  const stringValues = String.prototype[Symbol.iterator];
  const arrayValues = Array.prototype[Symbol.iterator];
  try {
    String.prototype[Symbol.iterator] = function* () { yield "patched"; };
    Array.prototype[Symbol.iterator] = function* () { yield 42; };
    assert.deepEqual(twin.codePoints("abc"), ["patched"]);
    assert.deepEqual(twin.steps([1, 2]), [42]);
  } finally {
    String.prototype[Symbol.iterator] = stringValues;
    Array.prototype[Symbol.iterator] = arrayValues;
  }
  const own = [1, 2];
  own[Symbol.iterator] = function* () { yield 7; };
  assert.deepEqual(twin.steps(own), [7], "an array with its own iterator");
  assert.deepEqual(twin.steps([1, 2]), [1, 2], "and the twin again once restored");
});

test("for await, assignment targets and long bodies are left as they are", () => {
  const long = `for (const x of xs) { ${"n += x; ".repeat(600)} }`;
  const source = `async function f(xs) { let y; for await (const x of xs) y = x; for (y of xs) {} }\nfunction g(xs) { let n = 0; ${long} return n; }`;
  const { code, rewritten } = fastPathForOf(source, "left.js");
  assert.equal(rewritten, 0);
  assert.equal(code, source);
});

/** Helpers of the kind a plugin has, their callers, and names that must not be inlined. */
const HELPERS = `
function isCjk(cp) { return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3000 && cp <= 0x303f); }
function weight(cp) { if (isCjk(cp)) { return 1.5; } if (cp > 0xffff) return 2; return 0.25; }
function clamp(x, lo, hi) { return x < lo ? lo : x > hi ? hi : x; }
function estimate(text) { let t = 0; for (let i = 0; i < text.length; i++) { const cp = text.codePointAt(i); t += weight(cp); } return clamp(t, 0, 1e9); }
function lengthOf(s) { return s.length; }
function measure(s) { const n = s.length; return lengthOf(s) + clamp(n, 1, 2); }
function down(n) { return n < 1 ? 0 : down(n - 1); }
function passed(f) { return f(3); }
function halve(n) { return n / 2; }
function half(n) { return halve(n); }
const halves = [4, 8].map(halve);
function sq(x) { return x * x; }
function squared(v) { return sq(v); }
function shadowed(v) { const sq = (x) => x * 100; return sq(v); }
`;
const HELPER_NAMES = ["estimate", "measure", "down", "half", "halves", "squared", "shadowed"];

test("calls of small arithmetic helpers become their expression, and answer as before", () => {
  const { code, rewritten } = inlineArithmeticHelpers(HELPERS, "helpers.js");
  // estimate's weight(cp) and clamp(t, 0, 1e9), and measure's clamp(…): each helper's own body stays.
  assert.equal(rewritten, 3);
  const estimate = code.slice(code.indexOf("function estimate"), code.indexOf("function lengthOf"));
  assert.doesNotMatch(estimate, /weight\(|clamp\(/, "estimate calls no helper any more");
  assert.match(code, /function weight\(cp\) \{ if \(isCjk\(cp\)\)/, "the declarations stay as written");
  assert.match(code, /lengthOf\(s\) \+/, "a helper that reads a property is not inlined");
  assert.match(code, /: down\(n - 1\)/, "nor one that calls itself");
  assert.match(code, /return halve\(n\)/, "nor one whose name is also passed as a value");
  assert.match(code, /return sq\(v\); \}\nfunction shadowed/, "nor one whose name is bound again somewhere");
  const original = functionsOf(HELPERS, HELPER_NAMES);
  const inlined = functionsOf(code, HELPER_NAMES);
  for (const text of ["", "ab", "中文 text 😀", "运维窗口 the log ".repeat(50)]) {
    assert.equal(inlined.estimate(text), original.estimate(text), text);
    assert.equal(inlined.measure(text), original.measure(text), text);
  }
  assert.deepEqual([inlined.down(3), inlined.half(5), inlined.halves, inlined.squared(3), inlined.shadowed(2)], [0, 2.5, [2, 4], 9, 200]);
});

test("a helper whose arguments are not plain names or literals is not inlined anywhere", () => {
  const source = "function sq(x) { return x * x; }\nfunction a(v) { return sq(v); }\nfunction b(v) { return sq(v + 1); }\n";
  const { code, rewritten } = inlineArithmeticHelpers(source, "args.js");
  assert.equal(rewritten, 0, "sq(v + 1) would evaluate v + 1 twice");
  assert.equal(code, source);
});

/** Measures of the kind a plugin has, and functions that must not be remembered. */
const MEASURES = `
function isCjk(cp) { return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3000 && cp <= 0x303f); }
function weight(cp) { if (isCjk(cp)) { return 1.5; } if (cp > 0xffff) return 2; return 0.25; }
export function estimateTokens(text) { let t = 0; for (const ch of text) { const cp = ch.codePointAt(0) ?? 0; t += weight(cp); } return Math.ceil(t); }
function counted(text) { let n = 0; for (let i = 0; i < text.length; i++) if (text[i] === "a") n++; return n; }
let calls = 0;
function noted(text) { calls++; let n = 0; for (const ch of text) n++; return n; }
const scale = 2;
function scaled(text) { let n = 0; for (const ch of text) n += scale; return n; }
function jittered(text) { let n = 0; for (const ch of text) n += Math.random(); return n; }
function listed(text) { const out = []; for (const ch of text) out.push(ch); return out.length; }
function twice(f, text) { let n = 0; for (const ch of text) n += f(ch); return n; }
function called(f) { let n = 0; for (let i = 0; i < 3; i++) n += f(i); return n; }
function short(text) { return text.length; }
async function later(text) { let n = 0; for (const ch of text) n++; return n; }
function moved(text) { let n = 0; for (const ch of text) n++; return n; }
moved = () => 0;
`;

test("a pure text measure is remembered by its text, stays exported, and answers as before", () => {
  const { code, memoized } = memoizeTextMeasures(MEASURES, "measures.mjs");
  assert.deepEqual(memoized, ["estimateTokens", "counted"]);
  assert.match(code, /export function estimateTokens\(text\) \{ const memo = /, "the name and the export stay");
  const seen = [];
  const key = Symbol.for("@ctxbox/guest/measure-memo");
  const remembered = new Map();
  globalThis[key] = (measure, text) => {
    seen.push(text);
    const key = `${measure.name}\u0000${text}`;
    if (!remembered.has(key)) remembered.set(key, measure(text));
    return remembered.get(key);
  };
  try {
    const plain = MEASURES.replace("export function", "function");
    const names = ["estimateTokens", "counted"];
    const before = functionsOf(plain, names);
    const after = functionsOf(code.replace("export function", "function").replace("moved = () => 0;", ""), names);
    for (const text of ["", "ab", "中文 text 😀", "运维窗口 the log ".repeat(50), "banana"]) {
      assert.equal(after.estimateTokens(text), before.estimateTokens(text), text);
      assert.equal(after.counted(text), before.counted(text), text);
    }
    assert.equal(seen.length, 10, "every call went through the memo");
  } finally {
    delete globalThis[key];
  }
  // Without the memo installed (code run before the SDK's), the measure answers itself.
  const bare = functionsOf(code.replace("export function", "function").replace("moved = () => 0;", ""), ["estimateTokens"]);
  assert.equal(bare.estimateTokens("中文 text"), 5);
});

test("a function that reads or changes anything but its text, or does not walk it, is not remembered", () => {
  const { memoized } = memoizeTextMeasures(MEASURES, "measures.mjs");
  for (const name of ["noted", "scaled", "jittered", "listed", "twice", "called", "short", "later", "moved"]) {
    assert.ok(!memoized.includes(name), name);
  }
  const untouched = "function f(text) { let n = 0; for (const ch of text) n += g(ch); return n; }\n";
  assert.deepEqual(memoizeTextMeasures(untouched, "unknown.js"), { code: untouched, memoized: [] }, "g is not known to be pure");
});

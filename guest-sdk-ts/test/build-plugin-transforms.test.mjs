// The source rewrites of ctxbox-ts-build --openclaw-plugin
// (bin/plugin-transforms.mjs), run in Node: rewritten code behaves as the
// original did, with the module map in place of import().
import assert from "node:assert/strict";
import { test } from "node:test";
import { IMPORTER, lowerUnicodePropertyEscapes, rewriteDynamicImports, rewriteImportMeta } from "../bin/plugin-transforms.mjs";

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

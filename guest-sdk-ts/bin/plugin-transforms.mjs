// Source rewrites an OpenClaw plugin's bundle needs before componentize-js
// can run it, each over the parsed program (oxc, through rolldown/utils), so
// strings, comments and template text are never touched by accident:
//   - rewriteDynamicImports: StarlingMonkey traps the instance on a dynamic
//     `import()`, so every one left in the bundle becomes a call of the
//     module map's importer (`node:module`'s importModule, installed on the
//     global object), which answers with a bundled module or a rejection
//     naming the specifier. Code built from literal strings with
//     `Function(…)` / `new Function(…)` is rewritten inside its body string.
//   - rewriteImportMeta: any use of `import.meta` in StarlingMonkey's
//     pre-initialization ends the script with an uncatchable exception
//     (Wizer's "uncaught exception: undefined"), so `import.meta.url`,
//     `.filename` and `.dirname` become the module's path in the engine's
//     filesystem as string literals, and a bare `import.meta` an object of
//     them.
//   - lowerUnicodePropertyEscapes: StarlingMonkey has no Unicode property
//     tables, so `\p{…}` in a regular expression is a SyntaxError that fails
//     the whole script; literals and `RegExp("…", "u")` with literal
//     arguments are lowered to explicit character classes (regexpu-core).
//   - fastPathForOf: StarlingMonkey interprets the JavaScript, and there a
//     `for…of` over a string or an array costs a call of the built-in
//     iterator's `next` and a result object per element: about 13,000
//     instructions a character of a string, more than the rest of a typical
//     loop body. Each innermost `for…of` gains an indexed loop taken when the
//     value is a plain string or array whose built-in iteration nobody has
//     replaced, and keeps the original loop for everything else.
import { parseSync, Visitor } from "rolldown/utils";
import rewritePattern from "regexpu-core";

/** What a rewritten `import(x)` calls: `node:module`'s importModule, by its global symbol. */
export const IMPORTER = 'globalThis[Symbol.for("@ctxbox/guest/import")]';

/** Parses `code` as the module `filename` (its extension picks JS or TS), throwing on a syntax error. */
function parse(code, filename) {
  const parsed = parseSync(filename, code);
  if (parsed.errors.length > 0) {
    const first = parsed.errors[0];
    throw new Error(`${filename}: cannot parse: ${first.message ?? first}`);
  }
  return parsed.program;
}

/** Applies non-overlapping `{ start, end, text }` edits to `code`. */
function applyEdits(code, edits) {
  for (const edit of [...edits].sort((a, b) => b.start - a.start)) {
    code = code.slice(0, edit.start) + edit.text + code.slice(edit.end);
  }
  return code;
}

/** Whether `node` is a string literal (or a template without expressions); its value. */
function literalString(node) {
  if (node?.type === "Literal" && typeof node.value === "string") return { value: node.value };
  if (node?.type === "TemplateLiteral" && node.expressions.length === 0) return { value: node.quasis[0].value.cooked };
  return undefined;
}

/** Whether `callee` is the global `Function` (or `globalThis.Function`). */
function isFunctionConstructor(callee) {
  if (callee.type === "Identifier") return callee.name === "Function";
  return (
    callee.type === "MemberExpression" && !callee.computed && callee.object.type === "Identifier" &&
    ["globalThis", "window", "self", "global"].includes(callee.object.name) && callee.property.name === "Function"
  );
}

/**
 * Rewrites every dynamic `import(…)` in `code` to a call of {@link IMPORTER}
 * (its arguments kept), and the bodies of `Function("a", …, "body")` calls
 * with literal arguments that contain one. Returns the code and how many
 * imports were rewritten; code with none comes back unchanged.
 */
export function rewriteDynamicImports(code, filename = "bundle.js") {
  if (!code.includes("import")) return { code, rewritten: 0 };
  const edits = [];
  let rewritten = 0;
  const visitor = new Visitor({
    ImportExpression(node) {
      // `import(` up to its first argument (comments and spaces included) becomes `IMPORTER(`.
      edits.push({ start: node.start, end: node.source.start, text: `${IMPORTER}(` });
      rewritten += 1;
    },
    CallExpression: (node) => functionBody(node),
    NewExpression: (node) => functionBody(node),
  });
  function functionBody(node) {
    if (!isFunctionConstructor(node.callee) || node.arguments.length === 0) return;
    const args = node.arguments.map(literalString);
    if (args.some((arg) => arg === undefined)) return;
    const body = node.arguments.at(-1);
    if (!/\bimport\b/.test(args.at(-1).value)) return;
    // The body is a function body: parse it wrapped as one, rewrite, unwrap.
    const prefix = "(function () {";
    const inner = rewriteDynamicImports(`${prefix}${args.at(-1).value}\n})`, "function-body.js");
    if (inner.rewritten === 0) return;
    const text = inner.code.slice(prefix.length, inner.code.length - "\n})".length);
    edits.push({ start: body.start, end: body.end, text: JSON.stringify(text) });
    rewritten += inner.rewritten;
  }
  visitor.visit(parse(code, filename));
  return { code: applyEdits(code, edits), rewritten };
}

/**
 * Replaces `import.meta` in the module `filename` with literals for the
 * module at `modulePath` (an absolute path in the engine's filesystem).
 * Gives the code and how many uses were replaced.
 */
export function rewriteImportMeta(code, filename, modulePath) {
  if (!code.includes("import.meta") && !/import\s*\.\s*meta/.test(code)) return { code, rewritten: 0 };
  const url = `file://${modulePath.split("/").map(encodeURIComponent).join("/")}`;
  const dirname = modulePath.slice(0, modulePath.lastIndexOf("/")) || "/";
  const values = { url, filename: modulePath, dirname };
  const edits = [];
  const inMember = new Set();
  new Visitor({
    MemberExpression(node) {
      if (node.object.type !== "MetaProperty" || node.object.meta.name !== "import" || node.computed) return;
      inMember.add(node.object.start);
      const value = values[node.property.name];
      edits.push({ start: node.start, end: node.end, text: value === undefined ? "undefined" : JSON.stringify(value) });
    },
    MetaProperty(node) {
      if (node.meta.name !== "import" || inMember.has(node.start)) return;
      edits.push({ start: node.start, end: node.end, text: `(${JSON.stringify(values)})` });
    },
  }).visit(parse(code, filename));
  return { code: applyEdits(code, edits), rewritten: edits.length };
}

/** `pattern`/`flags` with `\p{…}` lowered, or undefined when there is nothing to lower. */
function lowered(pattern, flags) {
  if (!/[uv]/.test(flags) || !/\\[pP]\{/.test(pattern)) return undefined;
  let newFlags = flags;
  const replacement = rewritePattern(pattern, flags, {
    unicodePropertyEscapes: "transform",
    unicodeSetsFlag: "transform",
    onNewFlags(value) {
      newFlags = value;
    },
  });
  return { pattern: replacement, flags: newFlags };
}

/**
 * Lowers `\p{…}` / `\P{…}` in regular-expression literals and in
 * `RegExp(…)`/`new RegExp(…)` calls with literal pattern and flags. Gives
 * the code, and `dynamic`: the 1-based lines of `RegExp` calls with a
 * `\p{` pattern it could not see whole (those throw a SyntaxError when
 * they run).
 */
export function lowerUnicodePropertyEscapes(code, filename = "module.js") {
  if (!code.includes("\\p{") && !code.includes("\\P{")) return { code, dynamic: [] };
  const edits = [];
  const dynamic = [];
  const lineOf = (offset) => code.slice(0, offset).split("\n").length;
  function regExpCall(node) {
    if (node.callee.type !== "Identifier" || node.callee.name !== "RegExp" || node.arguments.length === 0) return;
    const [patternNode, flagsNode] = node.arguments;
    const pattern = literalString(patternNode);
    const flags = flagsNode === undefined ? { value: "" } : literalString(flagsNode);
    if (pattern === undefined || flags === undefined) {
      if (code.slice(node.start, node.end).includes("\\p{")) dynamic.push(lineOf(node.start));
      return;
    }
    const result = lowered(pattern.value, flags.value);
    if (result === undefined) return;
    edits.push({ start: patternNode.start, end: patternNode.end, text: JSON.stringify(result.pattern) });
    if (flagsNode !== undefined) edits.push({ start: flagsNode.start, end: flagsNode.end, text: JSON.stringify(result.flags) });
  }
  new Visitor({
    Literal(node) {
      if (!node.regex) return;
      const result = lowered(node.regex.pattern, node.regex.flags);
      if (result !== undefined) edits.push({ start: node.start, end: node.end, text: `/${result.pattern}/${result.flags}` });
    },
    CallExpression: regExpCall,
    NewExpression: regExpCall,
  }).visit(parse(code, filename));
  return { code: applyEdits(code, edits), dynamic };
}

/** What a rewritten `for…of` asks of the value it iterates: 1 a plain array, 2 a plain string, 0 anything else. */
export const ITERATION_KIND = "__ctxbox_iterationKind";

/**
 * The definition of {@link ITERATION_KIND}, put before the rewritten code.
 * A value takes the indexed loop only while `String.prototype` and
 * `Array.prototype` iterate with their own built-in iterators (and strings'
 * `codePointAt` and `slice`, which the indexed loop calls, are the
 * built-ins), so code that replaces any of them sees its own iteration as
 * before.
 */
const ITERATION_KIND_DEFINITION = `const ${ITERATION_KIND} = (() => {
  const stringValues = String.prototype[Symbol.iterator];
  const stringIterator = Object.getPrototypeOf(""[Symbol.iterator]());
  const stringNext = stringIterator.next;
  const { codePointAt, slice } = String.prototype;
  const arrayValues = Array.prototype[Symbol.iterator];
  const arrayIterator = Object.getPrototypeOf([][Symbol.iterator]());
  const arrayNext = arrayIterator.next;
  return (value) => {
    if (typeof value === "string") {
      const builtIn =
        String.prototype[Symbol.iterator] === stringValues && stringIterator.next === stringNext &&
        String.prototype.codePointAt === codePointAt && String.prototype.slice === slice;
      return builtIn ? 2 : 0;
    }
    return Array.isArray(value) && value[Symbol.iterator] === arrayValues && arrayIterator.next === arrayNext ? 1 : 0;
  };
})();
`;

/** The longest loop body (in characters) copied into an indexed loop; longer ones stay as they are. */
const LONGEST_COPIED_BODY = 4000;

/**
 * Gives every innermost `for (const|let|var BINDING of VALUE) BODY` in
 * `code` an indexed twin for plain strings (by code point, as the string
 * iterator steps) and plain arrays (reading `length` each step, as the
 * array iterator does); other values run the original loop. Loops that are
 * labelled, `for await`, assign to an outer target, or have a body over
 * 4,000 characters are left alone. Gives the code and how
 * many loops were given a twin.
 */
export function fastPathForOf(code, filename = "bundle.js") {
  if (!code.includes("of")) return { code, rewritten: 0 };
  const loops = [];
  const labelled = new Set();
  new Visitor({
    ForOfStatement(node) {
      loops.push(node);
    },
    LabeledStatement(node) {
      labelled.add(node.body.start);
    },
  }).visit(parse(code, filename));
  const innermost = loops.filter(
    (loop) => !loops.some((other) => other !== loop && other.start > loop.start && other.end <= loop.end),
  );
  const edits = [];
  for (const loop of innermost) {
    const left = loop.left;
    if (loop.await || labelled.has(loop.start) || left.type !== "VariableDeclaration") continue;
    if (!["const", "let", "var"].includes(left.kind) || left.declarations.length !== 1) continue;
    if (loop.body.end - loop.body.start > LONGEST_COPIED_BODY) continue;
    const n = edits.length;
    const [value, kind, index, element, unit] = ["s", "k", "i", "e", "c"].map((name) => `__ctxbox_${name}${n}`);
    const binding = code.slice(left.declarations[0].id.start, left.declarations[0].id.end);
    const body = code.slice(loop.body.start, loop.body.end);
    const text =
      `{ const ${value} = (${code.slice(loop.right.start, loop.right.end)}), ${kind} = ${ITERATION_KIND}(${value});\n` +
      `if (${kind} === 0) { for (${code.slice(left.start, left.end)} of ${value}) ${body}\n}\n` +
      `else for (let ${index} = 0; ${index} < ${value}.length; ) { let ${element};\n` +
      `if (${kind} === 1) ${element} = ${value}[${index}++];\n` +
      `else { const ${unit} = ${value}.codePointAt(${index}); ${element} = ${unit} > 0xffff ? ${value}.slice(${index}, ${index} + 2) : ${value}[${index}]; ${index} += ${unit} > 0xffff ? 2 : 1; }\n` +
      `{ ${left.kind} ${binding} = ${element};\n${body}\n} } }`;
    edits.push({ start: loop.start, end: loop.end, text });
  }
  if (edits.length === 0) return { code, rewritten: 0 };
  return { code: ITERATION_KIND_DEFINITION + applyEdits(code, edits), rewritten: edits.length };
}

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
//   - inlineArithmeticHelpers: a call costs the interpreter more than the
//     arithmetic of a small helper (`isCjkCodePoint(cp)`, per character), so
//     calls of module-level functions that only compute on their arguments
//     with operators (no calls left, no property reads) become the
//     expression itself.
//   - memoizeTextMeasures: a module-level function proved to compute its
//     answer from one text alone, walking it in a loop (a token estimate),
//     answers a text it has measured before from the SDK's memo (a native
//     `Map` lookup) instead of interpreting the walk again.
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

/** The longest helper expression copied into its callers (characters). */
const LONGEST_INLINED = 1000;

/** Expression node types a helper's answer may be built from (besides its parameters, literals and other helpers' calls). */
const ARITHMETIC = new Set(["BinaryExpression", "LogicalExpression", "ConditionalExpression", "ParenthesizedExpression"]);
/** Binary operators that may call into other code beyond a value's own conversion: left out. */
const NOT_ARITHMETIC = new Set(["in", "instanceof"]);

/** Every node under `node` (itself included), depth first. */
function* nodesOf(node) {
  if (node === null || typeof node !== "object") return;
  if (Array.isArray(node)) {
    for (const item of node) yield* nodesOf(item);
    return;
  }
  if (typeof node.type === "string") yield node;
  for (const [key, value] of Object.entries(node)) {
    if (key !== "type" && value !== null && typeof value === "object") yield* nodesOf(value);
  }
}

/**
 * The answer of `fn` as one expression, if its body is nothing but
 * `if (T) return A;` (or `{ return A; }`) steps and a final `return Z;`:
 * `T ? A : … Z`, as the list of expression nodes and a builder joining
 * their (rewritten) texts.
 */
function answerOf(fn) {
  if (fn.async || fn.generator || fn.body === null) return undefined;
  if (!fn.params.every((param) => param.type === "Identifier")) return undefined;
  const statements = fn.body.body;
  const last = statements.at(-1);
  if (last?.type !== "ReturnStatement" || last.argument === null) return undefined;
  const steps = [];
  for (const statement of statements.slice(0, -1)) {
    let consequent = statement.consequent;
    if (statement.type !== "IfStatement" || statement.alternate !== null) return undefined;
    if (consequent.type === "BlockStatement" && consequent.body.length === 1) consequent = consequent.body[0];
    if (consequent.type !== "ReturnStatement" || consequent.argument === null) return undefined;
    steps.push([statement.test, consequent.argument]);
  }
  return {
    parts: [...steps.flat(), last.argument],
    join: (texts) => {
      let text = `(${texts.at(-1)})`;
      for (let i = steps.length - 1; i >= 0; i -= 1) text = `(${texts[2 * i]}) ? (${texts[2 * i + 1]}) : ${text}`;
      return `(${text})`;
    },
  };
}

/**
 * Replaces calls of small module-level helpers with the helper's answer.
 * A helper qualifies when its body is `return EXPR;` (or `if (T) return A;`
 * steps then `return Z;`), its parameters are plain names, and its answer,
 * once the helpers it calls are inlined in turn, is built only from its
 * parameters, literals, and arithmetic, comparison, logical and conditional
 * operators: nothing in it can run other code or see the caller's scope. It
 * is inlined only if its name is used for nothing but direct calls whose
 * arguments are names or literals (so evaluating an argument again where
 * the parameter was read gives the same value, and no other binding of the
 * name can be meant); the declaration itself stays. One difference is
 * left: an argument read again where the parameter held one value could
 * differ if an operand's own `valueOf`/`toString`, run by an operator in
 * between, reassigned the caller's variable. Gives the code and how many
 * calls were replaced.
 */
export function inlineArithmeticHelpers(code, filename = "bundle.js") {
  const program = parse(code, filename);
  const declarations = new Map();
  for (const statement of program.body) {
    const fn = statement.type === "ExportNamedDeclaration" ? statement.declaration : statement;
    if (fn?.type === "FunctionDeclaration" && fn.id !== null) {
      declarations.set(fn.id.name, declarations.has(fn.id.name) ? null : fn);
    }
  }
  // Every use of each declared name must be a direct call with simple arguments.
  const calls = new Map();
  const usable = new Map([...declarations].filter(([, fn]) => fn !== null));
  const callees = new Set();
  for (const node of nodesOf(program)) {
    if (node.type === "CallExpression" && node.callee.type === "Identifier" && usable.has(node.callee.name)) {
      callees.add(node.callee);
      const fn = usable.get(node.callee.name);
      const simple = node.arguments.length === fn.params.length &&
        node.arguments.every((arg) => arg.type === "Identifier" || (arg.type === "Literal" && !arg.regex));
      if (simple) calls.set(node, fn);
      else usable.delete(node.callee.name);
    }
  }
  for (const node of nodesOf(program)) {
    if (node.type !== "Identifier" || !usable.has(node.name) || callees.has(node)) continue;
    if (node === usable.get(node.name).id) continue;
    usable.delete(node.name);
  }
  // Each helper's answer as text with its parameters as placeholders, inlining the helpers it calls.
  const templates = new Map();
  const placeholder = (index) => `\u0000${index}\u0000`;
  function template(name, visiting = new Set()) {
    if (templates.has(name)) return templates.get(name);
    const fn = usable.get(name);
    const answer = fn && !visiting.has(name) ? answerOf(fn) : undefined;
    let result;
    if (answer !== undefined) {
      visiting.add(name);
      const params = fn.params.map((param) => param.name);
      const texts = answer.parts.map((part) => expressionTemplate(part, params, visiting));
      visiting.delete(name);
      if (texts.every((text) => text !== undefined)) result = answer.join(texts);
      if (result !== undefined && result.length > LONGEST_INLINED) result = undefined;
    }
    templates.set(name, result);
    return result;
  }
  function expressionTemplate(node, params, visiting) {
    const edits = [];
    let allowed = true;
    (function walk(n) {
      if (!allowed) return;
      if (n.type === "Literal") {
        if (n.regex) allowed = false;
      } else if (n.type === "Identifier") {
        const index = params.indexOf(n.name);
        if (index < 0) allowed = false;
        else edits.push({ start: n.start, end: n.end, text: placeholder(index) });
      } else if (n.type === "UnaryExpression" && ["-", "+", "!", "~"].includes(n.operator)) {
        walk(n.argument);
      } else if (ARITHMETIC.has(n.type) && !NOT_ARITHMETIC.has(n.operator)) {
        for (const child of [n.left, n.right, n.test, n.consequent, n.alternate, n.expression]) if (child) walk(child);
      } else if (n.type === "CallExpression" && n.callee.type === "Identifier" && calls.has(n)) {
        const inner = template(n.callee.name, visiting);
        if (inner === undefined) {
          allowed = false;
          return;
        }
        const args = n.arguments.map((arg) => {
          if (arg.type === "Literal") return code.slice(arg.start, arg.end);
          const index = params.indexOf(arg.name);
          if (index < 0) allowed = false;
          return placeholder(index);
        });
        edits.push({ start: n.start, end: n.end, text: instantiate(inner, args) });
      } else {
        allowed = false;
      }
    })(node);
    if (!allowed) return undefined;
    const shifted = edits.map((edit) => ({ ...edit, start: edit.start - node.start, end: edit.end - node.start }));
    return applyEdits(code.slice(node.start, node.end), shifted);
  }
  const helpers = [...usable].filter(([name]) => template(name) !== undefined).map(([, fn]) => fn);
  const edits = [];
  for (const [call, fn] of calls) {
    if (!usable.has(fn.id.name)) continue;
    const text = template(fn.id.name);
    if (text === undefined) continue;
    // Calls inside the helpers' own bodies stay: those bodies are not rewritten.
    if (helpers.some((helper) => call.start >= helper.start && call.end <= helper.end)) continue;
    edits.push({ start: call.start, end: call.end, text: instantiate(text, call.arguments.map((arg) => code.slice(arg.start, arg.end))) });
  }
  if (edits.length === 0) return { code, rewritten: 0 };
  return { code: applyEdits(code, edits), rewritten: edits.length };
}

/** `template` with each parameter placeholder replaced by its argument, parenthesized. */
function instantiate(template, args) {
  return template.replace(/\u0000(\d+)\u0000/g, (_, index) => `(${args[Number(index)]})`);
}

/** What a memoized measure's wrapper calls: the SDK's measureOnce (`src/measure-memo.ts`), by its global symbol. */
export const MEASURE_MEMO = 'globalThis[Symbol.for("@ctxbox/guest/measure-memo")]';

/** Globals a pure measure may read. */
const PURE_GLOBALS = new Set(["Math", "undefined", "NaN", "Infinity"]);
/** `Math` functions whose answer is not a function of their arguments. */
const IMPURE_MATH = new Set(["random"]);
/** String methods a pure measure may call on a value it computed. */
const TEXT_METHODS = new Set(["codePointAt", "charCodeAt", "charAt", "at"]);
/** Statements a pure measure may be built from. */
const PURE_STATEMENTS = new Set([
  "BlockStatement", "ExpressionStatement", "ReturnStatement", "IfStatement", "ForStatement", "ForOfStatement",
  "WhileStatement", "DoWhileStatement", "BreakStatement", "ContinueStatement", "EmptyStatement",
]);
/** Loops: a measure worth remembering walks its text. */
const LOOPS = new Set(["ForStatement", "ForOfStatement", "WhileStatement", "DoWhileStatement"]);

/**
 * Whether module-level function `fn` computes its answer from its
 * arguments alone: its parameters and its own `let`/`const`/`var` names,
 * literals, operators, `Math` (not `random`), `.length`, indexing,
 * `codePointAt`/`charCodeAt`/`charAt`/`at`, `for…of` over its values, and
 * calls of module-level functions that are pure in turn. No closure, no
 * object or array made, no `this`, nothing assigned outside itself.
 */
function isPureFunction(fn, functions, verdicts, visiting = new Set()) {
  const name = fn.id?.name;
  if (verdicts.has(name)) return verdicts.get(name);
  if (visiting.has(name)) return true; // recursion: decided by the outer look
  if (fn.async || fn.generator || fn.body === null || !fn.params.every((param) => param.type === "Identifier")) return false;
  visiting.add(name);
  const locals = new Set(fn.params.map((param) => param.name));
  for (const node of nodesOf(fn.body)) {
    if (node.type === "VariableDeclarator" && node.id.type === "Identifier") locals.add(node.id.name);
  }
  const pureCallee = (callee) => {
    const target = functions.get(callee.name);
    return target !== undefined && target !== null && isPureFunction(target, functions, verdicts, visiting);
  };
  const ok = (node) => {
    if (node === null || node === undefined) return true;
    switch (node.type) {
      case "VariableDeclaration":
        return node.declarations.every((declarator) => declarator.id.type === "Identifier" && ok(declarator.init));
      case "ForOfStatement":
        return !node.await && ok(node.left) && ok(node.right) && ok(node.body);
      case "Literal":
        return !node.regex;
      case "Identifier":
        return locals.has(node.name) || PURE_GLOBALS.has(node.name);
      case "BinaryExpression":
        return !NOT_ARITHMETIC.has(node.operator) && ok(node.left) && ok(node.right);
      case "LogicalExpression":
        return ok(node.left) && ok(node.right);
      case "ConditionalExpression":
        return ok(node.test) && ok(node.consequent) && ok(node.alternate);
      case "UnaryExpression":
        return node.operator !== "delete" && ok(node.argument);
      case "UpdateExpression":
        return node.argument.type === "Identifier" && locals.has(node.argument.name);
      case "AssignmentExpression":
        return node.left.type === "Identifier" && locals.has(node.left.name) && ok(node.right);
      case "ParenthesizedExpression":
      case "ChainExpression":
        return ok(node.expression);
      case "SequenceExpression":
        return node.expressions.every(ok);
      case "MemberExpression":
        if (node.computed) return ok(node.object) && ok(node.property);
        if (node.object.type === "Identifier" && node.object.name === "Math") return !IMPURE_MATH.has(node.property.name);
        return node.property.name === "length" && ok(node.object);
      case "CallExpression": {
        if (!node.arguments.every((arg) => arg.type !== "SpreadElement" && ok(arg))) return false;
        const { callee } = node;
        if (callee.type === "Identifier") return !locals.has(callee.name) && pureCallee(callee);
        if (callee.type !== "MemberExpression" || callee.computed) return false;
        if (callee.object.type === "Identifier" && callee.object.name === "Math") return !IMPURE_MATH.has(callee.property.name);
        return TEXT_METHODS.has(callee.property.name) && ok(callee.object);
      }
      default:
        if (!PURE_STATEMENTS.has(node.type)) return false;
        for (const [key, value] of Object.entries(node)) {
          if (key === "type" || value === null || typeof value !== "object") continue;
          if (Array.isArray(value) ? !value.every(ok) : typeof value.type === "string" && !ok(value)) return false;
        }
        return true;
    }
  };
  const verdict = ok(fn.body);
  visiting.delete(name);
  verdicts.set(name, verdict);
  return verdict;
}

/**
 * Routes every call of a text measure through the SDK's memo: a
 * module-level function of one parameter that walks it in a loop and is
 * pure (see {@link isPureFunction}), its name never reassigned, keeps its
 * name and place (an `export function` stays exported) and becomes
 * `return memo === undefined ? f$measured(x) : memo(f$measured, x)`, its
 * body moved to `f$measured` beside it. The memo answers a text it has
 * measured before from a native `Map` lookup, and passes through anything
 * but a string (and any answer but a number or a boolean). Gives the code
 * and the names memoized.
 */
export function memoizeTextMeasures(code, filename = "bundle.js") {
  const program = parse(code, filename);
  const functions = new Map();
  for (const statement of program.body) {
    const fn = statement.type === "ExportNamedDeclaration" || statement.type === "ExportDefaultDeclaration" ? statement.declaration : statement;
    if (fn?.type === "FunctionDeclaration" && fn.id !== null) {
      functions.set(fn.id.name, functions.has(fn.id.name) ? null : fn);
    }
  }
  // A name assigned anywhere may not be the function any more.
  for (const node of nodesOf(program)) {
    const target = node.type === "AssignmentExpression" ? node.left : node.type === "UpdateExpression" ? node.argument : undefined;
    if (target?.type === "Identifier") functions.set(target.name, null);
  }
  const verdicts = new Map();
  const edits = [];
  const memoized = [];
  for (const [name, fn] of functions) {
    if (fn === null || fn.params.length !== 1 || fn.params[0].type !== "Identifier") continue;
    if (![...nodesOf(fn.body)].some((node) => LOOPS.has(node.type))) continue;
    if (!isPureFunction(fn, functions, verdicts)) continue;
    let measured = `${name}$measured`;
    while (code.includes(measured)) measured += "_";
    const param = fn.params[0].name;
    const wrapper =
      `{ const memo = ${MEASURE_MEMO}; return memo === undefined ? ${measured}(${param}) : memo(${measured}, ${param}); }\n` +
      `function ${measured}(${param}) ${code.slice(fn.body.start, fn.body.end)}`;
    edits.push({ start: fn.body.start, end: fn.body.end, text: wrapper });
    memoized.push(name);
  }
  if (edits.length === 0) return { code, memoized };
  return { code: applyEdits(code, edits), memoized };
}

#!/usr/bin/env node
// ctxbox-ts-build: one command from a TypeScript engine project to a `.wasm`
// component the ctxbox host accepts.
//
//   ctxbox-ts-build [ENTRY.ts] [-o OUT.wasm] [--wit DIR] [--tsconfig FILE]
//   ctxbox-ts-build --openclaw-plugin PLUGIN_DIR [-o OUT.wasm] [--wit DIR]
//
// Defaults: ENTRY `src/engine.ts`, OUT `dist/engine.wasm`, the WIT this SDK
// ships (`wit/`), the project's `tsconfig.json`. Three steps, each stopping
// the build with its own message:
//   1. `tsc --noEmit`: jco bundles TypeScript without type-checking it, so the
//      engine is checked first against the types generated from the WIT;
//   2. `jco componentize` against world `context-engine-with-tools`, with the
//      WASI features the sandbox refuses turned off (`-d http -d fetch-event
//      -d stdio`: the defaults import wasi:http and wasi:filesystem), written
//      to a temporary file. Its entry is a generated module that exports the
//      engine module's `engine` and, as `tools`, the module's own `tools`
//      export or else the tools `defineEngine` was given (none by default),
//      so every engine exports `tools` as a Rust one does;
//   3. the host's load-time checks on the result (see imports.mjs), then the
//      component is moved into place, so OUT is never half a component.
//
// With `--openclaw-plugin`, an OpenClaw plugin's package (PLUGIN_DIR, never
// written) is built instead: no tsc (its types need its devDependencies),
// its runtime dependencies installed into a temporary copy, one module
// bundled from it with the SDK's Node and OpenClaw shims
// (openclaw-plugin.mjs), and that module componentized as in step 2.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, existsSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { WORLD, checkWorld } from "./imports.mjs";
import { BuildError, bundlePlugin, pluginEntryModule, preparePlugin } from "./openclaw-plugin.mjs";

const sdk = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Where a tool package resolves: from the project first (its pinned install), else from the SDK's own. */
function resolveTool(specifier) {
  for (const from of [path.join(process.cwd(), "package.json"), import.meta.url]) {
    try {
      return createRequire(from).resolve(specifier);
    } catch {
      // Not installed there; try the next place.
    }
  }
  usage(`${specifier} is not installed: run \`npm install\` in the engine project`);
}

function usage(message) {
  if (message) console.error(`ctxbox-ts-build: ${message}`);
  console.error("usage: ctxbox-ts-build [ENTRY.ts] [-o OUT.wasm] [--wit DIR] [--tsconfig FILE]");
  console.error("       ctxbox-ts-build --openclaw-plugin PLUGIN_DIR [-o OUT.wasm] [--wit DIR]");
  process.exit(2);
}

function parseArgs(argv) {
  const options = { entry: "src/engine.ts", out: "dist/engine.wasm", wit: path.join(sdk, "wit"), tsconfig: "tsconfig.json" };
  const flags = { "-o": "out", "--out": "out", "--wit": "wit", "--tsconfig": "tsconfig", "--openclaw-plugin": "plugin" };
  let positional = 0;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === "-h" || arg === "--help") usage();
    if (arg in flags) {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`);
      options[flags[arg]] = argv[++i];
    } else if (arg.startsWith("-")) {
      usage(`unknown option ${arg}`);
    } else if (positional++ === 0 && !options.plugin) {
      options.entry = arg;
    } else {
      usage(`unexpected argument ${arg}`);
    }
  }
  return options;
}

/** Runs `node SCRIPT ARGS…`, failing the build with its output when it fails. */
function run(step, script, args) {
  const result = spawnSync(process.execPath, [script, ...args], { encoding: "utf8", maxBuffer: 64 << 20 });
  if (result.status !== 0) {
    process.stderr.write(result.stdout ?? "");
    process.stderr.write(result.stderr ?? "");
    throw new BuildError(`${step} failed${result.error ? `: ${result.error.message}` : ""}`);
  }
  return result.stdout;
}

const options = parseArgs(process.argv.slice(2));
if (options.plugin === undefined && !existsSync(options.entry)) usage(`no engine module at ${options.entry}`);
if (options.plugin !== undefined && !existsSync(options.plugin)) usage(`no plugin folder at ${options.plugin}`);
if (!existsSync(path.join(options.wit, "world.wit"))) usage(`${options.wit} holds no ctxbox WIT (world.wit)`);

// jco exports only its API; its command line (`bin`) sits next to it.
const jco = path.join(path.dirname(resolveTool("@bytecodealliance/jco")), "jco.js");

/** 1. Type-checks the engine project (tsc --noEmit). */
function typeCheck() {
  if (!existsSync(options.tsconfig)) usage(`no ${options.tsconfig}: the engine must be type-checked before it is built`);
  run("type-checking (tsc --noEmit)", resolveTool("typescript/bin/tsc"), ["--noEmit", "-p", options.tsconfig]);
}

/**
 * The module componentized: the engine module's `engine`, and its `tools`
 * (the module's own export, else what `defineEngine` keeps on the engine under
 * `Symbol.for("@ctxbox/guest/tools")`, else none). It imports nothing but the
 * engine module, so it may live outside the project.
 */
function entryModule(entry) {
  const missing = `${entry} does not export \`engine\` (export const engine = defineEngine({...}))`;
  return [
    "// Generated by ctxbox-ts-build: the component's exports.",
    `import * as module from ${JSON.stringify(entry)};`,
    "",
    "const found: any = module;",
    `if (found.engine === undefined) throw new Error(${JSON.stringify(missing)});`,
    "export const engine = found.engine;",
    'export const tools = found.tools ?? engine[Symbol.for("@ctxbox/guest/tools")] ?? {',
    "  listTools: () => [],",
    "  callTool: (_session: unknown, name: string) => {",
    '    throw { kind: "unsupported", message: "no tool `" + name + "`" };',
    "  },",
    "};",
    "",
  ].join("\n");
}

/**
 * The plugin of `--openclaw-plugin` bundled into one module in `generated`
 * (see openclaw-plugin.mjs); gives its path.
 */
async function pluginModule(generated) {
  const dir = path.resolve(options.plugin);
  const work = path.join(generated, "plugin");
  const plugin = preparePlugin(dir, work);
  const how = plugin.usedSource ? `${plugin.named} is its build output, not in the source tree: built from ${path.relative(work, plugin.entry)}` : plugin.named;
  console.log(`ctxbox-ts-build: OpenClaw plugin ${plugin.manifest.id ?? plugin.packageJson.name}, entry ${how}`);
  const packageFiles = {
    "package.json": readFileSync(path.join(dir, "package.json"), "utf8"),
    "openclaw.plugin.json": readFileSync(path.join(dir, "openclaw.plugin.json"), "utf8"),
  };
  const entryFile = path.join(work, "ctxbox-entry.mjs");
  writeFileSync(entryFile, pluginEntryModule({ ...plugin, packageFiles }));
  const { code, warnings, memoized } = await bundlePlugin(entryFile, work);
  for (const warning of warnings) console.error(`ctxbox-ts-build: warning: ${warning}`);
  if (memoized.length > 0) console.log(`ctxbox-ts-build: answers of text measures remembered by their text: ${memoized.join(", ")}`);
  // Named after the plugin: the component's source is named after it.
  const bundled = path.join(generated, `${String(plugin.manifest.id ?? "plugin").replace(/[^\w.-]/g, "_")}.js`);
  writeFileSync(bundled, code);
  return bundled;
}

// 2. Componentize next to the output.
const out = path.resolve(options.out);
mkdirSync(path.dirname(out), { recursive: true });
const staged = `${out}.partial-${process.pid}`;
const generated = mkdtempSync(path.join(tmpdir(), "ctxbox-ts-build-"));
try {
  let source;
  let cwd;
  if (options.plugin !== undefined) {
    source = await pluginModule(generated);
    cwd = generated;
  } else {
    typeCheck();
    const entry = path.resolve(options.entry);
    // Named like the engine module: the component's source is named after it.
    source = path.join(generated, `${path.basename(entry, path.extname(entry))}.ts`);
    writeFileSync(source, entryModule(entry));
    cwd = path.dirname(entry);
  }
  run("componentize (jco componentize)", jco, [
    "componentize", source, "--cwd", cwd, "-w", options.wit, "-n", WORLD,
    "-d", "http", "-d", "fetch-event", "-d", "stdio", "-o", staged,
  ]);

  // 3. What the host checks at load.
  const wit = run("reading the component's world (jco wit)", jco, ["wit", staged]);
  const problems = checkWorld(wit);
  if (problems.length > 0) {
    for (const problem of problems) console.error(`ctxbox-ts-build: ${problem}`);
    console.error("ctxbox-ts-build: the ctxbox host would refuse this component");
    process.exitCode = 1;
  } else {
    renameSync(staged, out);
  }
} catch (error) {
  if (!(error instanceof BuildError)) throw error;
  console.error(`ctxbox-ts-build: ${error.message}`);
  process.exitCode = 1;
} finally {
  rmSync(staged, { force: true });
  rmSync(generated, { recursive: true, force: true });
}
if (process.exitCode !== 1) console.log(`built ${path.relative(process.cwd(), out) || out} (${statSync(out).size} bytes)`);

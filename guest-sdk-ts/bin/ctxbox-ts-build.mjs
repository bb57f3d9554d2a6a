#!/usr/bin/env node
// ctxbox-ts-build: one command from a TypeScript engine project to a `.wasm`
// component the ctxbox host accepts.
//
//   ctxbox-ts-build [ENTRY.ts] [-o OUT.wasm] [--wit DIR] [--tsconfig FILE]
//
// Defaults: ENTRY `src/engine.ts`, OUT `dist/engine.wasm`, the WIT this SDK
// ships (`wit/`), the project's `tsconfig.json`. Three steps, each stopping
// the build with its own message:
//   1. `tsc --noEmit`: jco bundles TypeScript without type-checking it, so the
//      engine is checked first against the types generated from the WIT;
//   2. `jco componentize` with the WASI features the sandbox refuses turned
//      off (`-d http -d fetch-event -d stdio`: the defaults import wasi:http
//      and wasi:filesystem), written to a temporary file;
//   3. the host's load-time checks on the result (see imports.mjs), then the
//      component is moved into place, so OUT is never half a component.
import { spawnSync } from "node:child_process";
import { mkdirSync, renameSync, rmSync, existsSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { checkWorld } from "./imports.mjs";

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
  process.exit(2);
}

function parseArgs(argv) {
  const options = { entry: "src/engine.ts", out: "dist/engine.wasm", wit: path.join(sdk, "wit"), tsconfig: "tsconfig.json" };
  const flags = { "-o": "out", "--out": "out", "--wit": "wit", "--tsconfig": "tsconfig" };
  let positional = 0;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === "-h" || arg === "--help") usage();
    if (arg in flags) {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`);
      options[flags[arg]] = argv[++i];
    } else if (arg.startsWith("-")) {
      usage(`unknown option ${arg}`);
    } else if (positional++ === 0) {
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
    console.error(`ctxbox-ts-build: ${step} failed${result.error ? `: ${result.error.message}` : ""}`);
    process.exit(1);
  }
  return result.stdout;
}

const options = parseArgs(process.argv.slice(2));
if (!existsSync(options.entry)) usage(`no engine module at ${options.entry}`);
if (!existsSync(path.join(options.wit, "world.wit"))) usage(`${options.wit} holds no ctxbox WIT (world.wit)`);

const tsc = resolveTool("typescript/bin/tsc");
// jco exports only its API; its command line (`bin`) sits next to it.
const jco = path.join(path.dirname(resolveTool("@bytecodealliance/jco")), "jco.js");

// 1. Type-check.
if (existsSync(options.tsconfig)) {
  run("type-checking (tsc --noEmit)", tsc, ["--noEmit", "-p", options.tsconfig]);
} else {
  usage(`no ${options.tsconfig}: the engine must be type-checked before it is built`);
}

// 2. Componentize next to the output.
const out = path.resolve(options.out);
mkdirSync(path.dirname(out), { recursive: true });
const staged = `${out}.partial-${process.pid}`;
try {
  run("componentize (jco componentize)", jco, [
    "componentize", options.entry, "-w", options.wit, "-n", "context-engine",
    "-d", "http", "-d", "fetch-event", "-d", "stdio", "-o", staged,
  ]);

  // 3. What the host checks at load.
  const wit = run("reading the component's world (jco wit)", jco, ["wit", staged]);
  const problems = checkWorld(wit);
  if (problems.length > 0) {
    for (const problem of problems) console.error(`ctxbox-ts-build: ${problem}`);
    console.error("ctxbox-ts-build: the ctxbox host would refuse this component");
    process.exit(1);
  }
  renameSync(staged, out);
} finally {
  rmSync(staged, { force: true });
}
console.log(`built ${path.relative(process.cwd(), out) || out} (${statSync(out).size} bytes)`);

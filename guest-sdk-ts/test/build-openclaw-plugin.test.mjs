// ctxbox-ts-build --openclaw-plugin: the fixture plugin (build-fixture-plugin)
// built into a component, transpiled by jco and run against the fake host:
// its tool reports what the Node layers, the module map and the rewrites
// gave it. Also: the plugin folder is left as it was, a plugin that throws
// while loading fails the build with its own exception, and imports that
// cannot run stop the build naming file and line.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { pathToFileURL } from "node:url";
import { BuildError, bundlePlugin, pluginEntryModule, preparePlugin, resolvePluginEntry } from "../bin/openclaw-plugin.mjs";
import { parseSync, Visitor } from "rolldown/utils";
import { ITERATION_KIND, rewriteDynamicImports } from "../bin/plugin-transforms.mjs";
import { sdk } from "./build.mjs";
import { fakeHost } from "./fake-host.mjs";

const fixture = path.join(sdk, "test/build-fixture-plugin");
const jco = path.join(path.dirname(createRequire(import.meta.url).resolve("@bytecodealliance/jco")), "jco.js");
const scratch = mkdtempSync(path.join(tmpdir(), "ctxbox-plugin-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Every file under `dir` with its size and modification time. */
function snapshot(dir) {
  return readdirSync(dir, { recursive: true }).sort().map((name) => {
    const stat = statSync(path.join(dir, name));
    return [name, stat.size, stat.mtimeMs];
  });
}

/** Runs the build on `pluginDir`; its exit status and output. */
function build(pluginDir, out) {
  return spawnSync(process.execPath, [path.join(sdk, "bin/ctxbox-ts-build.mjs"), "--openclaw-plugin", pluginDir, "-o", out], {
    encoding: "utf8",
    cwd: scratch,
  });
}

test("the fixture builds into a component whose layers answer as Node's, the plugin folder untouched", async () => {
  const before = snapshot(fixture);
  const out = path.join(scratch, "fixture.wasm");
  const result = build(fixture, out);
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stdout, /entry \.\/dist\/index\.js is its build output, not in the source tree: built from index\.ts/);
  assert.deepEqual(snapshot(fixture), before);

  const js = path.join(scratch, "fixture-js");
  execFileSync(process.execPath, [jco, "transpile", out, "--instantiation", "async", "--name", "engine", "-q", "-o", js]);
  const { instantiate } = await import(pathToFileURL(path.join(js, "engine.js")).href);
  const host = fakeHost();
  const instance = await instantiate(async (name) => WebAssembly.compile(readFileSync(path.join(js, name))), host.imports);
  const engine = instance.engine ?? instance["ctxbox:engine/engine@0.1.0"];
  const tools = instance.tools ?? instance["ctxbox:engine/tools@0.1.0"];
  assert.equal(engine.info().id, "build-fixture");
  const answer = JSON.parse(await tools.callTool({ sessionId: "s", sessionFile: "/sessions/s.jsonl" }, "probe", "{}"));
  assert.deepEqual(answer, {
    globalsAtLoad: "object function function",
    version: "2.3.4",
    moduleUrl: "file:///plugin/src/probe.ts",
    requirePath: "a/b",
    importVariable: "y.txt",
    importCore: "object",
    missing: answer.missing,
    unicodeClass: "DÉF",
    written: "kept in memory",
  });
  assert.match(answer.missing, /Cannot find module 'openclaw\/plugin-sdk\/no-such-module'/);
});

test("a plugin that throws while loading fails the build with its exception and stack", () => {
  const result = build(path.join(sdk, "test/build-fixture-throws"), path.join(scratch, "throws.wasm"));
  assert.notEqual(result.status, 0);
  assert.match(result.stderr, /the plugin failed while loading \(index\.ts\): RangeError: fixture exploded while loading/);
  assert.match(result.stderr, /explode@/);
});

/** A plugin folder in the scratch space with `index.ts` = `source`. */
function pluginWith(name, source) {
  const dir = path.join(scratch, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name, version: "1.0.0", type: "module", openclaw: { extensions: ["./dist/index.js"] } }));
  writeFileSync(path.join(dir, "openclaw.plugin.json"), JSON.stringify({ id: name }));
  writeFileSync(path.join(dir, "index.ts"), source);
  return dir;
}

/** Bundles the plugin in `dir` (no componentize). */
async function bundle(dir) {
  const work = path.join(scratch, `${path.basename(dir)}-work`);
  const plugin = preparePlugin(dir, work);
  const entryFile = path.join(work, "ctxbox-entry.mjs");
  writeFileSync(entryFile, pluginEntryModule({ ...plugin, packageFiles: {} }));
  return bundlePlugin(entryFile, work);
}

test("a static import of what cannot run stops the build naming file, line and why", async () => {
  const processes = pluginWith("spawns", 'import { join } from "node:path";\n\nimport { spawn } from "node:child_process";\nexport default { register() { spawn(join("a")); } };\n');
  await assert.rejects(bundle(processes), (error) => {
    assert.ok(error instanceof BuildError);
    assert.equal(error.message, "index.ts:3: imports node:child_process, which cannot run in a ctxbox engine: node:child_process is not offered (engines get no processes or threads)");
    return true;
  });
  const network = pluginWith("fetches", 'import http from "http";\nexport default { register() { http.get("x"); } };\n');
  await assert.rejects(bundle(network), { message: /^index\.ts:1: imports http, .*engines get no network/ });
  const sdkModule = pluginWith("sdk", 'import { x } from "openclaw/plugin-sdk/channels";\nexport default { register() { x(); } };\n');
  await assert.rejects(bundle(sdkModule), { message: /^index\.ts:1: imports openclaw\/plugin-sdk\/channels, .*not in the ctxbox shim \(offered: .*openclaw\/plugin-sdk\/core/ });
});

test("a require() of what cannot run fails when it runs, so optional loads stay optional", async () => {
  const dir = pluginWith("optional", 'let worker = "absent";\ntry { worker = require("worker_threads"); } catch (e) { worker = e.message; }\nexport default { worker };\n');
  const { code } = await bundle(dir);
  assert.match(code, /Cannot load worker_threads: node:worker_threads is not offered \(engines get no processes or threads\)/);
  assert.equal(rewriteDynamicImports(code).rewritten, 0, "no import() is left in the bundle");
});

test("the bundle's for…of loops get their indexed twins, and count as before", async () => {
  const dir = pluginWith(
    "loops",
    "export function weigh(text: string, parts: string[]): number {\n  let n = 0;\n  for (const ch of text) n += ch.length;\n  for (const part of parts) n += part.length * 10;\n  return n;\n}\nexport default { weigh };\n",
  );
  const { code } = await bundle(dir);
  // The plugin's function and the helper its twins call, out of the bundle (which runs only in the guest).
  const pieces = new Map();
  new Visitor({
    FunctionDeclaration(node) {
      if (node.id?.name === "weigh") pieces.set("weigh", code.slice(node.start, node.end));
    },
    VariableDeclaration(node) {
      if (node.declarations[0]?.id.name === ITERATION_KIND) pieces.set(ITERATION_KIND, code.slice(node.start, node.end));
    },
  }).visit(parseSync("bundle.js", code).program);
  assert.equal(pieces.size, 2, "the bundle holds the plugin's function and the helper");
  assert.equal(pieces.get("weigh").split(`${ITERATION_KIND}(`).length - 1, 2, "both of its loops have a twin");
  const weigh = new Function(`${pieces.get(ITERATION_KIND)}\n${pieces.get("weigh")}\nreturn weigh;`)();
  assert.equal(weigh("a😀b", ["xy", "z"]), 1 + 2 + 1 + 30);
  assert.equal(weigh(new String("ab"), new Set(["x"])), 2 + 10, "other iterables take the original loops");
});

test("the entry is the named file, else the TypeScript it is built from", () => {
  const dir = pluginWith("entries", "export default {};\n");
  assert.deepEqual(resolvePluginEntry(dir, { openclaw: { extensions: ["./index.ts"] } }), { entry: path.join(dir, "index.ts"), named: "./index.ts", usedSource: false });
  assert.deepEqual(resolvePluginEntry(dir, { main: "dist/index.js" }), { entry: path.join(dir, "index.ts"), named: "dist/index.js", usedSource: true });
  assert.throws(() => resolvePluginEntry(dir, {}), { message: /names no entry/ });
  rmSync(path.join(dir, "index.ts"));
  assert.throws(() => resolvePluginEntry(dir, { main: "dist/index.js" }), { message: /dist\/index\.js .* is not there, nor the TypeScript it is built from/ });
});

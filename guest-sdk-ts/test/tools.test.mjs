// The checked-in types match the WIT; ctxbox-ts-build refuses what the host
// would refuse and engines that do not type-check.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { WORLD, checkWorld, refusal, worldItems } from "../bin/imports.mjs";
import { buildEngine, project, sdk, transpiledEngine } from "./build.mjs";

const jco = path.join(path.dirname(createRequire(import.meta.url).resolve("@bytecodealliance/jco")), "jco.js");

function listing(dir, prefix = "") {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? listing(path.join(dir, entry.name), `${prefix}${entry.name}/`) : [`${prefix}${entry.name}`],
  ).sort();
}

test("types/ is what `npm run types` (jco guest-types) generates from wit/", () => {
  const out = mkdtempSync(path.join(tmpdir(), "ctxbox-types-"));
  try {
    // The package's own `types` script, writing into `out` instead of `types`.
    const script = JSON.parse(readFileSync(path.join(sdk, "package.json"), "utf8")).scripts.types.split(" ");
    assert.equal(script[0], "jco");
    const args = script.slice(1).map((arg, at, all) => (all[at - 1] === "-o" ? out : arg));
    assert.ok(args.includes(out), "the script names its output folder with -o");
    execFileSync(process.execPath, [jco, ...args, "-q"], { cwd: sdk, stdio: "pipe" });
    const checkedIn = path.join(sdk, "types");
    assert.deepEqual(listing(out), listing(checkedIn));
    for (const file of listing(out)) {
      assert.equal(
        readFileSync(path.join(checkedIn, file), "utf8"),
        readFileSync(path.join(out, file), "utf8"),
        `types/${file} is stale: run \`npm run types\``,
      );
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test("the import check follows the host's grant", () => {
  assert.equal(refusal("wasi:io/streams@0.2.12"), undefined);
  assert.equal(refusal("wasi:cli/stderr@0.2.12"), undefined);
  assert.equal(refusal("ctxbox:engine/host@0.1.0"), undefined);
  assert.match(refusal("wasi:filesystem/preopens@0.2.12"), /no filesystem/);
  assert.match(refusal("wasi:http/outgoing-handler@0.2.12"), /no network/);
  assert.match(refusal("acme:spy/exfiltrate"), /not part of the ctxbox sandbox/);
  const world = (lines) => `package root:component;\n\nworld root {\n${lines.map((l) => `  ${l};`).join("\n")}\n}\n`;
  assert.deepEqual(checkWorld(world(["import wasi:io/poll@0.2.12", "export ctxbox:engine/engine@0.1.0"])), []);
  // The host's model and index are functions of host@0.1.0; tools is an optional export.
  assert.deepEqual(
    checkWorld(world([
      "import ctxbox:engine/types@0.1.0", "import ctxbox:engine/host@0.1.0", "import ctxbox:engine/history@0.1.0",
      "export ctxbox:engine/tools@0.1.0", "export ctxbox:engine/engine@0.1.0",
    ])),
    [],
  );
  assert.deepEqual(checkWorld(world(["import wasi:filesystem/types@0.2.12", "import ctxbox:engine/host@0.2.0", "export ctxbox:engine/engine@0.2.0"])), [
    "refused import wasi:filesystem/types@0.2.12: engines get no filesystem; keep state with host.state-set",
    "import ctxbox:engine/host@0.2.0 is not contract version 0.1.0",
    "the component does not export ctxbox:engine/engine@0.1.0 (it exports: ctxbox:engine/engine@0.2.0)",
  ]);
});

test("an engine that does not type-check is not built", () => {
  // A project of its own, so the other tests' builds never see this file.
  const dir = mkdtempSync(path.join(tmpdir(), "ctxbox-broken-"));
  try {
    for (const file of ["package.json", "tsconfig.json"]) {
      writeFileSync(path.join(dir, file), readFileSync(path.join(project, file)));
    }
    mkdirSync(path.join(dir, "src"));
    writeFileSync(
      path.join(dir, "src/engine.ts"),
      'import { defineEngine } from "@ctxbox/guest";\n' +
        'export const engine = defineEngine({ info: { id: "x", name: "x" }, assemble: () => ({ items: [], estimatedTokens: 0 }) });\n',
    );
    assert.throws(() => buildEngine("src/engine.ts", path.join(dir, "engine.wasm"), dir), (error) => {
      assert.match(String(error.stderr), /not assignable to type 'bigint'/);
      assert.match(String(error.stderr), /type-checking \(tsc --noEmit\) failed/);
      return true;
    });
    assert.ok(!existsSync(path.join(dir, "engine.wasm")), "nothing is written");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("every engine is built against context-engine-with-tools and exports tools", () => {
  assert.equal(WORLD, "context-engine-with-tools");
  const wit = execFileSync(process.execPath, [jco, "wit", path.join(transpiledEngine(), "../engine.wasm")], { encoding: "utf8" });
  const { imports, exports } = worldItems(wit);
  assert.deepEqual(exports.sort(), ["ctxbox:engine/engine@0.1.0", "ctxbox:engine/tools@0.1.0"]);
  assert.ok(imports.includes("ctxbox:engine/host@0.1.0"), imports.join(", "));
  assert.deepEqual(checkWorld(wit), []);
});

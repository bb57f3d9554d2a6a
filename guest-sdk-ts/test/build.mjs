// Builds the SDK test engine (test/engine) with ctxbox-ts-build and
// transpiles it with `jco transpile --instantiation async`, once per change:
// the output is cached under node_modules/.cache/ctxbox-sdk-test, keyed by a
// hash of everything the component is made of.
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const sdk = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const project = path.join(sdk, "test/engine");
const jco = path.join(path.dirname(createRequire(import.meta.url).resolve("@bytecodealliance/jco")), "jco.js");

/** Every file under `dir` (sorted), for the cache key. */
function files(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.name !== "node_modules")
    .flatMap((entry) => {
      const full = path.join(dir, entry.name);
      return entry.isDirectory() || (entry.isSymbolicLink() && statSync(full).isDirectory()) ? files(full) : [full];
    })
    .sort();
}

function inputsHash() {
  const hash = createHash("sha256");
  for (const dir of ["src", "bin", "types", "wit", "test/engine"]) {
    for (const file of files(path.join(sdk, dir))) hash.update(file).update(readFileSync(file));
  }
  hash.update(readFileSync(path.join(sdk, "package-lock.json")));
  return hash.digest("hex").slice(0, 16);
}

/** Builds `entry` of the engine project `cwd` (default: the test engine) into `out` with ctxbox-ts-build. */
export function buildEngine(entry, out, cwd = project) {
  const link = path.join(cwd, "node_modules/@ctxbox/guest");
  if (!existsSync(link)) {
    mkdirSync(path.dirname(link), { recursive: true });
    symlinkSync(sdk, link, "dir");
  }
  return execFileSync(process.execPath, [path.join(sdk, "bin/ctxbox-ts-build.mjs"), entry, "-o", out], {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** The transpiled test engine's folder (its `engine.js` exports `instantiate`). */
export function transpiledEngine() {
  const dir = path.join(sdk, "node_modules/.cache/ctxbox-sdk-test", inputsHash());
  if (!existsSync(path.join(dir, "js/engine.js"))) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    buildEngine("src/engine.ts", path.join(dir, "engine.wasm"));
    execFileSync(process.execPath, [
      jco, "transpile", path.join(dir, "engine.wasm"), "--instantiation", "async", "--name", "engine",
      "-q", "-o", path.join(dir, "js"),
    ]);
  }
  return path.join(dir, "js");
}

export { project };

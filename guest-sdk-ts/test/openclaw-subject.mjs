// The OpenClaw plugins the adapter is tested against: the test subjects in
// `shared/subjects/` (read-only input next to the clone, found by walking
// up from it, or $CTXBOX_SUBJECTS), with their npm dependencies installed
// once from their own lockfile into a cache outside the clone
// ($CTXBOX_PLUGIN_DEPS, default ~/.cache/ctxbox/openclaw-plugin-deps).
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.resolve(fileURLToPath(new URL("../..", import.meta.url)));

/** The folder holding the test subjects, or `undefined` when there is none. */
function subjectsDir() {
  if (process.env.CTXBOX_SUBJECTS) return process.env.CTXBOX_SUBJECTS;
  for (let dir = path.dirname(repo); ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "shared", "subjects");
    if (existsSync(candidate)) return candidate;
    if (dir === path.dirname(dir)) return undefined;
  }
}

/** The subject folder `name`, or `undefined` when it is not there. */
export function subject(name) {
  const dir = subjectsDir();
  return dir !== undefined && existsSync(path.join(dir, name)) ? path.join(dir, name) : undefined;
}

/**
 * A folder whose `node_modules` holds the runtime dependencies of the
 * plugin in `dir` (`npm ci` of its lockfile, without dev, peer and optional
 * ones), installed on first use. The subject itself is never written to.
 */
export function pluginDependencies(dir) {
  const cache = process.env.CTXBOX_PLUGIN_DEPS ?? path.join(homedir(), ".cache", "ctxbox", "openclaw-plugin-deps");
  const target = path.join(cache, path.basename(dir));
  const lock = path.join(dir, "package-lock.json");
  const installed = path.join(target, "node_modules", ".ctxbox-installed-lock");
  if (existsSync(installed) && readFileSync(installed, "utf8") === readFileSync(lock, "utf8")) return target;
  mkdirSync(target, { recursive: true });
  copyFileSync(path.join(dir, "package.json"), path.join(target, "package.json"));
  copyFileSync(lock, path.join(target, "package-lock.json"));
  const npmCache = process.env.CTXBOX_NPM_CACHE ?? path.join(homedir(), ".cache", "ctxbox", "npm");
  execFileSync(
    "npm",
    ["ci", "--omit=dev", "--omit=peer", "--omit=optional", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline", "--cache", npmCache],
    { cwd: target, stdio: "pipe" },
  );
  copyFileSync(lock, installed);
  return target;
}

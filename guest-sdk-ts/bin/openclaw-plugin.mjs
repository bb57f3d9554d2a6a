// `ctxbox-ts-build --openclaw-plugin DIR`: an OpenClaw plugin's package, as
// published, bundled into the one JavaScript module componentize-js runs.
//
//   1. preparePlugin: DIR is copied into a temporary folder (DIR is never
//      written: it may be read-only) and the plugin's runtime dependencies
//      are installed there from its lockfile (`npm ci --omit=dev
//      --omit=peer --ignore-scripts`, npm's cache outside the clone). The
//      entry is `package.json`'s `openclaw.extensions[0]`, else its `main`;
//      a built file (`./dist/index.js`) that the source tree does not hold is
//      found as the TypeScript it is built from: the same path with `.ts`,
//      then `index.ts` at the package root (OpenClaw plugins build `dist/`
//      from a root `index.ts`).
//   2. bundlePlugin: rolldown bundles a generated entry (below) with the
//      plugin: `node:X` and Node's bare module names go to the SDK's shims
//      (src/node, `node:sqlite` to src/sqlite.ts), `openclaw/plugin-sdk/X`
//      to src/openclaw/plugin-sdk/X.ts; a static import of a Node module
//      with no shim, or of an OpenClaw SDK module the shim does not offer,
//      stops the build naming the importing file and line (a `require` or
//      `import()` of one fails when it runs, as optional loads expect);
//      `import.meta` becomes the module's path under PLUGIN_ROOT, `\p{…}` is
//      lowered, every dynamic `import()` left rewritten to the module map
//      (plugin-transforms.mjs).
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync } from "node:fs";
import { builtinModules } from "node:module";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  fastPathForOf,
  inlineArithmeticHelpers,
  lowerUnicodePropertyEscapes,
  memoizeTextMeasures,
  rewriteDynamicImports,
  rewriteImportMeta,
} from "./plugin-transforms.mjs";

const sdk = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Where the plugin's package files are mounted read-only in the engine's filesystem. */
export const PLUGIN_ROOT = "/plugin";

/** A build failure with a message for the user (no stack). */
export class BuildError extends Error {}

/** Reads and parses a JSON file, failing the build with its name. */
function readJson(file) {
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new BuildError(`cannot read ${file}: ${error.message}`);
  }
}

/** The module the plugin's entry names, as found in its source tree (see the module's comment). */
export function resolvePluginEntry(dir, packageJson) {
  const named = packageJson.openclaw?.extensions?.[0] ?? packageJson.main;
  if (typeof named !== "string") {
    throw new BuildError(`${dir}/package.json names no entry: neither openclaw.extensions[0] nor main`);
  }
  const candidates = [named];
  const stem = named.replace(/\.[cm]?js$/, "");
  if (stem !== named) candidates.push(`${stem}.ts`, `${stem}.mts`);
  candidates.push("index.ts", "index.mts");
  for (const candidate of candidates) {
    const full = path.resolve(dir, candidate);
    if (existsSync(full)) return { entry: full, named, usedSource: candidate !== named };
  }
  throw new BuildError(
    `${dir}: the entry ${named} (package.json openclaw.extensions[0] or main) is not there, ` +
      `nor the TypeScript it is built from (tried ${candidates.slice(1).join(", ")})`,
  );
}

/**
 * Copies the plugin into `work` (without its node_modules, VCS or build
 * output folders) and installs its runtime dependencies there. Gives the
 * entry, the manifest and package.json.
 */
export function preparePlugin(dir, work) {
  if (!existsSync(path.join(dir, "package.json"))) throw new BuildError(`${dir} holds no package.json`);
  if (!existsSync(path.join(dir, "openclaw.plugin.json"))) {
    throw new BuildError(`${dir} holds no openclaw.plugin.json: not an OpenClaw plugin`);
  }
  const packageJson = readJson(path.join(dir, "package.json"));
  const manifest = readJson(path.join(dir, "openclaw.plugin.json"));
  const skipped = new Set(["node_modules", ".git"]);
  cpSync(dir, work, {
    recursive: true,
    filter: (source) => !skipped.has(path.basename(source)),
  });
  const dependencies = Object.keys(packageJson.dependencies ?? {});
  if (dependencies.length > 0) {
    if (!existsSync(path.join(work, "package-lock.json"))) {
      throw new BuildError(`${dir} has dependencies (${dependencies.join(", ")}) but no package-lock.json to pin them`);
    }
    const cache = process.env.CTXBOX_NPM_CACHE ?? path.join(homedir(), ".cache/ctxbox/npm");
    mkdirSync(cache, { recursive: true });
    const npm = spawnSync(
      "npm",
      ["ci", "--omit=dev", "--omit=peer", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline", "--cache", cache],
      { cwd: work, encoding: "utf8", maxBuffer: 64 << 20 },
    );
    if (npm.status !== 0) {
      throw new BuildError(`installing the plugin's dependencies (npm ci) failed:\n${npm.stdout}${npm.stderr}${npm.error?.message ?? ""}`);
    }
  }
  const found = resolvePluginEntry(work, packageJson);
  return { ...found, manifest, packageJson, work };
}

/** The Node modules the SDK shims, by name without `node:`, to its source file. */
export function nodeShims() {
  const shims = new Map();
  for (const file of readdirSync(path.join(sdk, "src/node"))) {
    if (!file.endsWith(".ts") || file.endsWith(".d.ts")) continue;
    const name = file.slice(0, -3);
    if (builtinModules.includes(name)) shims.set(name, path.join(sdk, "src/node", file));
  }
  shims.set("fs/promises", path.join(sdk, "src/node/fs_promises.ts"));
  shims.set("path/posix", path.join(sdk, "src/node/path.ts"));
  shims.set("sqlite", path.join(sdk, "src/sqlite.ts"));
  return shims;
}

/** OpenClaw's plugin SDK modules the shim offers: `openclaw/plugin-sdk/X` to its source file. */
export function openClawShims() {
  const dir = path.join(sdk, "src/openclaw/plugin-sdk");
  const shims = new Map();
  if (!existsSync(dir)) return shims;
  for (const file of readdirSync(dir)) {
    if (!file.endsWith(".ts") || file.endsWith(".d.ts")) continue;
    const name = file.slice(0, -3);
    shims.set(name === "index" ? "openclaw/plugin-sdk" : `openclaw/plugin-sdk/${name}`, path.join(dir, file));
  }
  return shims;
}

/** Why a Node module has no shim, for the build error. */
function whyNoShim(name) {
  if (/^(child_process|cluster|worker_threads)$/.test(name)) return "engines get no processes or threads";
  if (/^(net|http|https|http2|dgram|dns|dns\/promises|tls|_http_\w+|_tls_\w+)$/.test(name)) return "engines get no network";
  if (/^(inspector|repl|tty|v8|vm|wasi|trace_events)/.test(name)) return "engines get no runtime internals or terminal";
  return "the ctxbox SDK has no shim for it";
}

/** The 1-based line of the first place `source` quotes `specifier`, or undefined. */
function lineOf(source, specifier) {
  for (const quote of ['"', "'", "`"]) {
    const at = source.indexOf(`${quote}${specifier}${quote}`);
    if (at >= 0) return source.slice(0, at).split("\n").length;
  }
  return undefined;
}

const MODULE_MAP = "\0ctxbox:module-map";
const REFUSED = "\0ctxbox:refused:";
const SDK_PACKAGE = "@ctxbox/guest";

/**
 * The rolldown plugin that maps imports (see the module's comment) and
 * generates the module map: every shim, registered by its specifiers with
 * `node:module`'s registerModules, so `require(x)` and a rewritten
 * `import(x)` reach them.
 */
function ctxboxResolver({ work, memoized = [] }) {
  const node = nodeShims();
  const openclaw = openClawShims();
  const sdkSource = path.join(sdk, "src") + path.sep;
  const sdkExports = readJson(path.join(sdk, "package.json")).exports;
  const sources = new Map();
  const relative = (file) => path.relative(work, file) || file;
  /** Where module `id` sits in the engine's filesystem (for `import.meta`): the plugin's files under PLUGIN_ROOT. */
  const modulePath = (id) =>
    id.startsWith(work + path.sep) ? `${PLUGIN_ROOT}/${relative(id).split(path.sep).join("/")}` : `/ctxbox-sdk/${path.basename(id)}`;

  /** The SDK file a `@ctxbox/guest[/…]` specifier names, from the SDK's package.json exports. */
  function sdkFile(specifier) {
    const subpath = `.${specifier.slice(SDK_PACKAGE.length)}`;
    for (const [pattern, target] of Object.entries(sdkExports)) {
      if (pattern === subpath) return path.join(sdk, target);
      const star = pattern.indexOf("*");
      if (star >= 0 && subpath.startsWith(pattern.slice(0, star)) && subpath.endsWith(pattern.slice(star + 1))) {
        const middle = subpath.slice(star, subpath.length - (pattern.length - star - 1));
        return path.join(sdk, target.replace("*", middle));
      }
    }
    return undefined;
  }

  function refuse(specifier, importer, kind, reason) {
    if (kind === "import-statement" || kind === "export-statement" || kind === undefined) {
      const source = importer ? sources.get(importer) : undefined;
      const line = source === undefined ? undefined : lineOf(source, specifier);
      const where = importer ? `${relative(importer)}${line ? `:${line}` : ""}` : "the entry";
      throw new BuildError(`${where}: imports ${specifier}, which cannot run in a ctxbox engine: ${reason}`);
    }
    // A require() or import() fails when it runs, so optional loads stay optional.
    return `${REFUSED}${encodeURIComponent(`${specifier}: ${reason}`)}`;
  }

  return {
    name: "ctxbox-openclaw-plugin",
    load(id) {
      if (id === MODULE_MAP) {
        const lines = [`import { registerModules } from ${JSON.stringify(path.join(sdk, "src/node/module.ts"))};`];
        const entries = [];
        let index = 0;
        for (const [name, file] of node) {
          lines.push(`import * as m${index} from ${JSON.stringify(file)};`);
          entries.push(`${JSON.stringify(`node:${name}`)}: m${index}`, `${JSON.stringify(name)}: m${index}`);
          index += 1;
        }
        for (const [name, file] of openclaw) {
          lines.push(`import * as m${index} from ${JSON.stringify(file)};`);
          entries.push(`${JSON.stringify(name)}: m${index}`);
          index += 1;
        }
        lines.push(`registerModules({ ${entries.join(", ")} });`);
        return lines.join("\n");
      }
      if (id.startsWith(REFUSED)) {
        const message = decodeURIComponent(id.slice(REFUSED.length));
        return `const error = new Error(${JSON.stringify(`Cannot load ${message}`)}); error.code = "ERR_CTXBOX_REFUSED"; throw error;`;
      }
      return null;
    },
    resolveId(specifier, importer, extra) {
      if (specifier === MODULE_MAP || specifier.startsWith(REFUSED)) return specifier;
      if (/^(ctxbox|wasi):/.test(specifier)) return { id: specifier, external: true };
      if (specifier === SDK_PACKAGE || specifier.startsWith(`${SDK_PACKAGE}/`)) {
        const file = sdkFile(specifier);
        if (file === undefined) throw new BuildError(`${specifier} is not a module of the SDK`);
        return file;
      }
      const fromSdk = importer?.startsWith(sdkSource) ?? false;
      const bare = specifier.replace(/^node:/, "");
      // The SDK's own bare imports (the `buffer` package) are packages, not Node's modules.
      if (specifier.startsWith("node:") || (!fromSdk && builtinModules.includes(bare))) {
        const shim = node.get(bare);
        if (shim !== undefined) return shim;
        return refuse(specifier, importer, extra?.kind, `node:${bare} is not offered (${whyNoShim(bare)})`);
      }
      if (specifier === "openclaw" || specifier.startsWith("openclaw/")) {
        const shim = openclaw.get(specifier);
        if (shim !== undefined) return shim;
        const offered = [...openclaw.keys()].join(", ") || "none";
        return refuse(specifier, importer, extra?.kind, `OpenClaw's ${specifier} is not in the ctxbox shim (offered: ${offered})`);
      }
      return null;
    },
    transform(code, id) {
      if (!/\.[cm]?[jt]sx?$/.test(id)) return null;
      sources.set(id, code);
      const { code: metaFree } = rewriteImportMeta(code, id, modulePath(id));
      const { code: lowered, dynamic } = lowerUnicodePropertyEscapes(metaFree, id);
      if (dynamic.length > 0) {
        this.warn(`${relative(id)}:${dynamic.join(",")}: a RegExp built at run time with \\p{…} throws a SyntaxError (StarlingMonkey has no Unicode property tables)`);
      }
      return lowered === code ? null : { code: lowered, map: null };
    },
    renderChunk(code) {
      // What no module's transform saw (rolldown's own code) is held to the same rules.
      const metaFree = rewriteImportMeta(code, "bundle.js", `${PLUGIN_ROOT}/bundle.js`).code;
      const importFree = rewriteDynamicImports(metaFree, "bundle.js").code;
      // The whole bundle's measures, loops and helpers, the SDK's own among them.
      const remembered = memoizeTextMeasures(importFree, "bundle.js");
      memoized.push(...remembered.memoized);
      const twinned = fastPathForOf(remembered.code, "bundle.js").code;
      return { code: inlineArithmeticHelpers(twinned, "bundle.js").code, map: null };
    },
  };
}

/**
 * The generated entry: globals first (a module of its own, evaluated before
 * any other), the module map, the package mounted, then the plugin loaded
 * through an inlined `import()`: its modules' bodies run there, after the
 * globals, and what they throw is caught, printed with its stack and
 * rethrown, so a failure at load names the real exception.
 */
export function pluginEntryModule({ entry, manifest, packageJson, packageFiles }) {
  return [
    "// Generated by ctxbox-ts-build --openclaw-plugin: the component's exports.",
    'import "@ctxbox/guest/node/globals-installed";',
    'import "@ctxbox/guest/measure-memo";',
    `import ${JSON.stringify(MODULE_MAP)};`,
    'import { mountPackage } from "@ctxbox/guest/node/fs";',
    'import { openClawEngine } from "@ctxbox/guest/openclaw";',
    "",
    `mountPackage(${JSON.stringify(PLUGIN_ROOT)}, ${JSON.stringify(packageFiles)});`,
    "let plugin;",
    "try {",
    `  plugin = await import(${JSON.stringify(entry)});`,
    "} catch (error) {",
    "  const stack = error && typeof error === \"object\" && typeof error.stack === \"string\" ? error.stack : \"(no stack)\";",
    `  const message = "the plugin failed while loading (" + ${JSON.stringify(path.basename(entry))} + "): " + String(error) + "\\n" + stack;`,
    "  console.error(message);",
    "  throw error instanceof Error ? error : new Error(message);",
    "}",
    "const built = openClawEngine(plugin, {",
    `  manifest: ${JSON.stringify(manifest)},`,
    `  packageJson: ${JSON.stringify(packageJson)},`,
    `  rootDir: ${JSON.stringify(PLUGIN_ROOT)},`,
    "});",
    "export const engine = built.engine;",
    "export const tools = built.tools;",
    "",
  ].join("\n");
}

/** Bundles the entry module at `entryFile` (with the plugin prepared in `work`) into one ES module's code. */
export async function bundlePlugin(entryFile, work) {
  const { rolldown } = await import("rolldown");
  const warnings = [];
  const memoized = [];
  const build = await rolldown({
    input: entryFile,
    cwd: work,
    platform: "neutral",
    plugins: [ctxboxResolver({ work, memoized })],
    resolve: {
      mainFields: ["module", "main"],
      conditionNames: ["import", "module", "default"],
      // TypeScript sources import each other as `./x.js`.
      extensionAlias: { ".js": [".ts", ".tsx", ".js"], ".mjs": [".mts", ".mjs"] },
      extensions: [".ts", ".tsx", ".mts", ".js", ".mjs", ".json"],
    },
    onLog(level, log) {
      if (level === "warn") warnings.push(log.message);
    },
  });
  try {
    const { output } = await build.generate({ format: "esm", codeSplitting: false });
    const chunks = output.filter((item) => item.type === "chunk");
    if (chunks.length !== 1) throw new BuildError(`bundling gave ${chunks.length} chunks, not one`);
    return { code: chunks[0].code, warnings, memoized };
  } catch (error) {
    // A BuildError thrown in a hook reaches here wrapped: keep its message.
    const own = [error, ...(error.errors ?? [])].find((e) => e instanceof BuildError) ?? error.cause;
    if (own instanceof BuildError) throw own;
    throw new BuildError(`bundling failed: ${error.message}`);
  } finally {
    await build.close();
  }
}

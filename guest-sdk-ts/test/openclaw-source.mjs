// Loads the SDK's OpenClaw adapter from its TypeScript sources in Node (as
// sdk-source.mjs does) with the host import answered by openclaw-host.mjs,
// and can load an OpenClaw plugin's own TypeScript sources the way
// `ctxbox-ts-build --openclaw-plugin` bundles them: `openclaw/plugin-sdk/<name>`
// is the SDK's `src/openclaw/plugin-sdk/<name>.ts`, `node:sqlite` the SDK's
// `sqlite.ts` (over fake-sql.mjs), `./x.js` inside the plugin its `./x.ts`,
// and its npm dependencies come from `dependencies` (a node_modules folder).
// Plugin sources are compiled with TypeScript (they use parameter
// properties, which Node's type stripping refuses); the other `node:*`
// modules are Node's own.
import { existsSync, readFileSync } from "node:fs";
import { builtinModules, createRequire, registerHooks } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { sdkModule } from "./sdk-source.mjs";

const here = new URL(".", import.meta.url);
const src = new URL("../src/", here).href;
const hostFake = new URL("openclaw-host.mjs", here).href;

/** Plugin folders (file URLs, ending in `/`) and the node_modules their dependencies resolve from. */
const plugins = [];

/** The plugin folder `url` belongs to, if any. */
const pluginOf = (url) => plugins.find((plugin) => url?.startsWith(plugin.root));

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === "ctxbox:engine/host@0.1.0") return { url: hostFake, shortCircuit: true };
    const plugin = pluginOf(context.parentURL);
    if (!plugin) return nextResolve(specifier, context);
    const sdkShim = /^openclaw\/plugin-sdk\/([a-z0-9-]+)$/.exec(specifier);
    if (sdkShim) return { url: new URL(`openclaw/plugin-sdk/${sdkShim[1]}.ts`, src).href, shortCircuit: true };
    if (specifier === "node:sqlite") return { url: new URL("sqlite.ts", src).href, shortCircuit: true };
    if (specifier.startsWith(".") && specifier.endsWith(".js")) {
      const typescript = new URL(specifier.replace(/\.js$/, ".ts"), context.parentURL);
      if (existsSync(fileURLToPath(typescript))) return { url: typescript.href, shortCircuit: true };
    }
    const bare = !specifier.startsWith(".") && !specifier.startsWith("/") && !specifier.startsWith("node:");
    if (bare && !builtinModules.includes(specifier)) {
      const resolved = createRequire(plugin.dependencies).resolve(specifier);
      return { url: pathToFileURL(resolved).href, shortCircuit: true };
    }
    return nextResolve(specifier, context);
  },
  load(url, context, nextLoad) {
    if (!pluginOf(url) || !url.endsWith(".ts")) return nextLoad(url, context);
    const source = readFileSync(fileURLToPath(url), "utf8");
    const { outputText } = ts.transpileModule(source, {
      fileName: fileURLToPath(url),
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false },
    });
    return { format: "module", source: outputText, shortCircuit: true };
  },
});

/**
 * Imports the plugin module at `entry` (a path inside `root`), its npm
 * dependencies resolved from the `node_modules` folder in `dependencies`.
 */
export async function loadPlugin(root, entry, dependencies) {
  plugins.push({ root: pathToFileURL(`${root.replace(/\/$/, "")}/`).href, dependencies: pathToFileURL(`${dependencies}/`).href });
  return import(pathToFileURL(entry).href);
}

export { sdkModule };
/** The fake host behind the `ctxbox:engine/host` import. */
export { fake } from "./openclaw-host.mjs";

// Loads the SDK's TypeScript sources in Node itself (Node's type stripping),
// with the component's imports answered by fakes: `ctxbox:engine/sql` by
// fake-sql.mjs, `ctxbox:engine/host` by an in-memory log. For unit tests of
// SDK layers that need no component; the component itself is tested through
// `jco transpile` (build.mjs). Needs Node 22.18 or later.
import { createRequire, registerHooks } from "node:module";
import { pathToFileURL } from "node:url";

const here = new URL(".", import.meta.url);
const fakes = {
  "ctxbox:engine/sql@0.1.0": new URL("fake-sql.mjs", here).href,
  "ctxbox:engine/host@0.1.0": new URL("fake-host-log.mjs", here).href,
};
const src = new URL("../src/", here).href;
// The SDK's `buffer` is the npm package (as the component's bundle has it), not Node's own.
const bufferPackage = pathToFileURL(createRequire(import.meta.url).resolve("buffer/")).href;

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier in fakes) return { url: fakes[specifier], shortCircuit: true };
    if (specifier === "buffer" && context.parentURL?.startsWith(src)) return { url: bufferPackage, shortCircuit: true };
    // The sources import each other as `./x.js`, as tsc wants.
    if (context.parentURL?.startsWith(src) && specifier.startsWith(".") && specifier.endsWith(".js")) {
      return nextResolve(specifier.replace(/\.js$/, ".ts"), context);
    }
    return nextResolve(specifier, context);
  },
});

/** The SDK module `name` of `src/` (e.g. `sqlite`), loaded from its TypeScript source. */
export const sdkModule = (name) => import(new URL(`${name}.ts`, src).href);

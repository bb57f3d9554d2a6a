// Loads the SDK's TypeScript sources in Node itself (Node's type stripping),
// with the component's imports answered by fakes: `ctxbox:engine/sql` by
// fake-sql.mjs, `ctxbox:engine/host` by an in-memory log. For unit tests of
// SDK layers that need no component; the component itself is tested through
// `jco transpile` (build.mjs). Needs Node 22.18 or later.
import { registerHooks } from "node:module";

const here = new URL(".", import.meta.url);
const fakes = {
  "ctxbox:engine/sql@0.1.0": new URL("fake-sql.mjs", here).href,
  "ctxbox:engine/host@0.1.0": new URL("fake-host-log.mjs", here).href,
};
const src = new URL("../src/", here).href;

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier in fakes) return { url: fakes[specifier], shortCircuit: true };
    // The sources import each other as `./x.js`, as tsc wants.
    if (context.parentURL?.startsWith(src) && specifier.startsWith(".") && specifier.endsWith(".js")) {
      return nextResolve(specifier.replace(/\.js$/, ".ts"), context);
    }
    return nextResolve(specifier, context);
  },
});

/** The SDK module `name` of `src/` (e.g. `sqlite`), loaded from its TypeScript source. */
export const sdkModule = (name) => import(new URL(`${name}.ts`, src).href);

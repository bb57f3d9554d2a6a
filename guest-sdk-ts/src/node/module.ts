/**
 * `node:module` and the module map behind every specifier a plugin names at
 * run time. A bundled plugin cannot load modules: what `require(x)` (from
 * `createRequire`) and a rewritten `import(x)` can reach is what the build
 * put in the map with {@link registerModules}: the SDK's shims of Node's
 * modules and of OpenClaw's plugin SDK. Anything else is
 * `ERR_MODULE_NOT_FOUND` naming the specifier (a rejected Promise for
 * `import()`), never a trap.
 */

/** The Node modules the map holds, without their `node:` prefix (Node's `builtinModules`). */
export const builtinModules: string[] = [];

/** The modules by specifier, as the build registered them. */
const modules = new Map<string, object>();

/** The key under which the global object holds {@link importModule} (for `Function("…import(x)…")` code the build rewrote). */
export const IMPORT_GLOBAL = Symbol.for("@ctxbox/guest/import");

/** Adds modules (specifier → namespace object) to the map. */
export function registerModules(entries: Record<string, object>): void {
  for (const [specifier, namespace] of Object.entries(entries)) {
    modules.set(specifier, namespace);
    if (specifier.startsWith("node:") && !builtinModules.includes(specifier.slice(5))) builtinModules.push(specifier.slice(5));
  }
}

function notFound(specifier: string): Error {
  const known = [...modules.keys()].sort().join(", ") || "none";
  const error = new Error(
    `Cannot find module '${specifier}': a sandboxed engine reaches only the modules its build bundled (known: ${known})`,
  ) as Error & { code: string };
  error.code = "ERR_MODULE_NOT_FOUND";
  return error;
}

/** The namespace of `specifier` in the map (a `node:` prefix optional for Node's modules); throws for an unknown one. */
export function requireModule(specifier: string): object {
  const found = modules.get(String(specifier)) ?? modules.get(`node:${specifier}`);
  if (found === undefined) throw notFound(String(specifier));
  return found;
}

/** What the build rewrites `import(specifier)` to: the module's namespace, or a rejection naming it. */
export function importModule(specifier: unknown): Promise<object> {
  try {
    return Promise.resolve(requireModule(String(specifier)));
  } catch (error) {
    return Promise.reject(error);
  }
}

Object.defineProperty(globalThis, IMPORT_GLOBAL, { value: importModule, configurable: true });

/** A `require` over the module map (as `createRequire` gives). */
export interface Require {
  (specifier: string): unknown;
  resolve(specifier: string): string;
  cache: Record<string, unknown>;
}

/**
 * Node's `createRequire(from)`: a `require` answering from the module map,
 * whatever `from` is (there are no files to resolve against). A module with
 * only a default export is that export, as a CommonJS module would be.
 */
export function createRequire(_from: unknown): Require {
  const require = ((specifier: string) => {
    const namespace = requireModule(specifier) as Record<string, unknown>;
    const names = Object.keys(namespace);
    return names.length === 1 && names[0] === "default" ? namespace.default : namespace;
  }) as Require;
  require.resolve = (specifier: string) => {
    requireModule(specifier);
    return String(specifier);
  };
  require.cache = {};
  return require;
}

/** Whether `specifier` names one of Node's modules the map holds. */
export function isBuiltin(specifier: string): boolean {
  const name = String(specifier).replace(/^node:/, "");
  return modules.has(`node:${name}`);
}

/** Refused: nothing is loaded from files, so there is nothing to hook. */
export function register(): never {
  const error = new Error("module.register is not offered to a sandboxed engine") as Error & { code: string };
  error.code = "ERR_CTXBOX_REFUSED";
  throw error;
}

export default { createRequire, builtinModules, isBuiltin, register };

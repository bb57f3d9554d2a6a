/**
 * `node:util`, the everyday part: `format` (printf-style `%s %d %i %f %j
 * %o %O %c %%`; `%o` without Node's hidden properties), a plain `inspect`
 * (one line, no colours), `promisify`, `callbackify`,
 * `deprecate` (warns once through `console.warn`), `inherits`,
 * `isDeepStrictEqual`, `types`, and the text codecs. `parseArgs` is
 * refused: an engine has no command line.
 */

/** Options of {@link inspect} (depth only). */
export interface InspectOptions {
  depth?: number;
}

/** `value` as readable text: strings quoted, objects and arrays to `depth` (2), the rest as `String` does. */
export function inspect(value: unknown, options: InspectOptions = {}): string {
  const seen = new Set<object>();
  const depth = options.depth ?? 2;
  const show = (item: unknown, level: number): string => {
    switch (typeof item) {
      case "string": {
        // Node's choice of quote: single, else double, else backtick, else escaped single.
        const quote = !item.includes("'") ? "'" : !item.includes('"') ? '"' : !item.includes("`") && !item.includes("${") ? "`" : "'";
        const escaped = item.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll(quote, `\\${quote}`);
        return `${quote}${escaped}${quote}`;
      }
      case "bigint":
        return `${item}n`;
      case "symbol":
        return item.toString();
      case "function":
        return `[Function: ${item.name || "(anonymous)"}]`;
      case "object": {
        if (item === null) return "null";
        if (item instanceof Error) {
          // V8's stack starts with the name and message; SpiderMonkey's holds the frames only.
          const head = `${item.name}: ${item.message}`;
          return !item.stack ? head : item.stack.startsWith(head) ? item.stack : `${head}\n${item.stack}`;
        }
        if (item instanceof Date) return Number.isNaN(item.getTime()) ? "Invalid Date" : item.toISOString();
        if (item instanceof RegExp) return String(item);
        if (seen.has(item)) return "[Circular *1]";
        if (level > depth) return Array.isArray(item) ? "[Array]" : "[Object]";
        seen.add(item);
        try {
          if (Array.isArray(item)) return item.length === 0 ? "[]" : `[ ${item.map((entry) => show(entry, level + 1)).join(", ")} ]`;
          if (item instanceof Map) {
            return `Map(${item.size}) { ${[...item].map(([k, v]) => `${show(k, level + 1)} => ${show(v, level + 1)}`).join(", ")} }`;
          }
          if (item instanceof Set) return `Set(${item.size}) { ${[...item].map((entry) => show(entry, level + 1)).join(", ")} }`;
          const entries = Object.entries(item).map(([key, entry]) => `${/^[A-Za-z_$][\w$]*$/.test(key) ? key : show(key, 0)}: ${show(entry, level + 1)}`);
          return entries.length === 0 ? "{}" : `{ ${entries.join(", ")} }`;
        } finally {
          seen.delete(item);
        }
      }
      default:
        return Object.is(item, -0) ? "-0" : String(item);
    }
  };
  return show(value, 0);
}

/** `template` with each `%` directive replaced by the next argument; the rest appended with spaces. */
export function format(template?: unknown, ...args: unknown[]): string {
  if (typeof template !== "string") return [template, ...args].map((arg) => (typeof arg === "string" ? arg : inspect(arg))).join(" ");
  let next = 0;
  const out = template.replace(/%[sdifjoOc%]/g, (directive) => {
    if (directive === "%%") return "%";
    if (next >= args.length) return directive;
    const arg = args[next++];
    switch (directive) {
      case "%s":
        if (typeof arg === "string") return arg;
        if (typeof arg === "bigint") return `${arg}n`;
        return (typeof arg === "object" && arg !== null) || Object.is(arg, -0) ? inspect(arg, { depth: 0 }) : String(arg);
      case "%d":
        return typeof arg === "bigint" ? `${arg}n` : typeof arg === "object" && arg !== null ? "NaN" : String(Number(arg));
      case "%i":
        return typeof arg === "bigint" ? `${arg}n` : String(Number.parseInt(String(arg), 10));
      case "%f":
        return String(Number.parseFloat(String(arg)));
      case "%j":
        try {
          return JSON.stringify(arg);
        } catch {
          return "[Circular]";
        }
      case "%c":
        return "";
      case "%o":
        // Node's %o also shows hidden properties (such as an array's length); this one does not.
        return inspect(arg, { depth: 4 });
      default:
        return inspect(arg);
    }
  });
  const rest = args.slice(next).map((arg) => (typeof arg === "string" ? arg : inspect(arg)));
  return [out, ...rest].join(" ");
}

/** A Promise-answering version of a Node-style callback function. */
export function promisify<T>(original: (...args: never[]) => unknown): (...args: unknown[]) => Promise<T> {
  if (typeof original !== "function") throw new TypeError('The "original" argument must be of type function');
  return (...args: unknown[]) =>
    new Promise<T>((resolve, reject) => {
      (original as (...args: unknown[]) => unknown)(...args, (error: unknown, value: T) => (error ? reject(error) : resolve(value)));
    });
}

/** A Node-style callback version of a Promise-answering function. */
export function callbackify<T>(original: (...args: never[]) => Promise<T>): (...args: unknown[]) => void {
  return (...args: unknown[]) => {
    const callback = args.pop() as (error: unknown, value?: T) => void;
    (original as (...args: unknown[]) => Promise<T>)(...args).then(
      (value) => callback(null, value),
      (error: unknown) => callback(error ?? new Error("Promise was rejected with a falsy value")),
    );
  };
}

/** `fn`, warning once (`console.warn`) that it is deprecated. */
export function deprecate<F extends (...args: never[]) => unknown>(fn: F, message: string, code?: string): F {
  let warned = false;
  return function (this: unknown, ...args: never[]) {
    if (!warned) {
      warned = true;
      console.warn(`${code ? `[${code}] ` : ""}DeprecationWarning: ${message}`);
    }
    return fn.apply(this, args);
  } as F;
}

/** Makes `constructor` inherit `superConstructor`'s prototype (the old way). */
export function inherits(constructor: { prototype: object; super_?: unknown }, superConstructor: { prototype: object }): void {
  Object.setPrototypeOf(constructor.prototype, superConstructor.prototype);
  constructor.super_ = superConstructor;
}

/** Whether `a` and `b` are deeply and strictly equal (primitives by `Object.is`, objects by prototype and own entries). */
export function isDeepStrictEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (a instanceof Date) return a.getTime() === (b as Date).getTime();
  if (a instanceof Map || a instanceof Set) {
    const left = [...a];
    const right = [...(b as Map<unknown, unknown> | Set<unknown>)];
    return left.length === right.length && left.every((entry, i) => isDeepStrictEqual(entry, right[i]));
  }
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.hasOwn(b, key) && isDeepStrictEqual((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]));
}

/** Refused: an engine has no command line. */
export function parseArgs(): never {
  const error = new Error("util.parseArgs is not offered to a sandboxed engine: it has no command line") as Error & { code: string };
  error.code = "ERR_CTXBOX_REFUSED";
  throw error;
}

/** `util.types`: the checks engines ask. */
export const types = {
  isDate: (value: unknown): value is Date => value instanceof Date,
  isRegExp: (value: unknown): value is RegExp => value instanceof RegExp,
  isPromise: (value: unknown): value is Promise<unknown> => value instanceof Promise,
  isMap: (value: unknown): value is Map<unknown, unknown> => value instanceof Map,
  isSet: (value: unknown): value is Set<unknown> => value instanceof Set,
  isTypedArray: (value: unknown): boolean => ArrayBuffer.isView(value) && !(value instanceof DataView),
  isUint8Array: (value: unknown): value is Uint8Array => value instanceof Uint8Array,
  isNativeError: (value: unknown): value is Error => value instanceof Error,
  isAsyncFunction: (value: unknown): boolean => typeof value === "function" && value.constructor?.name === "AsyncFunction",
};

const textCodecs = globalThis as unknown as { TextEncoder: typeof TextEncoder; TextDecoder: typeof TextDecoder };
const { TextEncoder: UtilTextEncoder, TextDecoder: UtilTextDecoder } = textCodecs;
/** The global text codecs, as `node:util` exports them. */
export { UtilTextEncoder as TextEncoder, UtilTextDecoder as TextDecoder };

export default {
  format, inspect, promisify, callbackify, deprecate, inherits, isDeepStrictEqual, parseArgs, types,
  TextEncoder: UtilTextEncoder, TextDecoder: UtilTextDecoder,
};

/**
 * `node:path`, POSIX: the guest has no Windows paths and no working
 * directory, so `resolve` starts from `/` (what `process.cwd()` answers).
 */

/** The parts of a path, as `parse` answers and `format` takes them. */
export interface ParsedPath {
  root: string;
  dir: string;
  base: string;
  ext: string;
  name: string;
}

export const sep = "/";
export const delimiter = ":";

function checkString(value: unknown, name: string): asserts value is string {
  if (typeof value !== "string") {
    const error = new TypeError(`The "${name}" argument must be of type string. Received ${typeof value}`) as TypeError & {
      code: string;
    };
    error.code = "ERR_INVALID_ARG_TYPE";
    throw error;
  }
}

/** The segments of `path` with `.` and `..` worked out (`..` kept where `absolute` is false and nothing is left to remove). */
function segments(path: string, absolute: boolean): string[] {
  const out: string[] = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (out.length > 0 && out.at(-1) !== "..") out.pop();
      else if (!absolute) out.push("..");
    } else {
      out.push(part);
    }
  }
  return out;
}

/** `path` with `.`, `..` and repeated `/` worked out; a trailing `/` kept. */
export function normalize(path: string): string {
  checkString(path, "path");
  if (path === "") return ".";
  const absolute = path.startsWith("/");
  const trailing = path.endsWith("/");
  let out = segments(path, absolute).join("/");
  if (out === "" && !absolute) out = ".";
  if (out !== "" && trailing) out += "/";
  return absolute ? `/${out}` : out;
}

/** The paths joined with `/`, normalized. */
export function join(...paths: string[]): string {
  paths.forEach((path) => checkString(path, "path"));
  const joined = paths.filter((path) => path !== "").join("/");
  return joined === "" ? "." : normalize(joined);
}

/** The absolute path of the paths taken right to left until one is absolute, from `/`. */
export function resolve(...paths: string[]): string {
  let resolved = "";
  for (let i = paths.length - 1; i >= 0 && !resolved.startsWith("/"); i -= 1) {
    const path = paths[i] as string;
    checkString(path, `paths[${i}]`);
    if (path !== "") resolved = resolved === "" ? path : `${path}/${resolved}`;
  }
  return `/${segments(resolved, true).join("/")}`;
}

/** Whether `path` starts at the root. */
export function isAbsolute(path: string): boolean {
  checkString(path, "path");
  return path.startsWith("/");
}

/**
 * `path` without its last segment: up to the slash before it, trailing
 * slashes of the path ignored (a leading `//` is kept, as Node does).
 */
export function dirname(path: string): string {
  checkString(path, "path");
  if (path === "") return ".";
  const root = path.startsWith("/");
  const trimmed = path.replace(/\/+$/, "");
  const end = trimmed.lastIndexOf("/");
  if (end < 0) return root ? "/" : ".";
  if (end === 0) return "/";
  return root && end === 1 ? "//" : trimmed.slice(0, end);
}

/** Where the last segment of `path` (trailing slashes ignored) starts, and the segment. */
function lastSegment(path: string): { start: number; base: string } {
  const trimmed = path.replace(/\/+$/, "");
  const start = trimmed.lastIndexOf("/") + 1;
  return { start, base: trimmed.slice(start) };
}

/**
 * The last segment of `path`, without `suffix` if it ends with it (the
 * whole segment only when the path has a slash, as Node answers).
 */
export function basename(path: string, suffix?: string): string {
  checkString(path, "path");
  if (suffix !== undefined) checkString(suffix, "suffix");
  const { base } = lastSegment(path);
  if (suffix === path && suffix.includes("/")) return "";
  if (suffix === undefined || !base.endsWith(suffix)) return base;
  if (base === suffix) return path.includes("/") ? base : "";
  return base.slice(0, base.length - suffix.length);
}

/** The extension of the last segment, from its last `.` (none for a leading dot only). */
export function extname(path: string): string {
  const base = basename(path);
  const at = base.lastIndexOf(".");
  return at <= 0 || base === ".." ? "" : base.slice(at);
}

/** The path from `from` to `to` (both resolved). */
export function relative(from: string, to: string): string {
  checkString(from, "from");
  checkString(to, "to");
  const a = segments(resolve(from), true);
  const b = segments(resolve(to), true);
  let common = 0;
  while (common < a.length && common < b.length && a[common] === b[common]) common += 1;
  return [...Array<string>(a.length - common).fill(".."), ...b.slice(common)].join("/");
}

/** `path`'s root, folder (up to the slash before the last segment), file name, extension and name. */
export function parse(path: string): ParsedPath {
  checkString(path, "path");
  const root = path.startsWith("/") ? "/" : "";
  const { start, base } = lastSegment(path);
  const ext = extname(path);
  const dir = start - 1 > 0 ? path.slice(0, start - 1) : root;
  return { root, dir, base, ext, name: ext === "" ? base : base.slice(0, base.length - ext.length) };
}

/** The path of `parts` (`dir` or `root`, then `base` or `name` + `ext`). */
export function format(parts: Partial<ParsedPath>): string {
  const dir = parts.dir || parts.root || "";
  const ext = parts.ext && !parts.ext.startsWith(".") ? `.${parts.ext}` : (parts.ext ?? "");
  const base = parts.base || `${parts.name ?? ""}${ext}`;
  if (dir === "") return base;
  return dir === parts.root ? `${dir}${base}` : `${dir}/${base}`;
}

/** `path` as it is (POSIX has no namespaced paths). */
export function toNamespacedPath(path: string): string {
  return path;
}

const path = { sep, delimiter, normalize, join, resolve, isAbsolute, dirname, basename, extname, relative, parse, format, toNamespacedPath };
/** `path.posix`, the same functions. */
export const posix = path;
export default Object.assign(path, { posix });

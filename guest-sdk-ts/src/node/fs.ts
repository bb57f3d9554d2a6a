/**
 * `node:fs` for a sandboxed engine: a small filesystem of its own, in the
 * instance's memory, never the host's disk. Two parts:
 * - the plugin's package files the build embeds (`package.json`, its
 *   manifest), mounted read-only under the package root by
 *   {@link mountPackage}: writing there is `EROFS`;
 * - everything else is an empty, writable tree (directories, files, renames,
 *   file descriptors), so a plugin that creates its data directory or a log
 *   file at startup works; what it writes lives as long as the instance and
 *   is never persisted or seen by the host. At most {@link WRITABLE_BYTES}
 *   are held at once (beyond: `ENOSPC`).
 * Errors are Node's (`code`, `errno`, `syscall`, `path`, the same message).
 * Streams (`createReadStream`, `createWriteStream`) and watching are refused
 * with `ERR_CTXBOX_REFUSED`; callback forms are not offered (use the sync or
 * `node:fs/promises` ones).
 */
import { Buffer } from "./buffer.js";
import * as path from "./path.js";

/** A Node `Buffer`. */
type Bytes = InstanceType<typeof Buffer>;

/** The most bytes the writable part holds at once. */
export const WRITABLE_BYTES = 16 << 20;

const ERRNO: Record<string, [number, string]> = {
  ENOENT: [-2, "no such file or directory"],
  EEXIST: [-17, "file already exists"],
  ENOTDIR: [-20, "not a directory"],
  EISDIR: [-21, "illegal operation on a directory"],
  ENOTEMPTY: [-39, "directory not empty"],
  EROFS: [-30, "read-only file system"],
  EBADF: [-9, "bad file descriptor"],
  ENOSPC: [-28, "no space left on device"],
  EINVAL: [-22, "invalid argument"],
};

/** A Node-shaped filesystem error: `CODE: description, syscall 'path'`. */
function fsError(code: keyof typeof ERRNO & string, syscall: string, where?: string, dest?: string): Error {
  const [errno, description] = ERRNO[code];
  const target = where === undefined ? "" : ` '${where}'${dest === undefined ? "" : ` -> '${dest}'`}`;
  const error = new Error(`${code}: ${description}, ${syscall}${target}`) as Error & Record<string, unknown>;
  Object.assign(error, { errno, code, syscall });
  if (where !== undefined) error.path = where;
  if (dest !== undefined) error.dest = dest;
  return error;
}

/** An error for what the sandbox does not offer. */
function refused(what: string): never {
  const error = new Error(`fs.${what} is not offered to a sandboxed engine (no streams or watching: use readFileSync / writeFileSync)`) as Error & { code: string };
  error.code = "ERR_CTXBOX_REFUSED";
  throw error;
}

type Node = FileNode | DirNode;
interface Meta { mode: number; mtimeMs: number; birthtimeMs: number; readOnly: boolean; ino: number }
interface FileNode extends Meta { kind: "file"; data: Uint8Array }
interface DirNode extends Meta { kind: "dir"; entries: Map<string, Node> }

let inodes = 1;
function meta(mode: number, readOnly: boolean): Meta {
  const now = Date.now();
  return { mode, mtimeMs: now, birthtimeMs: now, readOnly, ino: inodes++ };
}
function newDir(readOnly = false, mode = 0o755): DirNode {
  return { kind: "dir", entries: new Map(), ...meta(mode, readOnly) };
}
function newFile(data: Uint8Array, readOnly = false, mode = 0o644): FileNode {
  return { kind: "file", data, ...meta(mode, readOnly) };
}

const root = newDir();
let writableBytes = 0;

/** `p` as an absolute, normalized path (relative ones from `/`, the guest's working directory). */
function absolute(p: unknown, syscall: string): string {
  if (p instanceof URL) {
    const url = p as unknown as { protocol: string; pathname: string };
    if (url.protocol !== "file:") throw fsError("EINVAL", syscall, String(p));
    p = decodeURIComponent(url.pathname);
  } else if (p instanceof Uint8Array) {
    p = new TextDecoder().decode(p);
  }
  if (typeof p !== "string") {
    const error = new TypeError(`The "path" argument must be of type string or an instance of Buffer or URL. Received ${typeof p}`) as TypeError & { code: string };
    error.code = "ERR_INVALID_ARG_TYPE";
    throw error;
  }
  return path.resolve("/", p);
}

function parts(abs: string): string[] {
  return abs.split("/").filter((part) => part !== "");
}

/** The node at `abs`, or undefined; throws ENOTDIR when a file stands where a directory should. */
function lookup(abs: string, syscall: string): Node | undefined {
  let node: Node = root;
  for (const part of parts(abs)) {
    if (node.kind !== "dir") throw fsError("ENOTDIR", syscall, abs);
    const next = node.entries.get(part);
    if (next === undefined) return undefined;
    node = next;
  }
  return node;
}

function existing(abs: string, syscall: string): Node {
  const node = lookup(abs, syscall);
  if (node === undefined) throw fsError("ENOENT", syscall, abs);
  return node;
}

/** The directory that holds `abs` and the entry's name. */
function parentOf(abs: string, syscall: string): [DirNode, string] {
  const parent = lookup(path.dirname(abs), syscall);
  if (parent === undefined) throw fsError("ENOENT", syscall, abs);
  if (parent.kind !== "dir") throw fsError("ENOTDIR", syscall, abs);
  return [parent, path.basename(abs)];
}

function writable(node: Node | DirNode, syscall: string, abs: string): void {
  if (node.readOnly) throw fsError("EROFS", syscall, abs);
}

function charge(delta: number, syscall: string, abs: string): void {
  if (writableBytes + delta > WRITABLE_BYTES) throw fsError("ENOSPC", syscall, abs);
  writableBytes += delta;
}

/**
 * Mounts the plugin's package files (path relative to `dir` → text)
 * read-only at `dir`, creating the directories they need (read-only too).
 * The build calls it before the plugin's modules run.
 */
export function mountPackage(dir: string, files: Record<string, string>): void {
  const base = absolute(dir, "mount");
  for (const [relative, text] of Object.entries(files)) {
    const abs = path.resolve(base, relative);
    let node: DirNode = root;
    for (const part of parts(path.dirname(abs))) {
      let next = node.entries.get(part);
      if (next === undefined) {
        next = newDir(abs.startsWith(base) && base !== "/");
        node.entries.set(part, next);
      }
      if (next.kind !== "dir") throw fsError("ENOTDIR", "mount", abs);
      node = next;
    }
    node.entries.set(path.basename(abs), newFile(new TextEncoder().encode(text), true, 0o444));
  }
}

/** The type questions `Stats` and `Dirent` answer: a file or a directory, nothing else exists. */
class TypedEntry {
  readonly #kind: Node["kind"];
  constructor(kind: Node["kind"]) {
    this.#kind = kind;
  }
  isFile(): boolean { return this.#kind === "file"; }
  isDirectory(): boolean { return this.#kind === "dir"; }
  isSymbolicLink(): boolean { return false; }
  isFIFO(): boolean { return false; }
  isSocket(): boolean { return false; }
  isBlockDevice(): boolean { return false; }
  isCharacterDevice(): boolean { return false; }
}

/** A file's or directory's `stat`. */
export class Stats extends TypedEntry {
  dev = 1; nlink = 1; uid = 0; gid = 0; rdev = 0; blksize = 4096;
  ino: number; mode: number; size: number; blocks: number;
  atimeMs: number; mtimeMs: number; ctimeMs: number; birthtimeMs: number;
  atime: Date; mtime: Date; ctime: Date; birthtime: Date;
  constructor(node: Node) {
    super(node.kind);
    this.ino = node.ino;
    this.mode = (node.kind === "dir" ? 0o040000 : 0o100000) | node.mode;
    this.size = node.kind === "file" ? node.data.length : 4096;
    this.blocks = Math.ceil(this.size / 512);
    this.atimeMs = this.mtimeMs = this.ctimeMs = node.mtimeMs;
    this.birthtimeMs = node.birthtimeMs;
    this.atime = new Date(this.atimeMs);
    this.mtime = new Date(this.mtimeMs);
    this.ctime = new Date(this.ctimeMs);
    this.birthtime = new Date(this.birthtimeMs);
  }
}

/** A directory entry of `readdirSync(…, { withFileTypes: true })`. */
export class Dirent extends TypedEntry {
  readonly name: string;
  readonly parentPath: string;
  constructor(name: string, parentPath: string, kind: Node["kind"]) {
    super(kind);
    this.name = name;
    this.parentPath = parentPath;
  }
  get path(): string { return this.parentPath; }
}

/** Node's `fs.constants` (Linux values). */
export const constants = {
  F_OK: 0, R_OK: 4, W_OK: 2, X_OK: 1,
  O_RDONLY: 0, O_WRONLY: 1, O_RDWR: 2, O_CREAT: 0o100, O_EXCL: 0o200, O_NOCTTY: 0o400, O_TRUNC: 0o1000,
  O_APPEND: 0o2000, O_DIRECTORY: 0o200000, O_NOFOLLOW: 0o400000, O_SYNC: 0o4010000,
  S_IFMT: 0o170000, S_IFREG: 0o100000, S_IFDIR: 0o040000, S_IFLNK: 0o120000,
  COPYFILE_EXCL: 1,
};
export const F_OK = constants.F_OK, R_OK = constants.R_OK, W_OK = constants.W_OK, X_OK = constants.X_OK;

type Encoding = string | null | undefined;
type Options = Encoding | { encoding?: Encoding; flag?: string; mode?: number };

function encodingOf(options: Options): Encoding {
  return typeof options === "string" || options == null ? options : options.encoding;
}

function decode(data: Uint8Array, encoding: Encoding): string | Bytes {
  const buffer = Buffer.from(data);
  return encoding ? buffer.toString(encoding) : buffer;
}

function bytes(data: unknown, encoding: Encoding): Uint8Array {
  if (typeof data === "string") return Buffer.from(data, encoding ?? "utf8");
  if (data instanceof Uint8Array) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
  const error = new TypeError(`The "data" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received ${typeof data}`) as TypeError & { code: string };
  error.code = "ERR_INVALID_ARG_TYPE";
  throw error;
}

/** Replaces (or creates) the file at `abs` with `data`, or appends to it. */
function store(abs: string, data: Uint8Array, syscall: string, append: boolean, exclusive = false): FileNode {
  const [parent, name] = parentOf(abs, syscall);
  const found = parent.entries.get(name);
  if (found?.kind === "dir") throw fsError("EISDIR", syscall, abs);
  if (found !== undefined && exclusive) throw fsError("EEXIST", syscall, abs);
  if (found !== undefined) {
    writable(found, syscall, abs);
    const next = append ? concat(found.data, data) : data;
    charge(next.length - found.data.length, syscall, abs);
    found.data = next;
    found.mtimeMs = Date.now();
    return found;
  }
  writable(parent, syscall, abs);
  charge(data.length, syscall, abs);
  const file = newFile(data);
  parent.entries.set(name, file);
  return file;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const joined = new Uint8Array(a.length + b.length);
  joined.set(a);
  joined.set(b, a.length);
  return joined;
}

function release(node: Node): void {
  if (node.readOnly) return;
  if (node.kind === "file") writableBytes -= node.data.length;
  else for (const child of node.entries.values()) release(child);
}

// --- file descriptors ---

interface Open { node: FileNode; path: string; position: number; append: boolean; readable: boolean; writable: boolean }
const descriptors = new Map<number, Open>();
let nextFd = 3;

function flagsOf(flags: string | number | undefined): { create: boolean; exclusive: boolean; truncate: boolean; append: boolean; read: boolean; write: boolean } {
  if (typeof flags === "number") {
    const access = flags & 3;
    return {
      create: (flags & constants.O_CREAT) !== 0, exclusive: (flags & constants.O_EXCL) !== 0,
      truncate: (flags & constants.O_TRUNC) !== 0, append: (flags & constants.O_APPEND) !== 0,
      read: access !== constants.O_WRONLY, write: access !== constants.O_RDONLY,
    };
  }
  const f = flags ?? "r";
  const plus = f.includes("+");
  switch (f.replace(/[s+]/g, "")) {
    case "r": return { create: false, exclusive: false, truncate: false, append: false, read: true, write: plus };
    case "w": return { create: true, exclusive: false, truncate: true, append: false, read: plus, write: true };
    case "wx": case "xw": return { create: true, exclusive: true, truncate: true, append: false, read: plus, write: true };
    case "a": return { create: true, exclusive: false, truncate: false, append: true, read: plus, write: true };
    case "ax": case "xa": return { create: true, exclusive: true, truncate: false, append: true, read: plus, write: true };
    default: {
      const error = new TypeError(`The value "${f}" is invalid for option "flags"`) as TypeError & { code: string };
      error.code = "ERR_INVALID_ARG_VALUE";
      throw error;
    }
  }
}

function descriptor(fd: number, syscall: string): Open {
  const open = descriptors.get(fd);
  if (open === undefined) throw fsError("EBADF", syscall);
  return open;
}

/** Opens `p` and gives its file descriptor (`r`, `w`, `a`, `x` and `+` flags, or `O_*` numbers). */
export function openSync(p: unknown, flags?: string | number, mode?: number): number {
  const abs = absolute(p, "open");
  const f = flagsOf(flags);
  let node = lookup(abs, "open");
  if (node?.kind === "dir") {
    if (f.write) throw fsError("EISDIR", "open", abs);
    refused("openSync of a directory");
  }
  if (node === undefined) {
    if (!f.create) throw fsError("ENOENT", "open", abs);
    node = store(abs, new Uint8Array(0), "open", false);
    if (mode !== undefined) node.mode = mode & 0o777;
  } else {
    if (f.exclusive) throw fsError("EEXIST", "open", abs);
    if (f.write) writable(node, "open", abs);
    if (f.truncate) store(abs, new Uint8Array(0), "open", false);
  }
  const fd = nextFd++;
  descriptors.set(fd, { node, path: abs, position: 0, append: f.append, readable: f.read, writable: f.write });
  return fd;
}

/** Closes a descriptor. */
export function closeSync(fd: number): void {
  descriptor(fd, "close");
  descriptors.delete(fd);
}

/** Writes a string or bytes at the descriptor's position (or `position`), giving the bytes written. */
export function writeSync(fd: number, data: unknown, offsetOrPosition?: number | null, lengthOrEncoding?: number | string, position?: number | null): number {
  const open = descriptor(fd, "write");
  if (!open.writable) throw fsError("EBADF", "write");
  let chunk: Uint8Array;
  let at: number | null | undefined;
  if (typeof data === "string") {
    chunk = bytes(data, typeof lengthOrEncoding === "string" ? lengthOrEncoding : "utf8");
    at = offsetOrPosition;
  } else {
    const all = bytes(data, undefined);
    const offset = offsetOrPosition ?? 0;
    const length = typeof lengthOrEncoding === "number" ? lengthOrEncoding : all.length - offset;
    chunk = all.subarray(offset, offset + length);
    at = position;
  }
  const start = open.append ? open.node.data.length : (at ?? open.position);
  const end = start + chunk.length;
  const grown = Math.max(end, open.node.data.length);
  charge(grown - open.node.data.length, "write", open.path);
  const next = new Uint8Array(grown);
  next.set(open.node.data);
  next.set(chunk, start);
  open.node.data = next;
  open.node.mtimeMs = Date.now();
  if (at == null || open.append) open.position = end;
  return chunk.length;
}

/** Reads into `buffer` from the descriptor, giving the bytes read. */
export function readSync(fd: number, buffer: Uint8Array, offset = 0, length = buffer.length - offset, position: number | null = null): number {
  const open = descriptor(fd, "read");
  if (!open.readable) throw fsError("EBADF", "read");
  const start = position ?? open.position;
  const chunk = open.node.data.subarray(start, start + length);
  buffer.set(chunk, offset);
  if (position === null) open.position = start + chunk.length;
  return chunk.length;
}

/** The stats of an open descriptor. */
export function fstatSync(fd: number): Stats {
  return new Stats(descriptor(fd, "fstat").node);
}

/** Changes an open file's permission bits. */
export function fchmodSync(fd: number, mode: number): void {
  const open = descriptor(fd, "fchmod");
  writable(open.node, "fchmod", open.path);
  open.node.mode = mode & 0o777;
}

// --- whole files ---

/** The file's contents: bytes, or text with an encoding. Takes a path or a descriptor. */
export function readFileSync(p: unknown, options?: Options): string | Bytes {
  if (typeof p === "number") {
    const open = descriptor(p, "read");
    const rest = open.node.data.subarray(open.position);
    open.position = open.node.data.length;
    return decode(rest, encodingOf(options));
  }
  const abs = absolute(p, "open");
  const node = existing(abs, "open");
  if (node.kind === "dir") throw fsError("EISDIR", "read");
  return decode(node.data, encodingOf(options));
}

/** Replaces (or creates) a file. */
export function writeFileSync(p: unknown, data: unknown, options?: Options): void {
  if (typeof p === "number") {
    writeSync(p, typeof data === "string" ? data : bytes(data, undefined));
    return;
  }
  const flag = typeof options === "object" && options !== null ? options.flag : undefined;
  const f = flagsOf(flag ?? "w");
  store(absolute(p, "open"), bytes(data, encodingOf(options)), "open", f.append, f.exclusive);
}

/** Appends to (or creates) a file. */
export function appendFileSync(p: unknown, data: unknown, options?: Options): void {
  if (typeof p === "number") {
    writeSync(p, typeof data === "string" ? data : bytes(data, undefined));
    return;
  }
  store(absolute(p, "open"), bytes(data, encodingOf(options)), "open", true);
}

/** Copies a file (`COPYFILE_EXCL` refuses to replace one). */
export function copyFileSync(from: unknown, to: unknown, mode = 0): void {
  const source = existing(absolute(from, "copyfile"), "copyfile");
  if (source.kind === "dir") throw fsError("EISDIR", "copyfile", absolute(from, "copyfile"));
  store(absolute(to, "copyfile"), new Uint8Array(source.data), "copyfile", false, (mode & constants.COPYFILE_EXCL) !== 0);
}

// --- the tree ---

/** Whether anything is at `p` (never throws). */
export function existsSync(p: unknown): boolean {
  try {
    return lookup(absolute(p, "access"), "access") !== undefined;
  } catch {
    return false;
  }
}

/** Throws `ENOENT` unless `p` exists (`W_OK` on the package's files: `EROFS`). */
export function accessSync(p: unknown, mode = constants.F_OK): void {
  const abs = absolute(p, "access");
  const node = existing(abs, "access");
  if ((mode & constants.W_OK) !== 0) writable(node, "access", abs);
}

/** The stats of `p`; `throwIfNoEntry: false` gives undefined for a missing one. */
export function statSync(p: unknown, options?: { throwIfNoEntry?: boolean }): Stats | undefined {
  const abs = absolute(p, "stat");
  const node = lookup(abs, "stat");
  if (node === undefined) {
    if (options?.throwIfNoEntry === false) return undefined;
    throw fsError("ENOENT", "stat", abs);
  }
  return new Stats(node);
}

/** As {@link statSync}: there are no links. */
export function lstatSync(p: unknown, options?: { throwIfNoEntry?: boolean }): Stats | undefined {
  return statSync(p, options);
}

/** The absolute, normalized path of an existing `p` (there are no links to follow). */
export function realpathSync(p: unknown): string {
  const abs = absolute(p, "realpath");
  existing(abs, "realpath");
  return abs;
}
realpathSync.native = realpathSync;

/** Makes a directory; `recursive` makes its parents and gives the first one made. */
export function mkdirSync(p: unknown, options?: number | { recursive?: boolean; mode?: number }): string | undefined {
  const abs = absolute(p, "mkdir");
  const recursive = typeof options === "object" && options?.recursive === true;
  const mode = (typeof options === "number" ? options : options?.mode ?? 0o777) & 0o777;
  if (!recursive) {
    const [parent, name] = parentOf(abs, "mkdir");
    if (parent.entries.has(name)) throw fsError("EEXIST", "mkdir", abs);
    writable(parent, "mkdir", abs);
    parent.entries.set(name, newDir(false, mode));
    return undefined;
  }
  let node: DirNode = root;
  let first: string | undefined;
  let at = "";
  for (const part of parts(abs)) {
    at += `/${part}`;
    const next = node.entries.get(part);
    if (next === undefined) {
      writable(node, "mkdir", abs);
      const made = newDir(false, mode);
      node.entries.set(part, made);
      first ??= at;
      node = made;
    } else if (next.kind === "dir") {
      node = next;
    } else {
      throw fsError(at === abs ? "EEXIST" : "ENOTDIR", "mkdir", abs);
    }
  }
  return first;
}

/** The names in a directory (sorted), or {@link Dirent}s with `withFileTypes`. */
export function readdirSync(p: unknown, options?: Options & { withFileTypes?: boolean }): (string | Dirent)[] {
  const abs = absolute(p, "scandir");
  const node = existing(abs, "scandir");
  if (node.kind !== "dir") throw fsError("ENOTDIR", "scandir", abs);
  const names = [...node.entries.keys()].sort();
  if (typeof options === "object" && options?.withFileTypes) {
    return names.map((name) => new Dirent(name, abs, node.entries.get(name)!.kind));
  }
  return names;
}

/** Removes a file (or, with `recursive`, a directory); `force` ignores a missing one. */
export function rmSync(p: unknown, options?: { force?: boolean; recursive?: boolean }): void {
  const abs = absolute(p, "rm");
  const node = lookup(abs, "rm");
  if (node === undefined) {
    if (options?.force) return;
    throw fsError("ENOENT", "lstat", abs); // Node looks before it removes
  }
  if (node.kind === "dir" && !options?.recursive) {
    const error = new Error(`Path is a directory: rm returned EISDIR (is a directory) ${abs}`) as Error & Record<string, unknown>;
    Object.assign(error, { code: "ERR_FS_EISDIR", errno: 21, syscall: "rm", path: abs });
    throw error;
  }
  remove(abs, node, "rm");
}

function remove(abs: string, node: Node, syscall: string): void {
  if (abs === "/") throw fsError("EINVAL", syscall, abs);
  const [parent, name] = parentOf(abs, syscall);
  writable(parent, syscall, abs);
  writable(node, syscall, abs);
  parent.entries.delete(name);
  release(node);
}

/** Removes a file. */
export function unlinkSync(p: unknown): void {
  const abs = absolute(p, "unlink");
  const node = existing(abs, "unlink");
  if (node.kind === "dir") throw fsError("EISDIR", "unlink", abs);
  remove(abs, node, "unlink");
}

/** Removes an empty directory (`recursive`: any). */
export function rmdirSync(p: unknown, options?: { recursive?: boolean }): void {
  const abs = absolute(p, "rmdir");
  const node = existing(abs, "rmdir");
  if (node.kind !== "dir") throw fsError("ENOTDIR", "rmdir", abs);
  if (node.entries.size > 0 && !options?.recursive) throw fsError("ENOTEMPTY", "rmdir", abs);
  remove(abs, node, "rmdir");
}

/** Moves a file or directory, replacing a file at `to`. */
export function renameSync(from: unknown, to: unknown): void {
  const source = absolute(from, "rename");
  const dest = absolute(to, "rename");
  const node = lookup(source, "rename");
  if (node === undefined) throw fsError("ENOENT", "rename", source, dest);
  if (source === dest) return;
  if (node.kind === "dir" && (dest + "/").startsWith(source + "/")) throw fsError("EINVAL", "rename", source, dest);
  const [fromParent, fromName] = parentOf(source, "rename");
  const [toParent, toName] = parentOf(dest, "rename");
  writable(fromParent, "rename", source);
  writable(node, "rename", source);
  writable(toParent, "rename", dest);
  const replaced = toParent.entries.get(toName);
  if (replaced !== undefined) {
    writable(replaced, "rename", dest);
    if (replaced.kind === "dir" && (node.kind !== "dir" || replaced.entries.size > 0)) {
      throw fsError(node.kind === "dir" ? "ENOTEMPTY" : "EISDIR", "rename", source, dest);
    }
    if (node.kind === "dir" && replaced.kind === "file") throw fsError("ENOTDIR", "rename", source, dest);
    release(replaced);
  }
  fromParent.entries.delete(fromName);
  toParent.entries.set(toName, node);
}

/** Changes permission bits (kept for `stat`; nothing is enforced by them). */
export function chmodSync(p: unknown, mode: number): void {
  const abs = absolute(p, "chmod");
  const node = existing(abs, "chmod");
  writable(node, "chmod", abs);
  node.mode = mode & 0o777;
}

/** Sets a file's times. */
export function utimesSync(p: unknown, _atime: unknown, mtime: number | Date): void {
  const abs = absolute(p, "utime");
  const node = existing(abs, "utime");
  writable(node, "utime", abs);
  node.mtimeMs = typeof mtime === "number" ? mtime * 1000 : mtime.getTime();
}

/** Refused: no streams (see the module's comment). */
export function createReadStream(): never { return refused("createReadStream"); }
/** Refused: no streams. */
export function createWriteStream(): never { return refused("createWriteStream"); }
/** Refused: nothing changes under an engine but what it writes. */
export function watch(): never { return refused("watch"); }
/** Refused: nothing changes under an engine but what it writes. */
export function watchFile(): never { return refused("watchFile"); }

export default {
  constants, F_OK, R_OK, W_OK, X_OK, Stats, Dirent, mountPackage,
  openSync, closeSync, writeSync, readSync, fstatSync, fchmodSync,
  readFileSync, writeFileSync, appendFileSync, copyFileSync,
  existsSync, accessSync, statSync, lstatSync, realpathSync, mkdirSync, readdirSync, rmSync, unlinkSync, rmdirSync,
  renameSync, chmodSync, utimesSync, createReadStream, createWriteStream, watch, watchFile,
};

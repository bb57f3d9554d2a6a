/**
 * `node:fs/promises` over the engine's own filesystem (`node:fs`, see
 * there): each function answers as its sync twin, as a Promise (a throw
 * becomes a rejection). `open` gives a `FileHandle` with `read`, `write`,
 * `readFile`, `writeFile`, `appendFile`, `stat`, `chmod` and `close`.
 */
import * as fs from "./fs.js";

/** Runs `body` now; its result or throw as a Promise. */
function settle<T>(body: () => T): Promise<T> {
  try {
    return Promise.resolve(body());
  } catch (error) {
    return Promise.reject(error);
  }
}

type Args<F> = F extends (...args: infer A) => unknown ? A : never;

export const access = (...args: Args<typeof fs.accessSync>) => settle(() => fs.accessSync(...args));
export const readFile = (...args: Args<typeof fs.readFileSync>) => settle(() => fs.readFileSync(...args));
export const writeFile = (...args: Args<typeof fs.writeFileSync>) => settle(() => fs.writeFileSync(...args));
export const appendFile = (...args: Args<typeof fs.appendFileSync>) => settle(() => fs.appendFileSync(...args));
export const copyFile = (...args: Args<typeof fs.copyFileSync>) => settle(() => fs.copyFileSync(...args));
export const stat = (...args: Args<typeof fs.statSync>) => settle(() => fs.statSync(...args));
export const lstat = (...args: Args<typeof fs.lstatSync>) => settle(() => fs.lstatSync(...args));
export const realpath = (...args: Args<typeof fs.realpathSync>) => settle(() => fs.realpathSync(...args));
export const mkdir = (...args: Args<typeof fs.mkdirSync>) => settle(() => fs.mkdirSync(...args));
export const readdir = (...args: Args<typeof fs.readdirSync>) => settle(() => fs.readdirSync(...args));
export const rm = (...args: Args<typeof fs.rmSync>) => settle(() => fs.rmSync(...args));
export const rmdir = (...args: Args<typeof fs.rmdirSync>) => settle(() => fs.rmdirSync(...args));
export const unlink = (...args: Args<typeof fs.unlinkSync>) => settle(() => fs.unlinkSync(...args));
export const rename = (...args: Args<typeof fs.renameSync>) => settle(() => fs.renameSync(...args));
export const chmod = (...args: Args<typeof fs.chmodSync>) => settle(() => fs.chmodSync(...args));
export const utimes = (...args: Args<typeof fs.utimesSync>) => settle(() => fs.utimesSync(...args));
export const constants = fs.constants;

/** An open file of `open`. */
export class FileHandle {
  readonly fd: number;
  constructor(fd: number) {
    this.fd = fd;
  }
  read(buffer: Uint8Array, offset?: number, length?: number, position?: number | null): Promise<{ bytesRead: number; buffer: Uint8Array }> {
    return settle(() => ({ bytesRead: fs.readSync(this.fd, buffer, offset, length, position), buffer }));
  }
  write(data: unknown, ...rest: [number?, (number | string)?, (number | null)?]): Promise<{ bytesWritten: number; buffer: unknown }> {
    return settle(() => ({ bytesWritten: fs.writeSync(this.fd, data, ...rest), buffer: data }));
  }
  readFile(options?: Args<typeof fs.readFileSync>[1]) { return settle(() => fs.readFileSync(this.fd, options)); }
  writeFile(data: unknown) { return settle(() => fs.writeFileSync(this.fd, data)); }
  appendFile(data: unknown) { return settle(() => fs.appendFileSync(this.fd, data)); }
  stat() { return settle(() => fs.fstatSync(this.fd)); }
  chmod(mode: number) { return settle(() => fs.fchmodSync(this.fd, mode)); }
  close() { return settle(() => fs.closeSync(this.fd)); }
}

/** Opens a file (flags as `fs.openSync`). */
export const open = (...args: Args<typeof fs.openSync>) => settle(() => new FileHandle(fs.openSync(...args)));

export default {
  access, readFile, writeFile, appendFile, copyFile, stat, lstat, realpath, mkdir, readdir, rm, rmdir, unlink,
  rename, chmod, utimes, constants, open, FileHandle,
};

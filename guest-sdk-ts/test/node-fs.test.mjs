// The guest's node:fs against Node's own: the same operations on a real
// temporary directory and on the guest's in-memory tree give the same
// answers and the same error codes; the mounted package is read-only; the
// writable part is capped; streams are refused.
import assert from "node:assert/strict";
import * as real from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { sdkModule } from "./sdk-source.mjs";

const fs = await sdkModule("node/fs");
const fsp = await sdkModule("node/fs_promises");

/** Runs `step(fs, dir)`, giving its answer or the error's code. */
function outcome(step, impl, dir) {
  try {
    const value = step(impl, dir);
    if (value && typeof value.isFile === "function") {
      return { file: value.isFile(), dir: value.isDirectory(), size: value.isFile() ? value.size : undefined };
    }
    if (Array.isArray(value)) return value.map((v) => (typeof v === "string" ? v : [v.name, v.isFile(), v.isDirectory()]));
    if (value instanceof Uint8Array) return [...value];
    return { value: value === undefined ? "undefined" : value };
  } catch (error) {
    return { code: error.code, syscall: error.syscall };
  }
}

const STEPS = [
  ["mkdir a/b without recursive", (f, d) => f.mkdirSync(`${d}/a/b`)],
  ["mkdir -p a/b", (f, d) => f.mkdirSync(`${d}/a/b`, { recursive: true }) === `${d}/a`],
  ["mkdir -p a/b again", (f, d) => f.mkdirSync(`${d}/a/b`, { recursive: true })],
  ["mkdir a/b again", (f, d) => f.mkdirSync(`${d}/a/b`)],
  ["exists a/b", (f, d) => f.existsSync(`${d}/a/b`)],
  ["exists a/x", (f, d) => f.existsSync(`${d}/a/x`)],
  ["write a/f.txt", (f, d) => f.writeFileSync(`${d}/a/f.txt`, "héllo\n")],
  ["append a/f.txt", (f, d) => f.appendFileSync(`${d}/a/f.txt`, "world")],
  ["read a/f.txt utf8", (f, d) => f.readFileSync(`${d}/a/f.txt`, "utf8")],
  ["read a/f.txt bytes", (f, d) => f.readFileSync(`${d}/a/f.txt`)],
  ["read a/f.txt {encoding}", (f, d) => f.readFileSync(`${d}/a/f.txt`, { encoding: "base64" })],
  ["stat a/f.txt", (f, d) => f.statSync(`${d}/a/f.txt`)],
  ["stat a", (f, d) => f.statSync(`${d}/a`)],
  ["stat missing", (f, d) => f.statSync(`${d}/missing`)],
  ["stat missing no throw", (f, d) => f.statSync(`${d}/missing`, { throwIfNoEntry: false })],
  ["stat under a file", (f, d) => f.statSync(`${d}/a/f.txt/x`)],
  ["read missing", (f, d) => f.readFileSync(`${d}/missing`, "utf8")],
  ["read a directory", (f, d) => f.readFileSync(`${d}/a`, "utf8")],
  ["write into a missing dir", (f, d) => f.writeFileSync(`${d}/nope/x`, "x")],
  ["readdir a", (f, d) => f.readdirSync(`${d}/a`)],
  ["readdir a typed", (f, d) => f.readdirSync(`${d}/a`, { withFileTypes: true })],
  ["readdir a file", (f, d) => f.readdirSync(`${d}/a/f.txt`)],
  ["rename f -> g", (f, d) => f.renameSync(`${d}/a/f.txt`, `${d}/a/g.txt`)],
  ["rename missing", (f, d) => f.renameSync(`${d}/a/f.txt`, `${d}/a/h.txt`)],
  ["read g", (f, d) => f.readFileSync(`${d}/a/g.txt`, "utf8")],
  ["copy g -> c", (f, d) => f.copyFileSync(`${d}/a/g.txt`, `${d}/a/c.txt`)],
  ["copy g -> c excl", (f, d) => f.copyFileSync(`${d}/a/g.txt`, `${d}/a/c.txt`, f.constants.COPYFILE_EXCL)],
  ["open wx existing", (f, d) => f.openSync(`${d}/a/c.txt`, "wx")],
  ["fd write/read", (f, d) => {
    const fd = f.openSync(`${d}/a/log`, f.constants.O_WRONLY | f.constants.O_CREAT | f.constants.O_APPEND, 0o600);
    f.writeSync(fd, "one\n", undefined, "utf8");
    f.writeSync(fd, new TextEncoder().encode("two\n"));
    const size = f.fstatSync(fd).size;
    f.closeSync(fd);
    return [size, f.readFileSync(`${d}/a/log`, "utf8")];
  }],
  ["fd read", (f, d) => {
    const fd = f.openSync(`${d}/a/log`, "r");
    const buffer = new Uint8Array(3);
    const n = f.readSync(fd, buffer, 0, 3, null);
    const rest = f.readFileSync(fd, "utf8");
    f.closeSync(fd);
    return [n, [...buffer], rest];
  }],
  ["close twice", (f, d) => { const fd = f.openSync(`${d}/a/log`, "r"); f.closeSync(fd); f.closeSync(fd); }],
  ["open missing r", (f, d) => f.openSync(`${d}/a/none`, "r")],
  ["unlink a dir", (f, d) => f.unlinkSync(`${d}/a`)],
  ["rm a without recursive", (f, d) => f.rmSync(`${d}/a`)],
  ["rmdir a non-empty", (f, d) => f.rmdirSync(`${d}/a`)],
  ["rm missing force", (f, d) => f.rmSync(`${d}/zz`, { force: true })],
  ["rm missing", (f, d) => f.rmSync(`${d}/zz`)],
  ["unlink c", (f, d) => f.unlinkSync(`${d}/a/c.txt`)],
  ["readdir a after", (f, d) => f.readdirSync(`${d}/a`)],
  ["realpath a/./b/..", (f, d) => f.realpathSync(`${d}/a/./b/..`) === `${d}/a`],
  ["access missing", (f, d) => f.accessSync(`${d}/missing`)],
  ["rm -rf a", (f, d) => f.rmSync(`${d}/a`, { recursive: true, force: true })],
  ["exists a after", (f, d) => f.existsSync(`${d}/a`)],
];

test("each operation answers as Node's on a real directory, errors by the same code and syscall", () => {
  const dir = real.mkdtempSync(path.join(tmpdir(), "ctxbox-fs-"));
  try {
    fs.mkdirSync("/work");
    for (const [name, step] of STEPS) {
      assert.deepEqual(outcome(step, fs, "/work"), outcome(step, real, dir), name);
    }
  } finally {
    real.rmSync(dir, { recursive: true, force: true });
  }
});

test("error messages read as Node's", () => {
  assert.throws(() => fs.readFileSync("/nowhere/x.json", "utf8"), {
    code: "ENOENT", errno: -2, syscall: "open", path: "/nowhere/x.json",
    message: "ENOENT: no such file or directory, open '/nowhere/x.json'",
  });
});

test("the mounted package reads, its files and folders refuse writes with EROFS", () => {
  fs.mountPackage("/plugin", { "package.json": '{"name":"p","version":"1.0.0"}', "dist/x.txt": "x" });
  assert.deepEqual(JSON.parse(fs.readFileSync("/plugin/package.json", "utf8")), { name: "p", version: "1.0.0" });
  assert.equal(fs.statSync("/plugin/dist").isDirectory(), true);
  assert.deepEqual(fs.readdirSync("/plugin"), ["dist", "package.json"]);
  assert.throws(() => fs.writeFileSync("/plugin/package.json", "{}"), { code: "EROFS" });
  assert.throws(() => fs.writeFileSync("/plugin/new.txt", "x"), { code: "EROFS" });
  assert.throws(() => fs.rmSync("/plugin/dist", { recursive: true }), { code: "EROFS" });
  assert.throws(() => fs.renameSync("/plugin/package.json", "/tmp-p.json"), { code: "EROFS" });
  assert.throws(() => fs.openSync("/plugin/package.json", "a"), { code: "EROFS" });
  assert.throws(() => fs.accessSync("/plugin/package.json", fs.constants.W_OK), { code: "EROFS" });
  fs.accessSync("/plugin/package.json", fs.constants.R_OK);
  // Outside the package the tree is writable, relative paths from /.
  assert.equal(fs.mkdirSync("home/engine/.openclaw", { recursive: true }), "/home");
  fs.writeFileSync("/home/engine/.openclaw/x", "1");
  assert.equal(fs.readFileSync("home/engine/.openclaw/x", "utf8"), "1");
  fs.rmSync("/home", { recursive: true });
});

test("the writable part holds at most WRITABLE_BYTES; freed bytes count again", () => {
  const big = new Uint8Array(fs.WRITABLE_BYTES / 2);
  fs.writeFileSync("/big1", big);
  fs.writeFileSync("/big1", big); // replacing does not double count
  assert.throws(() => fs.writeFileSync("/big2", new Uint8Array(fs.WRITABLE_BYTES / 2 + 1)), { code: "ENOSPC" });
  fs.unlinkSync("/big1");
  fs.writeFileSync("/big2", new Uint8Array(fs.WRITABLE_BYTES / 2 + 1));
  fs.rmSync("/big2");
});

test("streams and watching are refused by name", () => {
  assert.throws(() => fs.createReadStream("/plugin/package.json"), { code: "ERR_CTXBOX_REFUSED", message: /createReadStream/ });
  assert.throws(() => fs.watch("/"), { code: "ERR_CTXBOX_REFUSED", message: /watch/ });
});

test("fs/promises answers as the sync functions, throws become rejections, FileHandle reads and writes", async () => {
  await fsp.mkdir("/p/q", { recursive: true });
  await fsp.writeFile("/p/q/a.txt", "abc");
  assert.equal(await fsp.readFile("/p/q/a.txt", "utf8"), "abc");
  assert.equal((await fsp.stat("/p/q/a.txt")).size, 3);
  await assert.rejects(fsp.readFile("/p/none"), { code: "ENOENT" });
  const handle = await fsp.open("/p/q/a.txt", "r+");
  assert.equal((await handle.stat()).size, 3);
  assert.equal(await handle.readFile({ encoding: "utf8" }), "abc");
  await handle.write("Z", 0);
  await handle.close();
  assert.equal(await fsp.readFile("/p/q/a.txt", "utf8"), "Zbc");
  await assert.rejects(handle.close(), { code: "EBADF" });
  assert.equal(await fsp.realpath("/p/q/../q/a.txt"), "/p/q/a.txt");
  await fsp.rm("/p", { recursive: true });
  assert.equal(fs.existsSync("/p"), false);
});

// The guest's node:path against Node's own node:path/posix, over paths that
// cover the edge cases (empty, dots, repeated and trailing slashes, roots).
import assert from "node:assert/strict";
import nodePath from "node:path/posix";
import { test } from "node:test";
import { sdkModule } from "./sdk-source.mjs";

const path = (await sdkModule("node/path")).default;

const PATHS = [
  "", ".", "..", "/", "//", "///a", "a", "a/", "a//b", "/a/b/c", "/a/b/c/", "a/./b/../c", "../../a", "/../a",
  "a/..", "a/../..", "./a", ".a", "a.", "a.b.c", "/a/.b", "/a/b.txt/", "..a", "a/b/..c", "/a/b/c.tar.gz", "lcm.db",
  "~/.openclaw/lcm.db", "a/b/.", "/.", "/..", "...", "a/...",
];

test("normalize, dirname, basename, extname, isAbsolute and parse answer as Node's", () => {
  for (const p of PATHS) {
    for (const name of ["normalize", "dirname", "basename", "extname", "isAbsolute", "parse"]) {
      // Node's parse("/..") gives ext "." where its extname("/..") gives "":
      // the guest answers "" in both.
      if (name === "parse" && p === "/..") continue;
      assert.deepEqual(path[name](p), nodePath[name](p), `${name}(${JSON.stringify(p)})`);
    }
    // Node's answer for a path of only slashes with a suffix depends on the
    // suffix's length (its scan's quirk); the guest answers "" as without one.
    for (const suffix of /^\/+$/.test(p) ? [] : [".db", "db", "c", p]) {
      assert.equal(path.basename(p, suffix), nodePath.basename(p, suffix), `basename(${JSON.stringify(p)}, ${JSON.stringify(suffix)})`);
    }
  }
});

test("join, resolve and relative answer as Node's, resolve from / (the guest's working directory)", () => {
  for (const a of PATHS) {
    for (const b of ["", "x", "/y", "../z", "a/b/"]) {
      assert.equal(path.join(a, b), nodePath.join(a, b), `join(${JSON.stringify(a)}, ${JSON.stringify(b)})`);
      assert.equal(path.resolve("/", a, b), nodePath.resolve("/", a, b), `resolve(/, ${JSON.stringify(a)}, ${JSON.stringify(b)})`);
      assert.equal(path.relative(`/${a}`, `/${b}`), nodePath.relative(`/${a}`, `/${b}`), `relative(/${a}, /${b})`);
    }
  }
  assert.equal(path.resolve("a", "b"), "/a/b");
  assert.equal(path.resolve(), "/");
});

test("format answers as Node's, and the module's constants and errors are Node's", () => {
  for (const p of PATHS) assert.equal(path.format(path.parse(p)), nodePath.format(nodePath.parse(p)), `format(parse(${JSON.stringify(p)}))`);
  for (const parts of [{ name: "a", ext: "txt" }, { root: "/", base: "b" }, { dir: "d", name: "n", ext: ".e" }, {}]) {
    assert.equal(path.format(parts), nodePath.format(parts), JSON.stringify(parts));
  }
  assert.equal(path.sep, "/");
  assert.equal(path.delimiter, ":");
  assert.equal(path.posix.join, path.join);
  assert.throws(() => path.join("a", 1), { code: "ERR_INVALID_ARG_TYPE" });
});

// The guest's node:util, node:os and node:async_hooks against Node's own
// where they share behaviour: format and inspect of plain values,
// promisify/callbackify, isDeepStrictEqual, AsyncLocalStorage across
// nested and awaited runs; os as a machine of the engine's own.
import assert from "node:assert/strict";
import { AsyncLocalStorage as NodeStorage } from "node:async_hooks";
import { test } from "node:test";
import nodeUtil from "node:util";
import { sdkModule } from "./sdk-source.mjs";

const util = (await sdkModule("node/util")).default;
const os = (await sdkModule("node/os")).default;
const { AsyncLocalStorage } = await sdkModule("node/async_hooks");

test("format and inspect answer as Node's for plain values", () => {
  const cases = [
    ["%s has %d items (%i%%)", "cart", 3, 42.9],
    ["%s", { a: 1, b: [1, 2], c: "x" }],
    ["%j", { a: [1, { b: 2 }] }],
    ["%s and %s", "one"],
    ["no directives", 1, "two", { three: 3 }, null, undefined],
    [42, "x"],
    ["%d %d", 10n, "7"],
    ["%f", "3.25abc"],
    ["%s", new Map([["k", 1]])],
    ["%s", new Set([1, 2])],
    ["%O", { deep: { deeper: { deepest: { gone: 1 } } } }],
    ["%s", -0],
    ["%c styled", "color: red"],
  ];
  for (const [template, ...args] of cases) {
    assert.equal(util.format(template, ...args), nodeUtil.format(template, ...args), JSON.stringify([template, ...args.map(String)]));
  }
  for (const value of [1, "it's", [1, [2, [3, [4]]]], { "a-b": 1, ok: true }, null, undefined, 5n, new Date(0), /x/g, {}, []]) {
    assert.equal(util.inspect(value), nodeUtil.inspect(value), String(value));
  }
  const circular = { name: "loop" };
  circular.self = circular;
  assert.match(util.inspect(circular), /\[Circular \*1\]/);
});

test("promisify, callbackify, deprecate, inherits and isDeepStrictEqual", async () => {
  const callbackStyle = (a, b, done) => (a < 0 ? done(new Error("negative")) : done(null, a + b));
  assert.equal(await util.promisify(callbackStyle)(1, 2), 3);
  await assert.rejects(util.promisify(callbackStyle)(-1, 2), /negative/);
  const answered = await new Promise((resolve) => util.callbackify(async (x) => x * 2)(21, (error, value) => resolve([error, value])));
  assert.deepEqual(answered, [null, 42]);
  const warnings = [];
  const saved = console.warn;
  console.warn = (message) => warnings.push(message);
  try {
    const old = util.deprecate((x) => x + 1, "use new()", "DEP0001");
    assert.equal(old(1) + old(2), 5);
  } finally {
    console.warn = saved;
  }
  assert.deepEqual(warnings, ["[DEP0001] DeprecationWarning: use new()"]);
  function Base() {}
  Base.prototype.hello = () => "hi";
  function Derived() {}
  util.inherits(Derived, Base);
  assert.equal(new Derived().hello(), "hi");
  for (const [a, b] of [[{ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] }], [{ a: 1 }, { a: "1" }], [[1, 2], [1, 2, 3]], [NaN, NaN], [0, -0],
    [new Map([[1, { x: 1 }]]), new Map([[1, { x: 1 }]])], [new Date(1), new Date(2)], [Object.create(null), {}]]) {
    assert.equal(util.isDeepStrictEqual(a, b), nodeUtil.isDeepStrictEqual(a, b), `${nodeUtil.inspect(a)} vs ${nodeUtil.inspect(b)}`);
  }
  assert.throws(() => util.parseArgs({}), { code: "ERR_CTXBOX_REFUSED" });
  assert.equal(util.types.isDate(new Date()), true);
  assert.equal(new util.TextDecoder().decode(new util.TextEncoder().encode("é")), "é");
});

test("AsyncLocalStorage keeps the store of the run in progress, across awaits, as Node's does", async () => {
  for (const Storage of [AsyncLocalStorage, NodeStorage]) {
    const storage = new Storage();
    const seen = [];
    seen.push(storage.getStore());
    const answer = storage.run(1, () => {
      seen.push(storage.getStore());
      storage.run(2, () => seen.push(storage.getStore()));
      seen.push(storage.getStore());
      return "done";
    });
    seen.push(storage.getStore());
    await storage.run(3, async () => {
      seen.push(storage.getStore());
      await Promise.resolve();
      seen.push(storage.getStore());
      await new Promise((resolve) => setTimeout(resolve, 1));
      seen.push(storage.getStore());
    });
    seen.push(storage.getStore());
    assert.throws(() => storage.run(4, () => {
      throw new Error("inside");
    }), /inside/);
    seen.push(storage.getStore());
    storage.run(5, () => storage.exit(() => seen.push(storage.getStore())));
    assert.deepEqual([answer, seen], ["done", [undefined, 1, 2, 1, undefined, 3, 3, 3, undefined, undefined, undefined]], Storage.name);
  }
});

test("os is a machine of the engine's own, with Node's shapes", () => {
  assert.equal(os.homedir(), "/home/engine");
  assert.equal(os.tmpdir(), "/tmp");
  assert.equal(os.EOL, "\n");
  assert.equal(os.platform(), "linux");
  assert.equal(os.cpus().length, os.availableParallelism());
  assert.deepEqual(os.networkInterfaces(), {});
  assert.equal(os.userInfo().homedir, os.homedir());
});

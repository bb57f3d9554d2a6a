// node:module's createRequire and the module map a rewritten import() uses;
// node:readline importable but refused.
import assert from "node:assert/strict";
import { test } from "node:test";
import { sdkModule } from "./sdk-source.mjs";

const module = await sdkModule("node/module");
const readline = await sdkModule("node/readline");

const pathShim = { join: () => "joined", default: { join: () => "joined" } };
const onlyDefault = { default: { redactSensitiveText: (s) => s.replace(/sk-\w+/g, "***") } };
module.registerModules({ "node:path": pathShim, "openclaw/plugin-sdk/logging-core": onlyDefault });

test("createRequire answers from the module map, a default-only module as its default", () => {
  const require = module.createRequire("file:///plugin/dist/index.js");
  assert.equal(require("node:path"), pathShim);
  assert.equal(require("path"), pathShim);
  assert.equal(require("openclaw/plugin-sdk/logging-core").redactSensitiveText("key sk-abc"), "key ***");
  assert.equal(require.resolve("path"), "path");
  assert.throws(() => require("openclaw/plugin-sdk/nothing"), {
    code: "ERR_MODULE_NOT_FOUND",
    message: /Cannot find module 'openclaw\/plugin-sdk\/nothing'.*known: node:path, openclaw\/plugin-sdk\/logging-core/,
  });
  assert.throws(() => require.resolve("child_process"), { code: "ERR_MODULE_NOT_FOUND" });
});

test("importModule resolves known specifiers and rejects unknown ones naming them; the global twin is the same", async () => {
  assert.equal(await module.importModule("node:path"), pathShim);
  await assert.rejects(module.importModule("openclaw/plugin-sdk"), { code: "ERR_MODULE_NOT_FOUND", message: /'openclaw\/plugin-sdk'/ });
  assert.equal(globalThis[Symbol.for("@ctxbox/guest/import")], module.importModule);
  assert.equal(module.isBuiltin("path"), true);
  assert.equal(module.isBuiltin("node:fs"), false);
  assert.deepEqual(module.builtinModules, ["path"]);
});

test("readline loads and refuses every use by name", () => {
  assert.throws(() => readline.createInterface({ input: null }), { code: "ERR_CTXBOX_REFUSED", message: /readline\.createInterface/ });
  assert.throws(() => new readline.Interface(), { code: "ERR_CTXBOX_REFUSED" });
});

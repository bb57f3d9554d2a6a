// One OpenClaw turn through the plugin as a user installs it, run by
// packaging/ci.sh under Node 26 with:
//   CTXBOX_PLUGIN_DIR  the plugin as npm installed it from OUTDIR's tarballs
//                      (<prefix>/node_modules/@ctxbox/openclaw, its platform
//                      package beside it)
//   CTXBOX_BIN         the platform package's binary (to recognise the sidecar,
//                      which may run from OpenClaw's staged copy of the package)
//   OPENCLAW_MJS       node_modules/openclaw/openclaw.mjs
// The plugin's configuration names no ctxboxBin and PATH holds no ctxbox:
// the plugin must find the platform package's binary itself.

import assert from "node:assert/strict";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { startFakeModel } from "../../integrations/openclaw/test/fake-model.mjs";
import { CTXBOX_BIN, OpenClaw, descendants, need } from "../../integrations/openclaw/test/harness.mjs";

const PLUGIN_DIR = need("CTXBOX_PLUGIN_DIR");

test("keep-recent through the installed plugin: a turn is served by the platform package's ctxbox", async () => {
  const model = await startFakeModel({ reply: (_body, index) => `installed reply ${index}` });
  const openclaw = new OpenClaw("installed", "keep-recent", model, {
    plugin: { dir: PLUGIN_DIR, id: "ctxbox", config: { engine: "keep-recent", dataDir: "" } },
  });
  openclaw.plugin.config.dataDir = openclaw.dataDir;
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    await openclaw.turn("s1", "first question");
    // The `ctxbox serve` processes under the gateway, by their command line.
    const serving = descendants(openclaw.gateway.pid)
      .map((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
        } catch {
          return [];
        }
      })
      .filter((argv) => argv[1] === "serve");
    assert.ok(serving.length >= 1, `a sidecar under the gateway:\n${openclaw.gatewayLog.slice(-3000)}`);
    // OpenClaw may run the plugin from its own staged copy of the package
    // and its dependencies: the binary is the platform package's, wherever
    // OpenClaw put it.
    for (const [bin] of serving) {
      assert.match(bin, /\/node_modules\/@ctxbox\/openclaw-linux-x64\/bin\/ctxbox$/, "the sidecar is the platform package's binary");
      assert.equal(statSync(bin).size, statSync(CTXBOX_BIN).size, `${bin} is the packaged binary`);
    }
    await openclaw.turn("s1", "second question");
    const commits = openclaw.commits("s1");
    assert.ok(commits.length >= 1, "the sidecar committed the turns");
    assert.doesNotMatch(openclaw.gatewayLog, /ctxbox: (no ctxbox binary|.*too old|.*newer than|ctxbox doctor:)/, "no complaint");
  } finally {
    // Kept with the home (CTXBOX_E2E_KEEP=1) for a look at what the plugin said.
    writeFileSync(join(openclaw.home, "gateway.log"), openclaw.gatewayLog ?? "");
    openclaw.stop();
    await model.close();
  }
});

// One OpenClaw turn through the plugin as a user installs it, run by
// packaging/ci.sh under Node 26 with:
//   CTXBOX_PLUGIN_DIR  the plugin as npm installed it from OUTDIR's tarballs
//                      (<prefix>/node_modules/@ctxbox/openclaw, its platform
//                      package beside it)
//   CTXBOX_BIN         the platform package's binary (to recognise the sidecar)
//   OPENCLAW_MJS       node_modules/openclaw/openclaw.mjs
// The plugin's configuration names no ctxboxBin and PATH holds no ctxbox:
// the plugin must find the platform package's binary itself.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { startFakeModel } from "../../integrations/openclaw/test/fake-model.mjs";
import { CTXBOX_BIN, OpenClaw, need, sidecarsUnder } from "../../integrations/openclaw/test/harness.mjs";

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
    const sidecars = sidecarsUnder(openclaw.gateway.pid);
    assert.equal(sidecars.length, 1, `one sidecar from ${CTXBOX_BIN} under the gateway:\n${openclaw.gatewayLog.slice(-3000)}`);
    assert.equal(readFileSync(`/proc/${sidecars[0]}/cmdline`, "utf8").split("\0")[0], CTXBOX_BIN);
    await openclaw.turn("s1", "second question");
    const commits = openclaw.commits("s1");
    assert.ok(commits.length >= 1, "the sidecar committed the turns");
    assert.doesNotMatch(openclaw.gatewayLog, /ctxbox: (no ctxbox binary|.*too old|.*newer than|ctxbox doctor:)/, "no complaint");
  } finally {
    openclaw.stop();
    await model.close();
  }
});

// The same engine file in both runtimes: one built `.wasm` engine serves a
// session in the real OpenClaw (through this plugin) and one in the real
// Hermes Agent (through integrations/hermes), and each shows it was served by
// that engine. Run by ci.sh after e2e.mjs, with what e2e.mjs needs plus:
//   CTXBOX_BOTH_RUNTIMES_WASM the engine both run (ci.sh: param_echo, which
//                             tells what reached it in a system prompt
//                             addition); default CTXBOX_PARAM_ECHO_WASM
//   CTXBOX_HERMES_PYTHON      the Hermes venv's python (hermes-agent 0.19.0)
// The Hermes half is integrations/hermes/test/one_session.py: test_e2e.py's
// Hermes home, fake model and driver (hermes_driver.py), in a process of its
// own, ended by its PID when it overruns. Every server binds 127.0.0.1.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { test } from "node:test";

import { startFakeModel } from "./fake-model.mjs";
import { CTXBOX_BIN, OpenClaw, PLUGIN_DIR, need, root, run, texts } from "./harness.mjs";

const WASM = process.env.CTXBOX_BOTH_RUNTIMES_WASM || need("CTXBOX_PARAM_ECHO_WASM");
const HERMES_PYTHON = need("CTXBOX_HERMES_PYTHON");
const HERMES_TEST_DIR = join(PLUGIN_DIR, "..", "hermes", "test");
/** The longest the Hermes half may take, ms: above one_session.py's own bound (test_e2e.RUN_TIMEOUT_S, 240 s), which ends the driver and its sidecar by PID itself. */
const HERMES_TIMEOUT_MS = 300_000;

/** What the sidecar calls an engine loaded from `path`: its file stem, `_` as `-`. */
const engineId = (path) => basename(path, ".wasm").replaceAll("_", "-");

test("the same .wasm engine file serves a session in OpenClaw and one in Hermes Agent", { timeout: 600_000 }, async () => {
  assert.ok(existsSync(WASM), `${WASM} exists`);
  const id = engineId(WASM);

  // OpenClaw: the engine assembles every prompt; param-echo's
  // systemPromptAddition (what reached it) reaches the model.
  const model = await startFakeModel({ reply: (_body, index) => `both reply ${index}` });
  const openclaw = new OpenClaw("both-runtimes", WASM, model);
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    for (let turn = 1; turn <= 2; turn++) await openclaw.turn("both", `both question ${turn}`);
    const last = model.requests.at(-1);
    const system = last.messages
      .filter((message) => message.role === "system" || message.role === "developer")
      .map((message) => (typeof message.content === "string" ? message.content : JSON.stringify(message.content)))
      .join("\n");
    if (id === "param-echo") assert.match(system, /key=Some\("[^"]+"\) prompt=None/, system.slice(-2000));
    assert.ok(texts(last).join("\n").includes("both question 1"), "the engine kept the history");
    assert.equal(openclaw.commits("both").length, 2, "both turns were committed through the engine's sidecar");
    const health = await openclaw.health();
    assert.equal(health.status, 0, `nothing quarantined in OpenClaw's sidecar: ${JSON.stringify(health.records)}`);
  } finally {
    openclaw.stop();
    await model.close();
  }

  // Hermes: the same file; Hermes compresses from the second turn, and the
  // engine's status says who served each compression (`servedBy`).
  const work = join(root, "hermes");
  mkdirSync(work, { recursive: true });
  const out = join(work, "out.json");
  const turns = ["hermes question 1", "hermes question 2", "hermes question 3"];
  const hermes = await run(HERMES_PYTHON, [join(HERMES_TEST_DIR, "one_session.py"), WASM, work, out, ...turns], {
    cwd: HERMES_TEST_DIR,
    env: { ...process.env, CTXBOX_BIN, PYTHONDONTWRITEBYTECODE: "1" },
    timeoutMs: HERMES_TIMEOUT_MS,
  });
  assert.equal(hermes.status, 0, `the Hermes session failed (${hermes.signal ?? ""}):\n${hermes.stdout.slice(-3000)}\n${hermes.stderr.slice(-3000)}`);
  console.log(`# hermes: ${turns.length} turns took ${hermes.ms} ms`);
  const report = JSON.parse(readFileSync(out, "utf8"));
  assert.equal(report.engine, "ctxbox");
  for (const [index, turn] of report.turns.entries()) {
    assert.ok(!turn.failed && turn.final.startsWith(`answer to "${turns[index]}`), JSON.stringify(turn).slice(0, 500));
  }
  const status = report.turns.at(-1).status;
  assert.equal(status.served_by, id, `Hermes's compressions were served by ${id}: ${JSON.stringify(status)}`);
  assert.equal(status.fallbacks, 0, `none fell back: ${JSON.stringify(status)}`);
  assert.ok(report.connects.every((address) => address.startsWith("('127.0.0.1'")), JSON.stringify(report.connects));
  assert.equal(report.health.status, 0, `nothing quarantined in Hermes's sidecar: ${JSON.stringify(report.health.records)}`);
});

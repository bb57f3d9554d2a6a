// End to end against the real OpenClaw (2026.9.6, from the npm registry):
// the plugin installed from this folder, a warm `openclaw gateway`, turns
// sent with `openclaw agent`, and a loopback fake model that records every
// request body. Run by ci.sh with:
//   CTXBOX_BIN            the built ctxbox binary
//   OPENCLAW_MJS          node_modules/openclaw/openclaw.mjs
//   CTXBOX_SPIN_WASM      the `spin` test engine (hangs in assemble)
//   CTXBOX_PANICKER_WASM  the `panicker` test engine (panics in assemble)
//   CTXBOX_PARAM_ECHO_WASM the `param-echo` test engine (tells what reached it
//                         in a system prompt addition)
// under Node 26 (`node --test test/e2e.mjs`). Every process it starts is
// ended by its PID.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";

import { startFakeModel } from "./fake-model.mjs";

const PLUGIN_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const need = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (see the top of test/e2e.mjs)`);
  return value;
};
const CTXBOX_BIN = need("CTXBOX_BIN");
const OPENCLAW_MJS = need("OPENCLAW_MJS");
const SPIN_WASM = need("CTXBOX_SPIN_WASM");
const PANICKER_WASM = need("CTXBOX_PANICKER_WASM");
const PARAM_ECHO_WASM = need("CTXBOX_PARAM_ECHO_WASM");

/** The sandbox call deadline the sidecar runs engines under, ms. */
const ENGINE_DEADLINE_MS = 2_000;
/** The plugin's own per-call timeout, ms. */
const PLUGIN_TIMEOUT_MS = 6_000;
/** How much longer than a normal turn a turn with a hanging engine may take. */
const HANG_ALLOWANCE_MS = ENGINE_DEADLINE_MS + 6_000;
/** The slowest warm turn of the lossless test (a normal turn on this machine). */
let warmTurnMs = 15_000;

const root = mkdtempSync(join(tmpdir(), "ctxbox-openclaw-e2e-"));
const started = new Set();
after(() => {
  for (const child of started) if (child.exitCode === null) child.kill("SIGKILL");
  // The OpenClaw homes (logs, stores, model requests) stay for a look with CTXBOX_E2E_KEEP=1.
  if (process.env.CTXBOX_E2E_KEEP) console.log(`# kept ${root}`);
  else rmSync(root, { recursive: true, force: true });
});

/** Runs a command to its end; resolves with status, stdout, stderr, ms. */
function run(command, args, options = {}) {
  return new Promise((done) => {
    const begun = Date.now();
    const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
    started.add(child);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 180_000);
    child.on("exit", (status, signal) => {
      clearTimeout(timer);
      started.delete(child);
      done({ status, signal, stdout, stderr, ms: Date.now() - begun });
    });
  });
}

/** The ids of every descendant of `pid`. */
function descendants(pid) {
  const found = [];
  const queue = [pid];
  while (queue.length) {
    const parent = queue.shift();
    let tasks = [];
    try {
      tasks = readdirSync(`/proc/${parent}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      let children = "";
      try {
        children = readFileSync(`/proc/${parent}/task/${task}/children`, "utf8");
      } catch {
        continue;
      }
      for (const child of children.split(" ").filter(Boolean).map(Number)) {
        found.push(child);
        queue.push(child);
      }
    }
  }
  return found;
}

/** The `ctxbox serve` processes under `pid`. */
function sidecarsUnder(pid) {
  return descendants(pid).filter((child) => {
    try {
      const argv = readFileSync(`/proc/${child}/cmdline`, "utf8").split("\0");
      return argv[0] === CTXBOX_BIN && argv[1] === "serve";
    } catch {
      return false;
    }
  });
}

const portFree = (port) =>
  new Promise((done) => {
    const socket = connect(port, "127.0.0.1");
    socket.on("connect", () => {
      socket.destroy();
      done(false);
    });
    socket.on("error", () => done(true));
  });

/** One OpenClaw home with the plugin installed, configured for `engine`. */
class OpenClaw {
  /**
   * `plugin` replaces this folder's plugin with another context-engine
   * plugin: `{ dir, id, config, timeoutSeconds }` (OpenClaw's run timeout).
   */
  constructor(name, engine, model, ctxboxToml = "", plugin = undefined) {
    this.ctxboxToml = ctxboxToml;
    this.plugin = plugin;
    this.home = join(root, name);
    this.dataDir = join(this.home, "ctxbox-data");
    this.engine = engine;
    this.model = model;
    this.port = 20_000 + Math.floor(Math.random() * 20_000);
    this.env = {
      ...process.env,
      HOME: this.home,
      OPENCLAW_NO_AUTO_UPDATE: "1",
      OPENCLAW_DISABLE_BONJOUR: "1",
      OPENCLAW_SKIP_CHANNELS: "1",
      OPENCLAW_NO_RESPAWN: "1",
    };
  }

  openclaw(args, options) {
    return run(process.execPath, [OPENCLAW_MJS, ...args], { env: this.env, ...options });
  }

  async setUp() {
    mkdirSync(join(this.home, ".openclaw"), { recursive: true });
    mkdirSync(this.dataDir, { recursive: true });
    const configPath = join(this.home, ".openclaw", "openclaw.json");
    writeFileSync(configPath, JSON.stringify(this.baseConfig(), null, 2));
    const installed = await this.openclaw(["plugins", "install", "-l", "--force", "--accept-capabilities", this.plugin?.dir ?? PLUGIN_DIR]);
    assert.equal(installed.status, 0, `plugins install failed:\n${installed.stdout}\n${installed.stderr}`);
    const ctxboxToml = join(this.home, "ctxbox.toml");
    writeFileSync(ctxboxToml, `[sandbox]\ncallTimeoutMs = ${ENGINE_DEADLINE_MS}\n${this.ctxboxToml}`);
    // Install may have rewritten the config; add ours to what it wrote.
    const config = JSON.parse(readFileSync(configPath, "utf8"));
    config.plugins = config.plugins ?? {};
    const id = this.plugin?.id ?? "ctxbox";
    config.plugins.slots = { ...(config.plugins.slots ?? {}), contextEngine: id };
    config.plugins.entries = config.plugins.entries ?? {};
    config.plugins.entries[id] = {
      ...(config.plugins.entries[id] ?? {}),
      enabled: true,
      config: this.plugin?.config ?? {
        engine: this.engine,
        ctxboxBin: CTXBOX_BIN,
        dataDir: this.dataDir,
        configFile: ctxboxToml,
        callTimeoutMs: PLUGIN_TIMEOUT_MS,
      },
    };
    writeFileSync(configPath, JSON.stringify(config, null, 2));
  }

  baseConfig() {
    return {
      gateway: { mode: "local", port: this.port, bind: "loopback", auth: { mode: "token", token: "e2e-token" } },
      models: {
        mode: "merge",
        providers: {
          fake: {
            baseUrl: this.model.url,
            apiKey: "fake",
            api: "openai-completions",
            models: [
              {
                id: "fake-1",
                name: "Fake",
                reasoning: false,
                input: ["text"],
                cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
                contextWindow: 32_000,
                maxTokens: 1_000,
              },
            ],
          },
        },
      },
      agents: {
        defaults: {
          model: { primary: "fake/fake-1" },
          ...(this.plugin?.timeoutSeconds ? { timeoutSeconds: this.plugin.timeoutSeconds } : {}),
        },
      },
    };
  }

  async startGateway() {
    assert.ok(await portFree(this.port), `port ${this.port} is taken`);
    const gateway = spawn(
      process.execPath,
      [OPENCLAW_MJS, "gateway", "run", "--port", String(this.port), "--bind", "loopback", "--auth", "token", "--token", "e2e-token"],
      { env: this.env, stdio: ["ignore", "pipe", "pipe"] },
    );
    started.add(gateway);
    this.gateway = gateway;
    this.gatewayLog = "";
    const keep = (chunk) => {
      this.gatewayLog = (this.gatewayLog + chunk).slice(-200_000);
    };
    gateway.stdout.on("data", keep);
    gateway.stderr.on("data", keep);
    const begun = Date.now();
    while (await portFree(this.port)) {
      assert.equal(gateway.exitCode, null, `the gateway exited:\n${this.gatewayLog}`);
      assert.ok(Date.now() - begun < 120_000, `the gateway did not listen within 2 min:\n${this.gatewayLog}`);
      await new Promise((done) => setTimeout(done, 250));
    }
  }

  /** One turn of `session`; asserts it completed and returns its duration. */
  async turn(session, message) {
    const result = await this.rawTurn(session, message);
    assert.equal(result.status, 0, `turn "${message}" failed:\n${result.stdout}\n${result.stderr}\n--- gateway ---\n${this.gatewayLog.slice(-5000)}`);
    const json = JSON.parse(result.stdout.slice(result.stdout.indexOf("{")));
    assert.equal(json.status, "ok", result.stdout);
    console.log(`# ${this.engine.split("/").at(-1)}: turn "${message}" of ${session} took ${result.ms} ms`);
    return result.ms;
  }

  /** One turn of `session`, however it ends: `{status, stdout, stderr, ms}`. */
  rawTurn(session, message) {
    return this.openclaw(["agent", "--session-id", session, "--message", message, "--json"], {
      timeoutMs: 180_000,
    });
  }

  stop() {
    if (this.gateway && this.gateway.exitCode === null) {
      this.gateway.kill("SIGTERM");
      const gateway = this.gateway;
      setTimeout(() => gateway.exitCode === null && gateway.kill("SIGKILL"), 5_000).unref();
    }
  }

  /** Rows of the sidecar's commit store for `session`. */
  commits(session) {
    const db = new DatabaseSync(join(this.dataDir, "turn-commits.sqlite3"), { readOnly: true });
    try {
      return db
        .prepare("SELECT advancement_key AS key, message_count AS count FROM turn_commits WHERE session_id = ?")
        .all(session);
    } finally {
      db.close();
    }
  }

  /** `ctxbox health --json` for this data dir. */
  async health() {
    const result = await run(CTXBOX_BIN, ["health", "--json", "--data-dir", this.dataDir]);
    return { status: result.status, records: JSON.parse(result.stdout) };
  }
}

/** The text of every message of a chat-completions request, one string each. */
function texts(request) {
  return request.messages.map((message) =>
    typeof message.content === "string" ? message.content : JSON.stringify(message.content ?? ""),
  );
}

/** Answers that grow the session quickly, so a budget is reached in a few turns. */
const longReply = (_body, index) => `reply ${index}: ${"the quick brown fox jumps over the lazy dog ".repeat(450)}`;

/** Asks `ctxbox serve` directly to commit `key` again. */
async function replayCommit(dataDir, session, key) {
  const child = spawn(CTXBOX_BIN, ["serve", "--engine", "keep-recent", "--data-dir", dataDir], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  started.add(child);
  const lines = [];
  child.stdout.on("data", (chunk) => lines.push(...String(chunk).split("\n").filter(Boolean)));
  child.stdin.write(`${JSON.stringify({ id: 1, method: "hello", params: { protocol: 1 } })}\n`);
  child.stdin.write(
    `${JSON.stringify({ id: 2, method: "commitTurn", params: { sessionId: session, advancementKey: key, messages: [] } })}\n`,
  );
  child.stdin.end();
  await new Promise((done) => child.on("exit", done));
  started.delete(child);
  return JSON.parse(lines.find((line) => JSON.parse(line).id === 2));
}

test("keep-recent: five turns trimmed by the engine, each committed once; the sidecar survives SIGKILL", async () => {
  const model = await startFakeModel({ reply: longReply });
  const openclaw = new OpenClaw("keep-recent", "keep-recent", model);
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    for (let turn = 1; turn <= 5; turn++) await openclaw.turn("kr", `question number ${turn}`);

    // Once the session outgrows the budget the engine's context reaches the
    // model: the newest turns, and keep-recent's note instead of the oldest.
    writeFileSync(join(openclaw.home, "model-requests.json"), JSON.stringify(model.requests, null, 1));
    const trimmed = model.requests.filter((request) => texts(request).some((text) => text.includes("[keep-recent:")));
    assert.ok(trimmed.length > 0, "the model saw keep-recent's note about what it left out");
    const latest = texts(trimmed.at(-1));
    assert.ok(latest.some((text) => /\[keep-recent: \d+ earlier messages/.test(text)), latest.join("\n").slice(0, 2000));
    assert.ok(!latest.some((text) => text.startsWith("reply 0:")), "the oldest reply was left out by the engine");
    assert.ok(!latest.some((text) => /^\[[^\]]*\] question number 1\b/.test(text)), "so was the oldest question");
    assert.ok(latest.some((text) => /question number [45]\b/.test(text)), "the newest turns are kept");

    const commits = openclaw.commits("kr");
    assert.equal(commits.length, 5, `one commit per turn: ${JSON.stringify(commits)}`);
    assert.equal(new Set(commits.map((commit) => commit.key)).size, 5);
    assert.ok(commits.every((commit) => commit.count >= 2), "each commit holds the turn's messages");

    // SIGKILL the sidecar between turns: the next turn completes, a new one runs.
    const [sidecar] = sidecarsUnder(openclaw.gateway.pid);
    assert.ok(sidecar, "the gateway runs a ctxbox sidecar");
    process.kill(sidecar, "SIGKILL");
    await openclaw.turn("kr", "question number 6");
    let back = [];
    for (let tries = 0; tries < 40 && back.length === 0; tries++) {
      back = sidecarsUnder(openclaw.gateway.pid).filter((pid) => pid !== sidecar);
      if (back.length === 0) await new Promise((done) => setTimeout(done, 250));
    }
    assert.equal(back.length, 1, "the sidecar is back");
    const before = model.requests.length;
    await openclaw.turn("kr", "question number 7");
    const sinceKill = model.requests.slice(before).map((request) => texts(request).join("\n"));
    assert.ok(sinceKill.some((all) => all.includes("question number 7")), "the turn after the restart reached the model");
    openclaw.stop();

    const replay = await replayCommit(openclaw.dataDir, "kr", commits[0].key);
    assert.equal(replay.result?.status, "duplicate", JSON.stringify(replay));
  } finally {
    openclaw.stop();
    await model.close();
  }
});

test("lossless: five turns with every earlier message kept, each committed once", async () => {
  const model = await startFakeModel({ reply: (_body, index) => `lossless reply ${index}` });
  const openclaw = new OpenClaw("lossless", "lossless", model);
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    const durations = [];
    for (let turn = 1; turn <= 5; turn++) durations.push(await openclaw.turn("ll", `lossless question ${turn}`));
    warmTurnMs = Math.max(...durations.slice(1));
    const all = texts(model.requests.at(-1)).join("\n");
    for (let turn = 1; turn <= 5; turn++) assert.ok(all.includes(`lossless question ${turn}`), `turn ${turn} is in the context`);
    for (let reply = 0; reply < 4; reply++) assert.ok(all.includes(`lossless reply ${reply}`), `reply ${reply} is in the context`);
    const commits = openclaw.commits("ll");
    assert.equal(commits.length, 5, JSON.stringify(commits));
    const health = await openclaw.health();
    assert.equal(health.status, 0, `nothing quarantined: ${JSON.stringify(health.records)}`);
  } finally {
    openclaw.stop();
    await model.close();
  }
});

test("param-echo: the engine's systemPromptAddition reaches the model, with only the host params it accepts", async () => {
  const model = await startFakeModel({ reply: (_body, index) => `echo reply ${index}` });
  const openclaw = new OpenClaw("param-echo", PARAM_ECHO_WASM, model);
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    for (let turn = 1; turn <= 2; turn++) await openclaw.turn("pe", `echo question ${turn}`);
    const system = model.requests
      .at(-1)
      .messages.filter((message) => message.role === "system" || message.role === "developer")
      .map((message) => (typeof message.content === "string" ? message.content : JSON.stringify(message.content)))
      .join("\n");
    // param-echo accepts only `session-key`: OpenClaw's session key reaches
    // it, the prompt (which it did not ask for) does not.
    assert.match(system, /key=Some\("[^"]+"\) prompt=None/, system.slice(-2000));
    const all = texts(model.requests.at(-1)).join("\n");
    assert.ok(all.includes("echo question 1") && all.includes("echo reply 0"), "the engine kept the history");
    assert.equal(openclaw.commits("pe").length, 2);
  } finally {
    openclaw.stop();
    await model.close();
  }
});

// The hostile engines get a one-second quarantine back-off, so after the
// gateway's cold first turn every turn tries the engine again: each of them
// must still finish within a warm turn's time plus the engine deadline and a
// few seconds. `panicker` panics when the prompt is "panic".
for (const [name, wasm, message, classifications] of [
  ["spin", SPIN_WASM, "spin question", ["timeout", "out-of-fuel"]],
  ["panicker", PANICKER_WASM, "panic", ["panic"]],
]) {
  test(`${name}: every turn completes in time with the pass-through context and the engine is quarantined`, async () => {
    assert.ok(existsSync(wasm), `${wasm} exists`);
    const model = await startFakeModel({ reply: (_body, index) => `${name} reply ${index}` });
    const openclaw = new OpenClaw(name, wasm, model, "[quarantine]\nretryAfterSeconds = 1\n");
    try {
      await openclaw.setUp();
      await openclaw.startGateway();
      await openclaw.turn(name, message);
      for (let turn = 2; turn <= 3; turn++) {
        const took = await openclaw.turn(name, message);
        assert.ok(took <= warmTurnMs + HANG_ALLOWANCE_MS, `turn ${turn} took ${took} ms (a warm turn: ${warmTurnMs} ms)`);
      }
      const last = texts(model.requests.at(-1)).join("\n");
      assert.ok(last.includes(`${name} reply 0`) && last.includes(`${name} reply 1`), "pass-through: the whole history reaches the model");

      const health = await openclaw.health();
      assert.equal(health.status, 2, "ctxbox health exits 2 while an engine is quarantined");
      const record = health.records.find((entry) => entry.engineId === name);
      assert.ok(record, JSON.stringify(health.records));
      assert.ok(classifications.includes(record.classification), JSON.stringify(record));
      assert.ok(record.retryAtMs > record.atMs, `the back-off is set: ${JSON.stringify(record)}`);
      const shown = await run(CTXBOX_BIN, ["health", "--data-dir", openclaw.dataDir]);
      assert.match(shown.stdout, new RegExp(`${name} \\(plugin:serve\\)[\\s\\S]*failed in +assemble`), shown.stdout);
      assert.equal(openclaw.commits(name).length, 3, "every turn was committed");
    } finally {
      openclaw.stop();
      await model.close();
    }
  });
}

// What ctxbox is for, measured on the same OpenClaw: a plain JavaScript
// context engine whose `assemble` never answers holds the turn until
// OpenClaw's own run timeout (set to 20 s here; 600 s by default) and
// more, where the sandboxed `spin` above is answered within the engine
// deadline. The figure goes to BENCHMARKS.md.
test("without ctxbox: a hanging JavaScript engine holds the turn until OpenClaw's run timeout", async () => {
  const dir = join(root, "hang-js-plugin");
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({ name: "hang-js", version: "0.0.0", type: "module", openclaw: { extensions: ["./index.js"] } }),
  );
  writeFileSync(
    join(dir, "openclaw.plugin.json"),
    JSON.stringify({ id: "hang-js", name: "hang-js", kind: "context-engine", configSchema: { type: "object" } }),
  );
  writeFileSync(
    join(dir, "index.js"),
    `export default function register(api) {
  api.registerContextEngine("hang-js", () => ({
    info: { id: "hang-js", name: "hang-js", version: "0.0.0", ownsCompaction: false,
      transcriptSemantics: { currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1" } },
    async bootstrap() { return { bootstrapped: true }; },
    async ingest() { return { ingested: false }; },
    assemble: () => new Promise(() => {}),
    async commitTurn() { return { status: "committed" }; },
    async afterTurn() {},
    async compact() { return { ok: true, compacted: false }; },
    async dispose() {},
  }));
}
`,
  );
  const timeoutSeconds = 20;
  const model = await startFakeModel({ reply: (_body, index) => `hang reply ${index}` });
  const openclaw = new OpenClaw("hang-js", "hang-js", model, "", { dir, id: "hang-js", config: {}, timeoutSeconds });
  try {
    await openclaw.setUp();
    await openclaw.startGateway();
    const result = await openclaw.rawTurn("hj", "hang question");
    console.log(
      `# without ctxbox: a hanging assemble ended the turn after ${result.ms} ms (run timeout ${timeoutSeconds} s), exit ${result.status}`,
    );
    assert.ok(result.ms >= timeoutSeconds * 1000, `the turn waited for the run timeout: ${result.ms} ms`);
    assert.equal(model.requests.length, 0, "the model was never asked");
  } finally {
    openclaw.stop();
    await model.close();
  }
});

// The pieces of the end-to-end harness against the real OpenClaw that more
// than one test file uses (test/e2e.mjs, test/both-runtimes.mjs): an
// OpenClaw home with the plugin installed and a warm gateway (class
// OpenClaw), processes run to their end and bounded in time, and the
// sidecars under a process. Needs CTXBOX_BIN and OPENCLAW_MJS (see the top of
// test/e2e.mjs). Every process started here is ended by its PID when the
// test file ends; every server binds 127.0.0.1.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { zstdDecompressSync } from "node:zlib";
import { after } from "node:test";
import { fileURLToPath } from "node:url";

export const PLUGIN_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const need = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (see the top of test/e2e.mjs)`);
  return value;
};
export const CTXBOX_BIN = need("CTXBOX_BIN");
export const OPENCLAW_MJS = need("OPENCLAW_MJS");

/** The sandbox call deadline the sidecar runs engines under, ms. */
export const ENGINE_DEADLINE_MS = 2_000;
/** The plugin's own per-call timeout, ms. */
export const PLUGIN_TIMEOUT_MS = 6_000;
/** The plugin's timeout of the calls that may compact, ms: bounded well below OpenClaw's own 180 s compaction timeout. */
export const PLUGIN_COMPACT_TIMEOUT_MS = 60_000;
/** The fake model's context window, tokens: small, so the engines trim and compact. */
export const CONTEXT_WINDOW = 32_000;
/**
 * The fake model's context window with Tool Search off (`directTools`):
 * OpenClaw's own tools' schemas alone then take ~37k tokens of every
 * request, more than CONTEXT_WINDOW, and OpenClaw would ask the model for a
 * 1-token answer (which the fake model refuses, as a provider would).
 */
export const DIRECT_TOOLS_CONTEXT_WINDOW = 128_000;

export const root = mkdtempSync(join(tmpdir(), "ctxbox-openclaw-e2e-"));
export const started = new Set();
after(() => {
  for (const child of started) if (child.exitCode === null) child.kill("SIGKILL");
  // The OpenClaw homes (logs, stores, model requests) stay for a look with CTXBOX_E2E_KEEP=1.
  if (process.env.CTXBOX_E2E_KEEP) console.log(`# kept ${root}`);
  else rmSync(root, { recursive: true, force: true });
});

/** Runs a command to its end; resolves with status, stdout, stderr, ms. */
export function run(command, args, options = {}) {
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
export function descendants(pid) {
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
export function sidecarsUnder(pid) {
  return descendants(pid).filter((child) => {
    try {
      const argv = readFileSync(`/proc/${child}/cmdline`, "utf8").split("\0");
      return argv[0] === CTXBOX_BIN && argv[1] === "serve";
    } catch {
      return false;
    }
  });
}

export const portFree = (port) =>
  new Promise((done) => {
    const socket = connect(port, "127.0.0.1");
    socket.on("connect", () => {
      socket.destroy();
      done(false);
    });
    socket.on("error", () => done(true));
  });

/** A copy of this plugin whose manifest also declares `names`, as an operator adds another engine's tools. */
export function pluginDeclaring(names, name = "plugin-with-more-tools") {
  const dir = join(root, name);
  cpSync(join(PLUGIN_DIR, "dist", "src"), join(dir, "dist", "src"), { recursive: true });
  cpSync(join(PLUGIN_DIR, "package.json"), join(dir, "package.json"));
  const manifest = JSON.parse(readFileSync(join(PLUGIN_DIR, "openclaw.plugin.json"), "utf8"));
  manifest.contracts.tools = [...new Set([...manifest.contracts.tools, ...names])];
  writeFileSync(join(dir, "openclaw.plugin.json"), JSON.stringify(manifest, null, 2));
  return dir;
}

/** One OpenClaw home with the plugin installed, configured for `engine`. */
export class OpenClaw {
  /**
   * `options`: `ctxboxToml` (more of the sidecar's ctxbox.toml),
   * `engineDeadlineMs` and `pluginTimeoutMs` (instead of the defaults above),
   * `directTools` (Tool Search off: every tool's schema in every request,
   * ~37k tokens, so the window is DIRECT_TOOLS_CONTEXT_WINDOW),
   * `contextWindow` (the fake model's, instead of CONTEXT_WINDOW),
   * `pluginDir` (install that copy of this plugin), `plugin` (another
   * context-engine plugin instead: `{ dir, id, config, timeoutSeconds }`,
   * OpenClaw's run timeout; `archive` instead of `dir` installs a packed
   * plugin as one from the registry is, not linked).
   */
  constructor(name, engine, model, options = {}) {
    this.options = options;
    this.plugin = options.plugin;
    this.home = join(root, name);
    this.dataDir = join(this.home, "ctxbox-data");
    /** The plugin's trace of its session calls (its `traceFile`). */
    this.tracePath = join(this.home, "ctxbox-trace.jsonl");
    this.engine = engine;
    this.model = model;
    // Below Linux's ephemeral range (32768 and up by default): a port in it
    // can be taken, between the check below and the gateway's listen, as
    // the source port of any outgoing connection on the machine (a CI run
    // failed so, EADDRINUSE on 39656).
    this.port = 20_000 + Math.floor(Math.random() * 12_000);
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
    const source = this.plugin?.archive ? [this.plugin.archive] : ["-l", this.plugin?.dir ?? this.options.pluginDir ?? PLUGIN_DIR];
    const installed = await this.openclaw(["plugins", "install", "--force", "--accept-capabilities", ...source], { timeoutMs: 300_000 });
    assert.equal(installed.status, 0, `plugins install failed:\n${installed.stdout}\n${installed.stderr}`);
    const ctxboxToml = join(this.home, "ctxbox.toml");
    const deadline = this.options.engineDeadlineMs ?? ENGINE_DEADLINE_MS;
    writeFileSync(ctxboxToml, `[sandbox]\ncallTimeoutMs = ${deadline}\n${this.options.ctxboxToml ?? ""}`);
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
        callTimeoutMs: this.options.pluginTimeoutMs ?? PLUGIN_TIMEOUT_MS,
        compactTimeoutMs: PLUGIN_COMPACT_TIMEOUT_MS,
        traceFile: this.tracePath,
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
                contextWindow: this.options.contextWindow ?? (this.options.directTools ? DIRECT_TOOLS_CONTEXT_WINDOW : CONTEXT_WINDOW),
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
      ...(this.options.directTools ? { tools: { toolSearch: false } } : {}),
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
    this.fallbacks = 0;
    let partial = "";
    const keep = (chunk) => {
      this.gatewayLog = (this.gatewayLog + chunk).slice(-200_000);
      // Counted line by line over the whole run (the kept log is only its tail).
      const lines = (partial + chunk).split("\n");
      partial = lines.pop() ?? "";
      this.fallbacks += lines.filter((line) => FALLBACK_WARNING.test(line)).length;
    };
    gateway.stdout.on("data", keep);
    gateway.stderr.on("data", keep);
    const begun = Date.now();
    while (await portFree(this.port)) {
      assert.equal(gateway.exitCode, null, `the gateway exited:\n${this.gatewayLog}`);
      assert.ok(Date.now() - begun < 180_000, `the gateway did not listen within 3 min:\n${this.gatewayLog}`);
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

  /** `openclaw sessions compact` of `session` through the gateway; asserts it ran and returns its JSON answer. */
  async compact(session) {
    const result = await this.openclaw(
      ["sessions", "compact", `agent:main:explicit:${session}`, "--token", "e2e-token", "--url", `ws://127.0.0.1:${this.port}`, "--json"],
      { timeoutMs: 120_000 },
    );
    assert.equal(result.status, 0, `compaction failed:\n${result.stdout}\n${result.stderr}\n--- gateway ---\n${this.gatewayLog.slice(-5000)}`);
    console.log(`# ${this.engine.split("/").at(-1)}: compaction of ${session} took ${result.ms} ms`);
    return JSON.parse(result.stdout.slice(result.stdout.indexOf("{")));
  }

  stop() {
    if (this.gateway && this.gateway.exitCode === null) {
      this.gateway.kill("SIGTERM");
      const gateway = this.gateway;
      setTimeout(() => gateway.exitCode === null && gateway.kill("SIGKILL"), 5_000).unref();
    }
  }

  /** The plugin's traced session calls (trace.ts), in order. */
  trace() {
    let text = "";
    try {
      text = readFileSync(this.tracePath, "utf8");
    } catch {
      return [];
    }
    return text
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line));
  }

  /**
   * The messages of `session`'s transcript as OpenClaw keeps it (the
   * `transcript_events` of its agent database, each event JSON or zstd
   * JSON): the message entries on the branch that ends at its last entry.
   */
  transcript(session) {
    const db = new DatabaseSync(join(this.home, ".openclaw", "agents", "main", "agent", "openclaw-agent.sqlite"), { readOnly: true });
    let entries;
    try {
      entries = db
        .prepare("SELECT event_json AS json, event_zstd AS zstd FROM transcript_events WHERE session_id = ? ORDER BY seq")
        .all(session)
        .map((row) => JSON.parse(row.json ?? zstdDecompressSync(row.zstd).toString("utf8")));
    } finally {
      db.close();
    }
    const byId = new Map(entries.filter((entry) => entry.id).map((entry) => [entry.id, entry]));
    const branch = [];
    for (let entry = entries.findLast((entry) => entry.parentId !== undefined); entry; entry = byId.get(entry.parentId)) branch.unshift(entry);
    return branch.filter((entry) => entry.type === "message").map((entry) => entry.message);
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

  /**
   * How the live sidecar's calls of `engine`'s `operation` ended, by
   * outcome (`ctxbox health --serving --json`), once `ready(outcomes)`
   * holds: the sidecar writes its figures every five seconds, so this
   * waits up to `timeoutMs` for them.
   */
  async callOutcomes(engine, operation, ready, timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    let outcomes = {};
    for (;;) {
      const result = await run(CTXBOX_BIN, ["health", "--serving", "--json", "--data-dir", this.dataDir]);
      outcomes = {};
      for (const process of JSON.parse(result.stdout || "[]")) {
        for (const figures of process.engineCalls ?? []) {
          if (figures.engine !== engine || figures.name !== operation) continue;
          for (const [outcome, count] of Object.entries(figures.outcomes)) outcomes[outcome] = (outcomes[outcome] ?? 0) + count;
        }
      }
      if (ready(outcomes) || Date.now() > deadline) return outcomes;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
}

/** The text of every message of a chat-completions request, one string each. */
export function texts(request) {
  return request.messages.map((message) =>
    typeof message.content === "string" ? message.content : JSON.stringify(message.content ?? ""),
  );
}

/** The plugin's warning when the engine compacted nothing but OpenClaw required a compaction, so OpenClaw's own ran. */
export const FALLBACK_WARNING = /ctxbox compact: the engine compacted nothing .* but OpenClaw requires a compaction .*; OpenClaw's own compaction runs/;

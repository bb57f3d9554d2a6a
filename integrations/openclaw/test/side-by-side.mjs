// Side by side with the real thing (issue 37, item 4): lossless-claw
// 1.0.0-beta.4, OpenClaw's flagship context-engine plugin, run two ways in
// the real OpenClaw 2026.9.6 on the same scripted conversation:
//
//   in-process  built with its own build (`npm ci && npm run build:plugin`)
//               in a temporary copy of the subject, packed (`npm pack`) and
//               installed as a package from the registry is;
//   sandboxed   the same subject built unmodified into a ctxbox engine
//               (`ctxbox-ts-build --openclaw-plugin`), run through this
//               plugin's `ctxbox serve` sidecar.
//
// Each OpenClaw home has its own fake model, and both models answer alike:
// from what they are asked, never from how many requests came before. The
// conversation is TURNS ordinary turns in a window lossless-claw compacts
// in, then one turn where the model searches for the first question with
// lossless-claw's `lcm_grep`. Compared: what the model is sent each turn,
// the summaries lossless-claw wrote into its own database, and the tool's
// answer. docs/COMPAT.md ("Side by side") explains every difference this
// test allows. A second test builds a plugin whose compaction loops forever
// the same way and runs it through the plugin: the compaction is cut at the
// engine's limits and quarantined while the turns go on. Run by ci.sh with, besides CTXBOX_BIN and OPENCLAW_MJS:
//   CTXBOX_LOSSLESS_CLAW_SUBJECT  the subject's folder (read-only; never written)
//   CTXBOX_LOSSLESS_CLAW_WASM     its build (`ctxbox-ts-build --openclaw-plugin`)
//   CTXBOX_LOSSLESS_CLAW_CACHE    optional: a compile cache for the sidecar
//                                 (the one the Rust tests filled)

import assert from "node:assert/strict";
import { cpSync, globSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { test } from "node:test";

import { startFakeModel } from "./fake-model.mjs";
import { CTXBOX_BIN, OpenClaw, PLUGIN_DIR, need, pluginDeclaring, root, run } from "./harness.mjs";

const SUBJECT = need("CTXBOX_LOSSLESS_CLAW_SUBJECT");
const WASM = need("CTXBOX_LOSSLESS_CLAW_WASM");
const COMPILE_CACHE = process.env.CTXBOX_LOSSLESS_CLAW_CACHE;

/** The id lossless-claw's manifest gives it. */
const ID = "lossless-claw";
/** Ordinary turns before the search. */
const TURNS = 26;
/** The fake models' context window, tokens. */
const WINDOW = 32_000;
/** ~1,500 tokens a reply: the session outgrows lossless-claw's threshold (75% of the window) about halfway. */
const REPLY_REPEATS = 140;
/** The word of the first question that the last turn searches for. */
const MARKER = "zanzibar42";
/**
 * lossless-claw's settings for this window, in both runtimes: its defaults
 * (a fresh tail of 64 messages, leaves of 20,000 tokens) are for windows of
 * 128k and more.
 */
const SETTINGS = { freshTailCount: 8, freshTailMaxTokens: 3000, leafChunkTokens: 3000 };
/**
 * The sandboxed build's own limits: its JavaScript runs in the guest's
 * interpreter, where a call that compacts takes 10⁹–10¹⁰ instructions, and
 * its heap outgrows the sandbox's default 64 MiB.
 */
const LIMITS = { fuelPerCall: 40_000_000_000, callTimeoutMs: 60_000, memoryLimitMib: 128 };

/** How lossless-claw's summarizer prompt begins (its completions through OpenClaw's model are known by it). */
const SUMMARIZER_PROMPT = "You are a context-compaction summarization engine";

/** The text of one chat-completions message. */
const textOf = (message) => (typeof message.content === "string" ? message.content : JSON.stringify(message.content ?? ""));
const isSummarization = (request) =>
  request.messages.some((message) => ["system", "developer"].includes(message.role) && textOf(message).startsWith(SUMMARIZER_PROMPT));
/** Whether a request is OpenClaw's memory flush before a compaction (a run of its own). */
const isMemoryFlush = (request) => request.messages.some((message) => message.role === "user" && textOf(message).includes("Pre-compaction memory flush"));
/** The messages after the last assistant message: the turn's prompt, or a tool's result. */
const sinceAssistant = (request) => request.messages.slice(request.messages.findLastIndex((message) => message.role === "assistant") + 1);
/** The search turn's number among the turns. */
const SEARCH = TURNS + 1;
/** How a user message asks the conversation's questions (OpenClaw puts a timestamp before it). */
const ASKED = /^(\[[^\]]*\] )?(my first|ordinary) question number (\d+)/;
/** Which turn a prompt (the messages after the last assistant message) asks: its question's number, SEARCH, or none (OpenClaw's own runs). */
function questionOf(prompt) {
  for (const text of prompt.filter((message) => message.role === "user").map(textOf).reverse()) {
    if (text.includes("please search for the word")) return SEARCH;
    const asked = text.trim().match(ASKED);
    if (asked) return Number(asked[3]);
  }
  return undefined;
}
/** The question numbers a text mentions, ascending, once each. */
const questionsIn = (text) => [...new Set([...text.matchAll(/question number (\d+)/g)].map((match) => Number(match[1])))].sort((a, b) => a - b);

/**
 * The fake models' answers, the same for the same request in either home:
 * a summary names the questions it covers; a turn's answer repeats its
 * question; the search turn calls the runtime's name for `lcm_grep`
 * through Tool Search's `tool_call`.
 */
function replies(grepName) {
  return (body) => {
    if (isSummarization(body)) {
      const covered = questionsIn(body.messages.map(textOf).join("\n"));
      return `Summary: the user asked questions ${covered.join(", ") || "none"} and got long answers about foxes.`;
    }
    const prompt = sinceAssistant(body);
    if (prompt.some((message) => message.role === "tool")) return "answered after the search";
    const question = questionOf(prompt);
    if (question === undefined) return "noted"; // OpenClaw's own runs (its memory flush before a compaction)
    if (question === SEARCH) return { toolCall: { name: "tool_call", arguments: { id: grepName, args: { pattern: MARKER } } } };
    return `answer to question ${question}: ${"the quick brown fox jumps over the lazy dog ".repeat(REPLY_REPEATS)}`;
  };
}

/**
 * lossless-claw as its authors publish it: the subject copied (it is
 * read-only), built with its own lockfile and build script, and packed.
 */
async function packedSubject() {
  const work = join(root, "lossless-claw-build");
  cpSync(SUBJECT, work, { recursive: true, filter: (path) => !path.includes("/node_modules") });
  // The copy keeps the subject's read-only modes; npm writes into it.
  await run("chmod", ["-R", "u+w", work]);
  // npm's cache outside the clone, shared with the SDK's build of plugins.
  const cache = process.env.CTXBOX_NPM_CACHE ?? join(homedir(), ".cache", "ctxbox", "npm");
  const npm = (args) => run("npm", [...args, "--no-audit", "--no-fund", "--cache", cache], { cwd: work, timeoutMs: 600_000 });
  for (const step of [["ci"], ["run", "build:plugin"], ["pack", "--pack-destination", root]]) {
    const result = await npm(step);
    assert.equal(result.status, 0, `npm ${step.join(" ")} in ${work} failed:\n${result.stdout}\n${result.stderr}`);
  }
  const packed = readdirSync(root).find((name) => name.endsWith(".tgz"));
  assert.ok(packed, `npm pack left a .tgz in ${root}`);
  // Its build tools (~450 packages) are not needed past the package.
  rmSync(work, { recursive: true, force: true });
  return join(root, packed);
}

/** The summaries in lossless-claw's database at `file`, oldest first. */
function summaries(file) {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return db.prepare("SELECT kind, depth, content FROM summaries ORDER BY created_at, rowid").all().map((row) => ({ ...row }));
  } finally {
    db.close();
  }
}

/**
 * What the model was sent for each turn of the main session, by turn: its
 * messages after the system prompt, their characters, and the questions
 * they still hold verbatim (a user message that asks it).
 */
function turnPrompts(model) {
  const byTurn = new Map();
  for (const request of model.requests) {
    if (isSummarization(request) || sinceAssistant(request).some((message) => message.role === "tool")) continue;
    const turn = questionOf(sinceAssistant(request));
    if (turn === undefined || byTurn.has(turn)) continue;
    const messages = request.messages.filter((message) => message.role !== "system" && message.role !== "developer");
    const questions = messages
      .filter((message) => message.role === "user")
      .map((message) => textOf(message).trim().match(ASKED))
      .filter(Boolean)
      .map((asked) => Number(asked[3]));
    byTurn.set(turn, { messages: messages.length, chars: messages.map(textOf).join("").length, questions });
  }
  return byTurn;
}

/** A turn's prompt in the comparison table. */
const describe = (prompt) => (prompt ? `${prompt.messages} / ${prompt.chars} / ${prompt.questions.join(",")}` : "–");

/** The text of the search's tool result the model got. */
function toolResult(model) {
  const message = model.requests.flatMap(sinceAssistant).find((message) => message.role === "tool");
  return message ? textOf(message) : undefined;
}

/** Runs the conversation in `openclaw`; gives the tool result's text. */
async function converse(openclaw, session) {
  await openclaw.turn(session, `my first question number 1 mentions the word ${MARKER}`);
  for (let turn = 2; turn <= TURNS; turn++) await openclaw.turn(session, `ordinary question number ${turn}`);
  await openclaw.turn(session, "please search for the word from my first question");
}

test(
  `lossless-claw in-process and sandboxed in the real OpenClaw: ${TURNS} ordinary turns and a search, compared`,
  { timeout: 3_600_000 },
  async () => {
    const archive = await packedSubject();
    const inProcessModel = await startFakeModel({ reply: replies("lcm_grep") });
    const sandboxedModel = await startFakeModel({ reply: replies("ctxbox_lcm_grep") });
    const inProcess = new OpenClaw("lcm-in-process", ID, inProcessModel, {
      contextWindow: WINDOW,
      plugin: { archive, id: ID, config: SETTINGS },
    });
    const toml = (value) => `{ ${Object.entries(value).map(([key, v]) => `${key} = ${v}`).join(", ")} }`;
    // Registered by its manifest's id, as README's "Bring your OpenClaw engine" has it.
    const sandboxed = new OpenClaw("lcm-sandboxed", ID, sandboxedModel, {
      contextWindow: WINDOW,
      pluginDir: pluginDeclaring(["ctxbox_lcm_grep", "ctxbox_lcm_describe", "ctxbox_lcm_expand", "ctxbox_lcm_expand_query"], "plugin-with-lcm-tools"),
      engineDeadlineMs: LIMITS.callTimeoutMs,
      pluginTimeoutMs: 2 * LIMITS.callTimeoutMs,
      ctxboxToml: [
        ...(COMPILE_CACHE ? [`cacheDir = ${JSON.stringify(COMPILE_CACHE)}`] : []),
        "compileTimeoutMs = 1800000",
        `[plugins.engines.${ID}]`,
        `path = ${JSON.stringify(WASM)}`,
        `[plugins.entries.${ID}]`,
        `config = ${toml(SETTINGS)}`,
        `limits = ${toml(LIMITS)}`,
        "",
      ].join("\n"),
    });
    try {
      for (const openclaw of [inProcess, sandboxed]) {
        await openclaw.setUp();
        await openclaw.startGateway();
      }
      const session = "side-by-side";
      for (const [name, openclaw] of [["in-process", inProcess], ["sandboxed", sandboxed]]) {
        const begun = Date.now();
        await converse(openclaw, session);
        console.log(`# ${name}: ${TURNS + 1} turns took ${Date.now() - begun} ms`);
      }

      // What the model was sent each turn, side by side.
      const runs = [
        { name: "in-process", model: inProcessModel, db: join(inProcess.home, ".openclaw", "lcm.db") },
        { name: "sandboxed", model: sandboxedModel, db: globSync(join(sandboxed.dataDir, "sql", `${ID}-*`, "db-lcm.sqlite3"))[0] },
      ].map((run) => ({ ...run, turns: turnPrompts(run.model), summaries: summaries(run.db) }));
      const table = ["| turn | in-process: messages / chars / verbatim questions | sandboxed: messages / chars / verbatim questions |", "|---|---|---|"];
      for (let turn = 1; turn <= SEARCH; turn++) {
        const [ours, theirs] = runs.map((run) => run.turns.get(turn));
        table.push(`| ${turn} | ${describe(ours)} | ${describe(theirs)} |`);
      }
      for (const run of runs) table.push("", `${run.name}: ${run.summaries.length} summaries`, ...run.summaries.map((row) => `- ${row.kind}/${row.depth}: ${row.content.slice(0, 120).replace(/\s+/g, " ")}`));
      writeFileSync(join(root, "side-by-side.md"), `${table.join("\n")}\n`);
      console.log(table.map((line) => `# ${line}`).join("\n"));

      for (const run of runs) {
        for (let turn = 1; turn <= SEARCH; turn++) assert.ok(run.turns.has(turn), `${run.name}: turn ${turn} reached the model`);
        // The conversation outgrew the window: by the last ordinary turn the
        // first question is summarized away from what the model is sent.
        assert.ok(!run.turns.get(TURNS).questions.includes(1), `${run.name}: the first question is out of the last turn's prompt`);
        assert.ok(run.turns.get(TURNS).questions.includes(TURNS), `${run.name}: the newest question is in it`);
        const result = toolResult(run.model);
        assert.ok(result?.includes(MARKER), `${run.name}: lcm_grep found the first question in its database: ${result?.slice(0, 1000)}`);
        // OpenClaw's memory flush before a compaction is its own run; an
        // ordinary turn is never refused for want of room.
        const refusedTurns = run.model.refused.filter((request) => !isMemoryFlush(request));
        assert.deepEqual(refusedTurns.length, 0, `${run.name}: OpenClaw never asked the model for a turn's reply it had no room for`);
        console.log(`# ${run.name}: ${run.model.refused.length} memory-flush requests refused for want of room`);
      }
      const [inProcessRun, sandboxedRun] = runs;
      assert.equal(inProcessRun.model.refused.length, 0, "in-process, no memory flush was refused");
      // Until the first compaction, both send the model the same conversation.
      for (let turn = 1; turn <= SEARCH; turn++) {
        const [ours, theirs] = [inProcessRun.turns.get(turn), sandboxedRun.turns.get(turn)];
        if (ours.questions.length < turn || theirs.questions.length < turn) break;
        assert.deepEqual([theirs.messages, theirs.questions], [ours.messages, ours.questions], `turn ${turn}: the same messages`);
      }
      // Both summarized through OpenClaw's model, the same spans into the same summaries.
      assert.ok(inProcessRun.summaries.length > 0, "in-process, lossless-claw summarized");
      assert.ok(inProcessRun.summaries.every((row) => row.content.startsWith("Summary: the user asked questions")), "in-process, every summary is the model's");
      assert.deepEqual(sandboxedRun.summaries, inProcessRun.summaries, "the sandboxed build wrote the same summaries");
      // The sandboxed build: nothing served by legacy, and its after-turn
      // read the whole session as its transcript.
      const health = await sandboxed.health();
      assert.equal(health.status, 0, `nothing quarantined: ${JSON.stringify(health.records)}`);
      assert.doesNotMatch(sandboxed.gatewayLog, /transcript reconcile did not cover the transcript frontier/);
    } finally {
      // What each model was asked, for a look with CTXBOX_E2E_KEEP=1.
      for (const [name, model, openclaw] of [["in-process", inProcessModel, inProcess], ["sandboxed", sandboxedModel, sandboxed]]) {
        writeFileSync(join(root, `${name}-requests.json`), JSON.stringify(model.requests, null, 1));
        writeFileSync(join(root, `${name}-refused.json`), JSON.stringify(model.refused, null, 1));
        writeFileSync(join(root, `${name}-gateway.log`), openclaw.gatewayLog ?? "");
      }
      inProcess.stop();
      sandboxed.stop();
      await inProcessModel.close();
      await sandboxedModel.close();
    }
  },
);

/** The TypeScript SDK's build tool, in this clone. */
const TS_BUILD = join(PLUGIN_DIR, "..", "..", "guest-sdk-ts", "bin", "ctxbox-ts-build.mjs");

/**
 * An OpenClaw context-engine plugin, written here, whose engine owns
 * compaction and whose `compact` never returns.
 */
function loopingPlugin(dir) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "loop-claw", version: "1.0.0", type: "module", openclaw: { extensions: ["./index.js"] } }));
  writeFileSync(join(dir, "openclaw.plugin.json"), JSON.stringify({ id: "loop-claw", name: "Loop Claw", kind: "context-engine", configSchema: { type: "object" } }));
  writeFileSync(
    join(dir, "index.js"),
    `export default {
  id: "loop-claw",
  register(api) {
    api.registerContextEngine("loop-claw", () => ({
      info: { id: "loop-claw", name: "Loop Claw", version: "1.0.0", ownsCompaction: true },
      async ingest() { return { ingested: true }; },
      async assemble(params) { return { messages: params.messages, estimatedTokens: 0 }; },
      async afterTurn() {},
      async compact() { for (;;) {} },
    }));
  },
};
`,
  );
}

test("an OpenClaw plugin's compaction that loops forever is cut at the engine's limits and quarantined, and the turns go on", { timeout: 1_200_000 }, async () => {
  const source = join(root, "loop-claw");
  loopingPlugin(source);
  const wasm = join(root, "loop-claw.wasm");
  const built = await run(process.execPath, [TS_BUILD, "--openclaw-plugin", source, "-o", wasm], { timeoutMs: 600_000 });
  assert.equal(built.status, 0, `ctxbox-ts-build failed:\n${built.stdout}\n${built.stderr}`);
  // The conversation above, which OpenClaw asks the engine to compact about halfway.
  const model = await startFakeModel({ reply: (body) => (isMemoryFlush(body) ? "noted" : `answer: ${"the quick brown fox jumps over the lazy dog ".repeat(REPLY_REPEATS)}`) });
  const openclaw = new OpenClaw("loop-claw", wasm, model, {
    contextWindow: WINDOW,
    ctxboxToml: `${COMPILE_CACHE ? `cacheDir = ${JSON.stringify(COMPILE_CACHE)}\n` : ""}[quarantine]\nretryAfterSeconds = 600\n`,
  });
  try {
    await openclaw.setUp();
    // A workspace past OpenClaw's first-run ritual (a `memory/` folder makes
    // it "configured"): otherwise BOOTSTRAP.md's ~2,700 tokens stay in the
    // system prompt until OpenClaw notices, after its first memory flush,
    // that the workspace is configured and deletes it, a race that decides
    // whether the last turn before the compaction fits the window. loop-claw's
    // `assemble` answers every message: by OpenClaw's own estimate that turn
    // (the tenth) comes ~1,400 tokens short of the window without the file,
    // and a run where the file outlived the flush had the ninth refused.
    mkdirSync(join(openclaw.home, ".openclaw", "workspace", "memory"), { recursive: true });
    await openclaw.startGateway();
    const turns = 14;
    for (let turn = 1; turn <= turns; turn++) await openclaw.turn("loop", `ordinary question number ${turn}`);
    const compactions = openclaw.trace().filter((entry) => entry.method === "compact");
    assert.ok(compactions.length > 0, "OpenClaw asked the engine to compact during ordinary turns");
    const health = await openclaw.health();
    const record = health.records.find((entry) => entry.engineId === "loop-claw");
    assert.ok(record, `the engine is quarantined: ${JSON.stringify(health.records)}`);
    const shown = await run(CTXBOX_BIN, ["health", "--data-dir", openclaw.dataDir]);
    assert.match(shown.stdout, /loop-claw \(plugin:serve\)[\s\S]*failed in +compact/, shown.stdout);
    assert.equal(openclaw.commits("loop").length, turns, "every turn was committed");
    console.log(`# loop-claw: ${compactions.length} compactions asked; ${shown.stdout.split("\n").slice(0, 4).join(" | ")}`);
  } finally {
    openclaw.stop();
    await model.close();
  }
});

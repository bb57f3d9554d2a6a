// The SDK's unit tests: the test engine (test/engine), built with
// ctxbox-ts-build and transpiled by jco, run in Node against a fake host.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { before, describe, test } from "node:test";
import { pathToFileURL } from "node:url";
import { transpiledEngine } from "./build.mjs";
import { History, fakeHost } from "./fake-host.mjs";

let engine;
let tools;
let host;

before(async () => {
  const dir = transpiledEngine();
  const { instantiate } = await import(pathToFileURL(path.join(dir, "engine.js")).href);
  host = fakeHost();
  const instance = await instantiate(
    async (name) => WebAssembly.compile(await readFile(path.join(dir, name))),
    host.imports,
  );
  engine = instance.engine ?? instance["ctxbox:engine/engine@0.1.0"];
  tools = instance.tools ?? instance["ctxbox:engine/tools@0.1.0"];
});

const session = (sessionId) => ({ sessionId, sessionFile: `/sessions/${sessionId}.jsonl` });
const text = (value) => [{ tag: "text", val: value }];
const entry = (id, message) => ({ id, timestampMs: 1700000000000n, message });
const user = (id, value) => entry(id, { tag: "user", val: { content: text(value) } });
const call = (id) =>
  entry(id, {
    tag: "assistant",
    val: { content: [{ tag: "tool-call", val: { id: "c1", name: "read", argumentsJson: "{}" } }], stopReason: "tool-use" },
  });
const result = (id) =>
  entry(id, { tag: "tool-result", val: { toolCallId: "c1", toolName: "read", content: text("ok"), isError: false } });
const params = { availableTools: [] };
const errorOf = (run) => {
  try {
    run();
  } catch (error) {
    return error.payload;
  }
  assert.fail("expected the export to answer an error");
};
/** The JSON the test engine put into its one inserted message. */
const inserted = (answer) => JSON.parse(answer.items[0].val.val.content[0].val);

describe("defineEngine", () => {
  test("fills info's optional fields", () => {
    const info = engine.info();
    assert.equal(info.id, "sdk-test");
    assert.equal(info.ownsCompaction, false);
  });

  test("gives the reference's defaults", () => {
    const history = new History([user("a", "hi")]);
    assert.deepEqual(engine.bootstrap(session("s"), history), { bootstrapped: false, importedMessages: undefined, reason: undefined });
    assert.deepEqual(engine.maintain(session("s"), history, "turn", undefined), { changed: false, rewrittenEntries: 0, reason: undefined });
    assert.equal(engine.prepareSubagentSpawn({ parentSessionKey: "p", childSessionKey: "c", contextMode: "isolated" }), undefined);
    engine.rollbackSubagentSpawn("x");
    engine.onSubagentEnded("c", "completed");
    engine.dispose();
  });

  test("the default ingestBatch calls the engine's own ingest", () => {
    const answer = engine.ingestBatch(session("batch"), [user("one", "1"), user("skip-two", "2"), user("three", "3")], false);
    assert.equal(answer.ingestedCount, 2);
    assert.ok(host.state.has("ingested/batch/skip-two"));
  });

  test("the default afterTurn ingests the turn's new messages", () => {
    const history = new History([user("old", "0"), user("new1", "1"), user("new2", "2")]);
    engine.afterTurn(session("turn"), history, { prePromptMessageCount: 1, isHeartbeat: false });
    const keys = [...host.state.keys()].filter((key) => key.startsWith("ingested/turn/")).sort();
    assert.deepEqual(keys, ["ingested/turn/new1", "ingested/turn/new2"]);
  });

  test("the default compact delegates to the host", () => {
    const compactParams = { force: true, compactionTarget: "budget", tokenBudget: 100n };
    const answer = engine.compact(session("c"), new History([]), compactParams);
    assert.equal(answer.reason, "fake");
    assert.equal(host.delegated.at(-1).tokenBudget, 100n);
  });
});

describe("errors", () => {
  test("a thrown Error is internal with its message", () => {
    assert.deepEqual(errorOf(() => engine.assemble(session("throw-error"), new History([]), params)), {
      kind: "internal",
      message: "boom",
    });
  });

  test("an EngineFailure keeps its kind", () => {
    assert.deepEqual(errorOf(() => engine.assemble(session("throw-failure"), new History([]), params)), {
      kind: "invalid-input",
      message: "the input is wrong",
    });
  });

  test("a thrown non-Error is internal with its JSON", () => {
    const error = errorOf(() => engine.assemble(session("throw-value"), new History([]), params));
    assert.equal(error.kind, "internal");
    assert.match(error.message, /not an Error/);
  });

  test("a host error is host-failure naming the service", () => {
    const error = errorOf(() => engine.assemble(session("host-error"), new History([]), params));
    assert.equal(error.kind, "host-failure");
    assert.match(error.message, /host\.summarize failed \(unavailable\): no summarizer configured/);
  });
});

test("console writes to host.log at each level", () => {
  host.logs.length = 0;
  engine.assemble(session("console"), new History([]), params);
  assert.deepEqual(host.logs.slice(0, 2), [
    { level: "info", message: 'hello {"n":1,"big":"2"}' },
    { level: "warn", message: "careful" },
  ]);
  assert.equal(host.logs[2].level, "error");
  assert.match(host.logs[2].message, /Error: shown/);
  assert.ok(!host.logs.some((record) => record.message === "top level"), "nothing logged outside a call");
});

test("state helpers round-trip JSON with bigints, text, scans and deletes", () => {
  const answer = inserted(engine.assemble(session("state"), new History([]), params));
  assert.deepEqual(answer, { bigint: true, text: "héllo", scanned: ["k/json", "k/text"], deleted: true, missing: true });
});

test("history helpers page, count tokens and keep tool pairs whole", () => {
  // The fake history answers `range` two entries at a time: the helpers page.
  const history = new History([user("u", "question"), call("a"), result("r"), user("u2", "thanks"), user("u3", "bye")]);
  const answer = inserted(engine.assemble(session("history"), history, params));
  assert.equal(answer.read, 5);
  assert.deepEqual(answer.ids, ["a", "r"]);
  assert.deepEqual(answer.split, [null, null, [1, 3], null, null]);
  assert.equal(answer.text, "question");
  assert.equal(answer.tokens, 50);
  // 20 tokens: the last two entries; 30 would open on the result (2): after it.
  assert.deepEqual(answer.fitting, [5, 3, 3, 0]);
  assert.equal(answer.estimate, 35);
});

test("assemble answers keep ranges with a bigint estimate", () => {
  const answer = engine.assemble(session("plain"), new History([user("u", "hi")]), { ...params, tokenBudget: 10n });
  assert.deepEqual(answer.items, [{ tag: "keep", val: { start: 0, end: 1 } }]);
  assert.equal(answer.estimatedTokens, 10n);
});

/** Calls the test engine's tool `name` in session `sessionId` (which the fake index scopes to). */
const callTool = (sessionId, name, args = {}) => {
  host.session = sessionId;
  return tools.callTool(session(sessionId), name, typeof args === "string" ? args : JSON.stringify(args));
};

describe("tools", () => {
  test("listTools answers the definitions, parameters as JSON text", () => {
    const listed = tools.listTools();
    assert.deepEqual(listed.map((tool) => tool.name), [
      "remember", "forget", "recall", "ask", "ask-kind", "fail", "crash", "whoami", "defaults",
      "async-fail", "async-defaults", "node-layers", "note", "notes", "read-pages",
    ]);
    // Given as an object, written as JSON; given as JSON text, passed as is.
    assert.equal(listed[0].parameters, '{"type":"object","properties":{"id":{"type":"string"},"text":{"type":"string"}}}');
    assert.equal(listed[2].parameters, '{"type":"object","properties":{"query":{"type":"string"}}}');
    assert.equal(listed[0].description, "Indexes a document.");
  });

  test("callTool answers the tool's result, with the engine as this", () => {
    assert.equal(callTool("t", "whoami"), "sdk-test");
  });

  test("whatever callTool throws reaches the host as an engine-error", () => {
    assert.deepEqual(errorOf(() => callTool("t", "fail")), { kind: "invalid-input", message: "the arguments are wrong" });
    assert.deepEqual(errorOf(() => callTool("t", "crash")), { kind: "internal", message: "tool crashed" });
    assert.deepEqual(errorOf(() => callTool("t", "nope")), { kind: "unsupported", message: "no tool `nope`" });
  });

  test("toolArguments refuses anything but a JSON object as invalid-input", () => {
    assert.deepEqual(errorOf(() => callTool("t", "whoami", "[1, 2]")), {
      kind: "invalid-input",
      message: "the arguments are not a JSON object",
    });
    const error = errorOf(() => callTool("t", "whoami", "{not json"));
    assert.equal(error.kind, "invalid-input");
    assert.match(error.message, /^the arguments are not JSON: /);
  });

  test("an engine without tools lists none and refuses every call with unsupported", () => {
    assert.deepEqual(JSON.parse(callTool("t", "defaults")), {
      listed: [],
      called: { thrown: { kind: "unsupported", message: "no tool `grep`" } },
    });
  });
});

describe("host.complete", () => {
  test("asks the host's model with a one-prompt request", () => {
    host.modelError = undefined;
    const answer = JSON.parse(callTool("ask", "ask", { prompt: "we chose SQLite" }));
    assert.deepEqual(answer, {
      text: "[model] we chose SQLite",
      inputTokens: "8n",
      outputTokens: "6n",
      model: "fake-model",
      bigints: true,
      session: "ask",
    });
    assert.deepEqual(host.completions.at(-1), {
      messages: [{ role: "user", text: "we chose SQLite" }],
      system: "Answer briefly.",
      maxTokens: 50,
      purpose: "sdk test",
    });
  });

  test("a refusal is a HostFailure the engine can tell apart by kind", () => {
    for (const kind of ["quota-exceeded", "unavailable", "aborted", "failed"]) {
      host.modelError = kind;
      assert.equal(callTool("ask", "ask-kind", { prompt: "hi" }), `host said ${kind}`);
    }
    host.modelError = undefined;
    assert.equal(callTool("ask", "ask-kind", { prompt: "hi" }), "[model] hi");
  });

  test("an uncaught refusal is the export's host-failure, naming the service and the kind", () => {
    host.modelError = "quota-exceeded";
    assert.deepEqual(errorOf(() => callTool("ask", "ask", { prompt: "hi" })), {
      kind: "host-failure",
      message: "host.complete failed (quota-exceeded): the model refused (quota-exceeded)",
    });
    host.modelError = "unavailable";
    assert.deepEqual(errorOf(() => callTool("ask", "ask", { prompt: "hi" })), {
      kind: "host-failure",
      message: "host.complete failed (unavailable): no model configured",
    });
    host.modelError = undefined;
  });
});

describe("host.readTranscriptPage", () => {
  const line = (id, bytes) => ({ entry: user(id, id), bytes: BigInt(bytes) });
  const pages = (args) => {
    host.pageReads.length = 0;
    return JSON.parse(callTool("t", "read-pages", args));
  };
  // A page as the tool answers it, with entry ids for entries; byte counts
  // are numbers (a bigint would reach the test as text, "40n").
  const page = (cursor, ids, hasMore, serializedBytes, requiredBytes) => ({
    tag: "page",
    val: { cursor: String(cursor), entries: ids, hasMore, serializedBytes, ...(requiredBytes === undefined ? {} : { requiredBytes }) },
  });
  const read = (reads) => reads.map((r) => (r.tag === "page" ? { ...r, val: { ...r.val, entries: r.val.entries.map((e) => e.id) } } : r));

  test("an entry over maxBytes is named with the bytes it needs, as a number", () => {
    host.transcriptUnavailable = undefined;
    host.transcript = [line("a", 40), line("b", 300), line("c", 50)];
    assert.deepEqual(read(pages({ maxBytes: 100 })), [
      page(1, ["a"], true, 40),
      page(1, [], true, 0, 300),
    ]);
    assert.deepEqual(host.pageReads, [100n, 100n]);
  });

  test("growTo asks again with exactly what the entry needs", () => {
    host.transcript = [line("a", 40), line("b", 300), line("c", 50)];
    assert.deepEqual(read(pages({ maxBytes: 100, growTo: 1000 })), [
      page(1, ["a"], true, 40),
      page(2, ["b"], true, 300),
      page(3, ["c"], false, 50),
    ]);
    assert.deepEqual(host.pageReads, [100n, 100n, 300n, 100n]);
    // An entry larger than growTo is left to the engine.
    assert.deepEqual(read(pages({ maxBytes: 100, growTo: 200 })).at(-1), page(1, [], true, 0, 300));
  });

  test("a transcript the host cannot read now is unavailable, not an error", () => {
    host.transcriptUnavailable = "storage_unavailable: the disk failed";
    assert.deepEqual(pages({}), [{ tag: "unavailable", val: "storage_unavailable: the disk failed" }]);
    host.transcriptUnavailable = undefined;
  });
});

describe("host.index", () => {
  test("put, search (snippets, metadata, paging, scopes) and delete", () => {
    callTool("a", "remember", { id: "m1", text: "We chose SQLite for the cache", metadata: { message: 1 } });
    callTool("a", "remember", { id: "m2", text: "The cache holds 缓存 entries" });
    callTool("a", "remember", { id: "e1", text: "An engine-wide note on sqlite", scope: "engine" });
    callTool("b", "remember", { id: "m1", text: "Session b also mentions SQLite" });

    const found = JSON.parse(callTool("a", "recall", { query: "sqlite CACHE" }));
    assert.deepEqual(found, {
      hits: [{ id: "m1", sessionId: "a", score: 2, snippet: "We chose [SQLite] for the cache", metadata: '{"message":1}' }],
      hasMore: false,
    });
    // Pages.
    const first = JSON.parse(callTool("a", "recall", { query: "cache", limit: 1 }));
    const second = JSON.parse(callTool("a", "recall", { query: "cache", limit: 1, offset: 1 }));
    assert.deepEqual([first.hits.map((hit) => hit.id), first.hasMore], [["m1"], true]);
    assert.deepEqual([second.hits.map((hit) => hit.id), second.hasMore], [["m2"], false]);
    // CJK needs no spaces; the engine scope finds every session's documents.
    assert.deepEqual(JSON.parse(callTool("a", "recall", { query: "缓存" })).hits.map((hit) => hit.id), ["m2"]);
    const everywhere = JSON.parse(callTool("a", "recall", { query: "sqlite", scope: "engine", limit: 10 }));
    assert.deepEqual(everywhere.hits.map((hit) => `${hit.sessionId ?? "engine"}/${hit.id}`).sort(), ["a/m1", "b/m1", "engine/e1"]);
    // Delete answers whether the document was there.
    assert.equal(callTool("a", "forget", { id: "m1" }), "true");
    assert.equal(callTool("a", "forget", { id: "m1" }), "false");
    assert.deepEqual(JSON.parse(callTool("a", "recall", { query: "sqlite" })).hits, []);
  });

  test("quota-exceeded and unavailable reach the host as host-failure, naming the service", () => {
    host.indexQuotaBytes = 10;
    assert.deepEqual(errorOf(() => callTool("q", "remember", { id: "big", text: "more than ten bytes of text" })), {
      kind: "host-failure",
      message: "host.index.put failed (quota-exceeded): the index would grow past 10 bytes",
    });
    host.indexQuotaBytes = Infinity;
    host.indexError = "unavailable";
    assert.deepEqual(errorOf(() => callTool("q", "recall", { query: "anything" })), {
      kind: "host-failure",
      message: "host.index.search failed (unavailable): the index failed (unavailable)",
    });
    assert.match(errorOf(() => callTool("q", "forget", { id: "x" })).message, /^host\.index\.delete failed \(unavailable\)/);
    host.indexError = undefined;
  });
});

describe("DatabaseSync in the component", () => {
  test("stores, full-text searches and answers rows as node:sqlite does, over the sql import", () => {
    assert.deepEqual(JSON.parse(callTool("s", "note", { text: "SQLite keeps the cache warm" })), { changes: 1, lastInsertRowid: 1 });
    assert.deepEqual(JSON.parse(callTool("s", "note", { text: "lunch at noon" })), { changes: 1, lastInsertRowid: 2 });
    assert.deepEqual(JSON.parse(callTool("s", "notes", { query: "cache" })), {
      rows: [{ rowid: 1, body: "SQLite keeps the cache warm" }],
      columns: ["rowid", "body"],
    });
  });

  test("a failed statement reaches the host as an engine-error with SQLite's message", () => {
    const error = errorOf(() => callTool("s", "notes", { query: '"unterminated' }));
    assert.equal(error.kind, "internal");
    assert.equal(error.message, "unterminated string");
  });
});

describe("async methods", () => {
  test("a rejection is the export's engine-error, and the instance answers on", () => {
    assert.deepEqual(errorOf(() => engine.assemble(session("async-throw"), new History([]), params)), {
      kind: "internal",
      message: "late boom",
    });
    assert.deepEqual(errorOf(() => callTool("t", "async-fail")), { kind: "invalid-input", message: "late and wrong" });
    assert.equal(callTool("t", "whoami"), "sdk-test");
  });

  test("console writes after an await and a timer reach the host", () => {
    host.logs.length = 0;
    const answer = engine.assemble(session("async-console"), new History([]), params);
    assert.deepEqual(answer.items, []);
    assert.deepEqual(host.logs, [
      { level: "info", message: "before await" },
      { level: "info", message: "after await" },
      { level: "info", message: "after a timer" },
    ]);
  });

  test("the default ingestBatch awaits an async ingest, in order", () => {
    assert.deepEqual(JSON.parse(callTool("t", "async-defaults")), { batch: { ingestedCount: 2 }, seen: ["a", "skip", "b"] });
  });
});

describe("the Node layers in the component", () => {
  test("process, Buffer, setImmediate, Intl, crypto, path, util and AsyncLocalStorage work in StarlingMonkey as in Node", () => {
    host.config = JSON.stringify({ env: { LCM_TIMEZONE: "UTC", NOT_TEXT: 1 } });
    try {
      const answer = JSON.parse(callTool("t", "node-layers"));
      const stamp = new Intl.DateTimeFormat("en-CA", {
        timeZone: "UTC", year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hour12: false,
      }).format(new Date(Date.UTC(2026, 0, 5, 13, 7)));
      assert.deepEqual(answer, {
        env: { LCM_TIMEZONE: "UTC" },
        cwd: "/",
        order: ["now", "tick", "immediate"],
        base64: Buffer.from("héllo").toString("base64"),
        byteLength: Buffer.byteLength("世界"),
        sha256: createHash("sha256").update("abc").digest("hex"),
        sha1: createHash("sha1").update("abc").digest("base64"),
        uuid: true,
        path: path.join("/a/b", "../c", "d.db"),
        stored: "kept",
        stamp,
        zone: "UTC",
        number: (1234567.891).toLocaleString("en-US"),
        date: new Date(Date.UTC(2026, 0, 5, 13, 7, 9)).toLocaleString("en-US", { timeZone: "UTC" }),
        format: "cart has 3",
      });
    } finally {
      host.config = undefined;
    }
  });
});

// A test engine for the SDK's unit tests: each export exercises one SDK
// feature, chosen by the session id (for `assemble`) or the tool called, so
// the tests can drive it through the transpiled component with a fake host.
import {
  DatabaseSync,
  EngineFailure,
  assembled,
  defineEngine,
  fittingSuffix,
  host,
  insert,
  keep,
  messageText,
  promptRequest,
  readRange,
  splitPair,
  state,
  toArray,
  toolArguments,
  toolsOf,
  tokens,
  userText,
  type IndexScope,
  type Json,
  type SessionRef,
  type ToolInit,
  type TranscriptRead,
} from "@ctxbox/guest";

import { installNodeGlobals } from "@ctxbox/guest/node/globals";
import { createHash, randomUUID } from "@ctxbox/guest/node/crypto";
import { join } from "@ctxbox/guest/node/path";
import { AsyncLocalStorage } from "@ctxbox/guest/node/async_hooks";
import { format } from "@ctxbox/guest/node/util";

// The Node layers, installed while the build pre-initializes the module.
installNodeGlobals();

// Logged while the build pre-initializes the module: dropped, not a failed build.
console.log("top level");

/** The arguments the index tools take. */
interface IndexArguments {
  scope?: IndexScope;
  id?: string;
  text?: string;
  metadata?: unknown;
  query?: string;
  limit?: number;
  offset?: number;
}

const objectOf = (properties: Record<string, unknown>) => ({ type: "object", properties });

const TOOLS: ToolInit[] = [
  // Parameters as an object: the SDK writes them as JSON text.
  { name: "remember", description: "Indexes a document.", parameters: objectOf({ id: { type: "string" }, text: { type: "string" } }) },
  { name: "forget", description: "Removes a document.", parameters: objectOf({ id: { type: "string" } }) },
  // Parameters as JSON text: passed as they are.
  { name: "recall", description: "Searches the index.", parameters: '{"type":"object","properties":{"query":{"type":"string"}}}' },
  { name: "ask", description: "Asks the host's model.", parameters: objectOf({ prompt: { type: "string" } }) },
  { name: "ask-kind", description: "Asks the host's model; answers how it failed.", parameters: objectOf({ prompt: { type: "string" } }) },
  { name: "fail", description: "Throws an EngineFailure.", parameters: objectOf({}) },
  { name: "crash", description: "Throws an Error.", parameters: objectOf({}) },
  { name: "whoami", description: "Answers this.info().id.", parameters: objectOf({}) },
  { name: "defaults", description: "The tools export of an engine without tools.", parameters: objectOf({}) },
  { name: "async-fail", description: "Throws an EngineFailure after an await.", parameters: objectOf({}) },
  { name: "async-defaults", description: "The defaults over an async ingest.", parameters: objectOf({}) },
  { name: "node-layers", description: "Uses every Node layer of the SDK.", parameters: objectOf({}) },
  { name: "note", description: "Stores a note in SQL.", parameters: objectOf({ text: { type: "string" } }) },
  { name: "notes", description: "Full-text searches the notes.", parameters: objectOf({ query: { type: "string" } }) },
  { name: "read-pages", description: "Reads the transcript page by page.", parameters: objectOf({ maxBytes: { type: "number" }, growTo: { type: "number" } }) },
];

// Made at the top level (while the build pre-initializes the module): it
// reaches the host only with its first statement, during a call.
const notes = new DatabaseSync("notes.db");
let notesReady = false;

/** The notes table, made on first use. */
function notesDb(): DatabaseSync {
  if (!notesReady) {
    notes.exec("CREATE VIRTUAL TABLE IF NOT EXISTS notes USING fts5(body)");
    notesReady = true;
  }
  return notes;
}

/** A tool result: `value` as JSON, bigints as strings. */
const answer = (value: unknown): string => JSON.stringify(value, (_, v) => (typeof v === "bigint" ? `${v}n` : v));

/** What calling `run` threw, as JSON (the `engine-error` a guarded export throws). */
function thrown(run: () => unknown): unknown {
  try {
    return { answered: run() };
  } catch (error) {
    return { thrown: error };
  }
}

function callTool(this: { info(): { id: string } }, session: SessionRef, name: string, argumentsJson: Json): string | Promise<string> {
  const args = toolArguments<IndexArguments & { prompt?: string; maxBytes?: number; growTo?: number }>(argumentsJson);
  const scope = args.scope ?? "session";
  switch (name) {
    case "remember": {
      const metadata = args.metadata === undefined ? undefined : JSON.stringify(args.metadata);
      host.index.put(scope, { id: args.id ?? "", text: args.text ?? "", metadata });
      return "remembered";
    }
    case "forget":
      return answer(host.index.delete(scope, args.id ?? ""));
    case "recall":
      return answer(host.index.search(args.query ?? "", scope, { limit: args.limit, offset: args.offset }));
    case "ask": {
      const completion = host.complete(
        promptRequest(args.prompt ?? "", { maxTokens: 50, system: "Answer briefly.", purpose: "sdk test" }),
      );
      return answer({ ...completion, bigints: typeof completion.inputTokens === "bigint", session: session.sessionId });
    }
    case "ask-kind":
      try {
        return host.complete(promptRequest(args.prompt ?? "", { maxTokens: 50 })).text;
      } catch (error) {
        if (error instanceof Error && "hostError" in error) return `host said ${(error as { hostError: { kind: string } }).hostError.kind}`;
        throw error;
      }
    case "read-pages": {
      // Every answer until the transcript is read, or an entry is too large to grow to.
      const reads: TranscriptRead[] = [];
      let cursor: string | undefined;
      for (let round = 0; round < 10; round++) {
        const read = host.readTranscriptPage(cursor, { maxBytes: args.maxBytes, growTo: args.growTo });
        reads.push(read);
        if (read.tag !== "page" || !read.val.hasMore || read.val.requiredBytes !== undefined) break;
        cursor = read.val.cursor;
      }
      return answer(reads);
    }
    case "fail":
      throw new EngineFailure("invalid-input", "the arguments are wrong");
    case "crash":
      throw new Error("tool crashed");
    case "whoami":
      return this.info().id;
    case "async-fail":
      return (async () => {
        await new Promise((resolve) => setTimeout(resolve, 1));
        throw new EngineFailure("invalid-input", "late and wrong");
      })();
    case "async-defaults":
      return (async () => {
        const seen: string[] = [];
        const lazy = defineEngine({
          info: { id: "lazy", name: "lazy" },
          assemble: () => assembled([], 0),
          async ingest(_session, entry) {
            await Promise.resolve();
            seen.push(entry.id);
            return { ingested: entry.id !== "skip" };
          },
        });
        const entries = ["a", "skip", "b"].map((id) => ({ id, timestampMs: 0n, message: { tag: "user" as const, val: { content: [] } } }));
        const batch = await lazy.ingestBatch(session, entries, false);
        return answer({ batch, seen });
      })();
    case "node-layers":
      return (async () => {
        const g = globalThis as unknown as {
          process: { env: Record<string, string>; nextTick(f: () => void): void; cwd(): string };
          Buffer: { from(text: string, encoding?: string): { toString(encoding?: string): string }; byteLength(text: string): number };
          setImmediate(f: () => void): unknown;
        };
        const order: string[] = [];
        await new Promise<void>((done) => {
          g.setImmediate(() => {
            order.push("immediate");
            done();
          });
          g.process.nextTick(() => order.push("tick"));
          order.push("now");
        });
        const storage = new AsyncLocalStorage<string>();
        const stored = await storage.run("kept", async () => {
          await Promise.resolve();
          return storage.getStore();
        });
        const stamp = new Intl.DateTimeFormat("en-CA", {
          timeZone: "UTC", year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hour12: false,
        }).format(new Date(Date.UTC(2026, 0, 5, 13, 7)));
        return answer({
          env: g.process.env,
          cwd: g.process.cwd(),
          order,
          base64: g.Buffer.from("héllo").toString("base64"),
          byteLength: g.Buffer.byteLength("世界"),
          sha256: createHash("sha256").update("abc").digest("hex"),
          sha1: createHash("sha1").update("abc").digest("base64"),
          uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(randomUUID()),
          path: join("/a/b", "../c", "d.db"),
          stored,
          stamp,
          zone: new Intl.DateTimeFormat().resolvedOptions().timeZone,
          number: (1234567.891).toLocaleString("en-US"),
          date: new Date(Date.UTC(2026, 0, 5, 13, 7, 9)).toLocaleString("en-US", { timeZone: "UTC" }),
          format: format("%s has %d", "cart", 3),
        });
      })();
    case "note":
      return answer(notesDb().prepare("INSERT INTO notes(body) VALUES (:text)").run({ text: args.text ?? "" }));
    case "notes": {
      const search = notesDb().prepare("SELECT rowid, body FROM notes WHERE notes MATCH ? ORDER BY rank");
      return answer({ rows: search.all(args.query ?? ""), columns: search.columns().map((column) => column.name) });
    }
    case "defaults": {
      const plain = toolsOf(defineEngine({ info: { id: "plain", name: "plain" }, assemble: () => assembled([], 0) }));
      return answer({ listed: plain.listTools(), called: thrown(() => plain.callTool(session, "grep", "{}")) });
    }
  }
  throw new EngineFailure("unsupported", `no tool \`${name}\``);
}

export const engine = defineEngine({
  info: () => ({ id: "sdk-test", name: "SDK test engine" }),

  tools: () => TOOLS,
  callTool,

  ingest(session, entry) {
    state.setJson(`ingested/${session.sessionId}/${entry.id}`, entry);
    return { ingested: !entry.id.startsWith("skip") };
  },

  assemble(session, history, params) {
    switch (session.sessionId) {
      case "async-throw":
        return (async () => {
          await Promise.resolve();
          throw new Error("late boom");
        })();
      case "async-console":
        return (async () => {
          console.info("before await");
          await Promise.resolve();
          console.info("after await");
          await new Promise((resolve) => setTimeout(resolve, 1));
          console.info("after a timer");
          return assembled([], 0);
        })();
      case "throw-error":
        throw new Error("boom");
      case "throw-failure":
        throw new EngineFailure("invalid-input", "the input is wrong");
      case "throw-value":
        throw { why: "not an Error" };
      case "host-error":
        host.summarize("text", { maxTokens: 10 });
        break;
      case "console":
        console.log("hello", { n: 1, big: 2n });
        console.warn("careful");
        console.error(new Error("shown"));
        break;
      case "state": {
        state.setJson("k/json", { when: 1700000000000n, list: [1, "two"] });
        state.setText("k/text", "héllo");
        const back = state.getJson<{ when: bigint }>("k/json");
        const scanned = state.scan("k/").map((entry) => entry.key);
        const summary = JSON.stringify({
          bigint: typeof back?.when === "bigint" && back.when === 1700000000000n,
          text: state.getText("k/text"),
          scanned,
          deleted: state.delete("k/text"),
          missing: state.get("k/none") === undefined,
        });
        return assembled([insert(userText(summary))], 1);
      }
      case "history": {
        const all = toArray(history);
        const summary = JSON.stringify({
          read: all.length,
          ids: readRange(history, 1, 3).map((entry) => entry.id),
          split: [0, 1, 2, 3, 4].map((cut) => splitPair(history, cut) ?? null),
          text: all[0] ? messageText(all[0].message) : "",
          tokens: tokens(history, 0, history.len()),
          fitting: [0, 20, 30, Infinity].map((max) => fittingSuffix(history, max)),
          estimate: host.estimateTokens(all),
        });
        return assembled([insert(userText(summary))], 1);
      }
    }
    const len = history.len();
    const budget = Number(params.tokenBudget ?? 0n);
    return assembled([keep(0, len)], tokens(history, 0, len) + budget * 0);
  },
});

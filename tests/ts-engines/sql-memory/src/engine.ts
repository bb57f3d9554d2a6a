// A test engine for the SQL power, written as node:sqlite code would be:
// every ingested message goes into its own SQL database (a table, an FTS5
// index kept by a trigger, a schema version in `user_version`), each batch
// in its own BEGIN … COMMIT; `assemble` keeps the newest messages that fit;
// two tools read the database back: `search` (FTS5, trigram, so Chinese
// needs no segmenting) and `count`.
import {
  DatabaseSync,
  EngineFailure,
  assembled,
  defineEngine,
  fittingSuffix,
  keep,
  messageText,
  tokens,
  toolArguments,
  type MessageEntry,
  type SessionRef,
} from "@ctxbox/guest";

// Connects nothing yet: the build pre-initializes this module without a host.
const db = new DatabaseSync("/var/lib/sql-memory/memory.db");

/** The schema, one migration per `user_version`. */
const MIGRATIONS = [
  `CREATE TABLE messages (
     id INTEGER PRIMARY KEY,
     session TEXT NOT NULL,
     entry_id TEXT NOT NULL,
     role TEXT NOT NULL,
     body TEXT NOT NULL,
     UNIQUE (session, entry_id)
   );
   CREATE VIRTUAL TABLE messages_fts USING fts5(body, content = 'messages', content_rowid = 'id', tokenize = 'trigram');
   CREATE TRIGGER messages_indexed AFTER INSERT ON messages BEGIN
     INSERT INTO messages_fts (rowid, body) VALUES (new.id, new.body);
   END;`,
];

/** The database, migrated to the newest schema (once per instance). */
let migrated = false;
function database(): DatabaseSync {
  if (!migrated) {
    const { user_version: version } = db.prepare("PRAGMA user_version").get() as { user_version: number };
    for (let next = version; next < MIGRATIONS.length; next += 1) {
      db.exec(MIGRATIONS[next] as string);
      db.exec(`PRAGMA user_version = ${next + 1}`);
    }
    migrated = true;
  }
  return db;
}

/** Stores `entry` (every one, with its text blocks); answers whether it was new. */
function store(session: SessionRef, entry: MessageEntry): boolean {
  const body = messageText(entry.message);
  const insert = database().prepare(
    "INSERT OR IGNORE INTO messages (session, entry_id, role, body) VALUES (:session, :entry, :role, :body)",
  );
  return insert.run({ session: session.sessionId, entry: entry.id, role: entry.message.tag, body }).changes === 1;
}

/** An FTS5 query matching every word of `text` as written (each quoted). */
const ftsQuery = (text: string): string =>
  text
    .split(/\s+/)
    .filter((word) => word !== "")
    .map((word) => `"${word.replaceAll('"', '""')}"`)
    .join(" ");

export const engine = defineEngine({
  info: { id: "sql-memory", name: "SQL memory (test)", version: "0.1.0" },

  ingest(session, entry) {
    return { ingested: store(session, entry) };
  },

  ingestBatch(session, entries) {
    const db = database();
    db.exec("BEGIN");
    let ingestedCount = 0;
    try {
      for (const entry of entries) if (store(session, entry)) ingestedCount += 1;
      db.exec("COMMIT");
    } catch (error) {
      if (db.isTransaction) db.exec("ROLLBACK");
      throw error;
    }
    return { ingestedCount };
  },

  assemble(_session, history, params) {
    const len = history.len();
    const budget = params.tokenBudget === undefined ? Infinity : Number(params.tokenBudget);
    const start = fittingSuffix(history, budget);
    return assembled([keep(start, len)], tokens(history, start, len));
  },

  tools: [
    {
      name: "search",
      description: "Messages of this session containing every given word (3 characters or more).",
      parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
    },
    {
      name: "count",
      description: "How many messages the engine keeps, in this session and in all.",
      parameters: { type: "object", properties: {} },
    },
  ],

  callTool(session, name, argumentsJson) {
    const args = toolArguments<{ query?: unknown }>(argumentsJson);
    switch (name) {
      case "search": {
        if (typeof args.query !== "string" || args.query.trim() === "") {
          throw new EngineFailure("invalid-input", "`query` must be a non-empty string");
        }
        const hits = database()
          .prepare(
            `SELECT m.entry_id AS id, m.role AS role, snippet(messages_fts, 0, '[', ']', '…', 12) AS snippet
               FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
              WHERE messages_fts MATCH ? AND m.session = ?
              ORDER BY bm25(messages_fts) LIMIT 20`,
          )
          .all(ftsQuery(args.query), session.sessionId);
        return JSON.stringify(hits);
      }
      case "count": {
        const count = database().prepare(
          "SELECT count(*) AS total, count(*) FILTER (WHERE session = ?) AS session FROM messages",
        );
        return JSON.stringify(count.get(session.sessionId));
      }
    }
    throw new EngineFailure("unsupported", `no tool \`${name}\``);
  },
});

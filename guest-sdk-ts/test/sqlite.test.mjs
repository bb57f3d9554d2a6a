// `DatabaseSync` against the real node:sqlite: every scenario runs the same
// statements on node:sqlite (an in-memory database) and on the SDK's
// `DatabaseSync` (its TypeScript source in Node, over fake-sql.mjs, which is
// node:sqlite behind the `sql` contract: a double of the transport only),
// and the answers, rows and errors must be the same. Then what only the SDK
// does: names, limits, refusals, calls. Needs Node 22.18 or later (ci.sh
// picks one).
import assert from "node:assert/strict";
import { DatabaseSync as NodeDatabase } from "node:sqlite";
import { describe, test } from "node:test";
import { fakeSql } from "./fake-sql.mjs";
import { sdkModule } from "./sdk-source.mjs";

const { DatabaseSync, databaseName } = await sdkModule("sqlite");
const { duringCall } = await sdkModule("console");

let fresh = 0;
/** A new SDK database on a fresh fake database. */
const sdkDatabase = (options) => new DatabaseSync(`compare-${++fresh}.db`, options);

/** What `run` answered or threw, in a form both sides can be compared in. */
function outcome(run) {
  try {
    return { answered: run() };
  } catch (error) {
    const { name, code, errcode, errstr, message } = error;
    return { threw: { name, code, errcode, errstr, message } };
  }
}

/**
 * Runs `scenario(db)` on node:sqlite and on the SDK (inside a call) and
 * checks they answer alike; returns node's answer for further checks.
 */
function same(scenario, options) {
  const node = outcome(() => scenario(options ? new NodeDatabase(":memory:", options) : new NodeDatabase(":memory:")));
  const sdk = duringCall(() => outcome(() => scenario(sdkDatabase(options))));
  assert.deepStrictEqual(sdk, node);
  return node;
}

const TABLE = "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, score REAL, data BLOB, n INTEGER)";

describe("the same as node:sqlite", () => {
  test("every type written and read back, with run's changes and rowids", () => {
    const { answered } = same((db) => {
      db.exec(TABLE);
      const insert = db.prepare("INSERT INTO t(name, score, data, n) VALUES (?, ?, ?, ?)");
      const runs = [
        insert.run("a", 1.5, new Uint8Array([1, 2, 3]), 7n),
        insert.run("b", -0, null, 2 ** 40),
        insert.run("c", 3, Buffer.from("hi"), -5n),
        insert.run("d", undefined, new DataView(new ArrayBuffer(2)), true),
      ];
      const select = db.prepare("SELECT *, typeof(n) AS nt, typeof(score) AS st FROM t ORDER BY id");
      return { runs, all: select.all(), first: select.get(), none: db.prepare("SELECT * FROM t WHERE id = ?").get(99) };
    });
    assert.equal(answered.all.length, 4);
    assert.equal(answered.first.name, "a");
    assert.equal(answered.none, undefined);
  });

  test("named parameters: bare, with each prefix, unknown, and bare names off", () => {
    same((db) => {
      db.exec(TABLE);
      const insert = db.prepare("INSERT INTO t(name, score, n) VALUES (:name, @score, $n)");
      insert.run({ name: "bare", score: 1, n: 1n });
      insert.run({ ":name": "prefixed", "@score": 2, $n: 2n });
      const rows = db.prepare("SELECT name, score, n FROM t ORDER BY id").all();
      const unknown = outcome(() => insert.run({ name: "x", score: 1, n: 1n, extra: 1 }));
      const strict = db.prepare("SELECT :a AS a");
      strict.setAllowBareNamedParameters(false);
      const bareOff = outcome(() => strict.get({ a: 1 }));
      const prefixedOk = strict.get({ ":a": 1 });
      const lenient = db.prepare("SELECT :a AS a, :b AS b");
      lenient.setAllowUnknownNamedParameters(true);
      const unknownOk = lenient.get({ a: "x", zzz: 2 });
      const repeated = db.prepare("SELECT :a + :a AS twice").get({ a: 21 });
      return { rows, unknown, bareOff, prefixedOk, unknownOk, repeated };
    });
  });

  test("positional parameters: fewer are NULL, ?NNN, and too many fail with SQLite's range error", () => {
    same((db) => ({
      fewer: db.prepare("SELECT ? AS a, ? AS b").get(1),
      numbered: db.prepare("SELECT ?2 AS two, ?1 AS one").get("x", "y"),
      none: db.prepare("SELECT ? AS a").get(),
      tooMany: outcome(() => db.prepare("SELECT ? AS a").get(1, 2)),
      symbol: outcome(() => db.prepare("SELECT ? AS a").get(Symbol("s"))),
      hugeBigInt: outcome(() => db.prepare("SELECT ? AS a").get(2n ** 63n)),
      nan: db.prepare("SELECT ? AS a").get(NaN),
      booleans: db.prepare("SELECT ? AS t, ? AS f").get(true, false),
    }));
  });

  test("big integers: an error as a number, bigints when asked, per statement or database", () => {
    same((db) => {
      const big = "SELECT 9007199254740993 AS big, 1 AS one";
      const plain = outcome(() => db.prepare(big).get());
      const statement = db.prepare(big);
      statement.setReadBigInts(true);
      db.exec("CREATE TABLE k(a)");
      const insert = db.prepare("INSERT INTO k VALUES (1)");
      insert.setReadBigInts(true);
      return { plain, asked: statement.get(), run: insert.run() };
    });
    same((db) => db.prepare("SELECT 9007199254740993 AS big, 2.5 AS r").all(), { readBigInts: true });
  });

  test("rows as arrays, duplicate column names, a SELECT that is run", () => {
    same((db) => {
      const arrays = db.prepare("SELECT 1 AS a, 'x' AS b");
      arrays.setReturnArrays(true);
      return {
        arrays: [arrays.get(), arrays.all()],
        duplicate: db.prepare("SELECT 1 AS a, 2 AS a").get(),
        ran: db.prepare("SELECT 1").run(),
      };
    });
    same((db) => db.prepare("SELECT 1 AS a UNION ALL SELECT 2").all(), { returnArrays: true });
  });

  test("errors carry ERR_SQLITE_ERROR, SQLite's code, errstr and message", () => {
    same((db) => {
      db.exec(TABLE);
      db.prepare("INSERT INTO t(name) VALUES ('a')").run();
      return {
        syntax: outcome(() => db.exec("SELEC 1")),
        noTable: outcome(() => db.prepare("SELECT * FROM nope")),
        unique: outcome(() => db.prepare("INSERT INTO t(name) VALUES ('a')").run()),
        notNull: outcome(() => db.prepare("INSERT INTO t(name) VALUES (NULL)").run()),
        empty: outcome(() => db.prepare("  -- nothing\n ;")),
        notString: outcome(() => db.exec(42)),
        batchStopped: outcome(() => db.exec("CREATE TABLE y(a); INSERT INTO nope VALUES (1); CREATE TABLE z(a)")),
        tables: db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all(),
      };
    });
  });

  test("iterate yields every row; columns() names them", () => {
    same((db) => {
      db.exec("CREATE TABLE n(v INTEGER); INSERT INTO n VALUES (1), (2), (3)");
      const statement = db.prepare("SELECT v, v * 2 AS double FROM n WHERE v >= ? ORDER BY v");
      return {
        rows: [...statement.iterate(2)],
        names: statement.columns().map((column) => column.name),
        noColumns: db.prepare("INSERT INTO n VALUES (9)").columns(),
      };
    });
  });

  test("transactions, savepoints and isTransaction", () => {
    same((db) => {
      db.exec("CREATE TABLE a(v)");
      const seen = [db.isTransaction];
      db.exec("BEGIN");
      seen.push(db.isTransaction);
      db.prepare("INSERT INTO a VALUES (1)").run();
      db.exec("SAVEPOINT s1; INSERT INTO a VALUES (2)");
      db.exec("ROLLBACK TO s1");
      seen.push(db.isTransaction);
      db.exec("RELEASE s1; COMMIT");
      seen.push(db.isTransaction);
      db.exec("BEGIN IMMEDIATE; INSERT INTO a VALUES (3)");
      db.prepare("ROLLBACK").run();
      seen.push(db.isTransaction);
      db.exec(`CREATE TRIGGER tr AFTER INSERT ON a BEGIN
                 SELECT CASE WHEN new.v < 0 THEN RAISE(ABORT, 'negative; no') END;
               END; BEGIN`);
      seen.push(db.isTransaction);
      db.exec("END");
      return { seen, rows: db.prepare("SELECT v FROM a").all(), negative: outcome(() => db.exec("INSERT INTO a VALUES (-1)")) };
    });
  });

  test("FTS5: match, bm25 order, snippet, and a bad query's error", () => {
    same((db) => {
      db.exec("CREATE VIRTUAL TABLE docs USING fts5(title, body)");
      const insert = db.prepare("INSERT INTO docs(title, body) VALUES (?, ?)");
      insert.run("cache", "we chose SQLite for the cache; the cache is warm");
      insert.run("lunch", "sandwiches at noon");
      insert.run("disk", "SQLite keeps pages on disk");
      const search = db.prepare(
        "SELECT title, snippet(docs, 1, '[', ']', '…', 4) AS snip FROM docs WHERE docs MATCH ? ORDER BY bm25(docs)",
      );
      return { sqlite: search.all("sqlite"), cache: search.all("cache"), bad: outcome(() => search.all('"unterminated')) };
    });
  });

  test("sourceSQL and expandedSQL", () => {
    same((db) => {
      const statement = db.prepare("SELECT ? AS a, :b AS b, 'it''s ?' AS c -- :not\n");
      statement.get({ b: "o'k" });
      const values = db.prepare("SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?");
      values.get(5n, 1.5, 1, 1e20, 1e-5, 123456.789, -2.5e-7, new Uint8Array([0, 255]), null);
      const unbound = db.prepare("SELECT ?1 AS x, ?1 AS y");
      const several = db.prepare("  SELECT ? AS a ; SELECT 2 -- the rest is ignored");
      const first = [several.get(7), several.sourceSQL, several.expandedSQL];
      return { first, source: statement.sourceSQL, expanded: statement.expandedSQL, values: values.expandedSQL, unbound: unbound.expandedSQL };
    });
  });

  test("close: closed databases and finalized statements refuse, open() again works", () => {
    same((db) => {
      const statement = db.prepare("SELECT 1 AS one");
      const before = db.isOpen;
      db.close();
      return {
        before,
        after: db.isOpen,
        exec: outcome(() => db.exec("SELECT 1")),
        statement: outcome(() => statement.get()),
        again: outcome(() => db.close()),
        transaction: outcome(() => db.isTransaction),
        reopened: (db.open(), db.isOpen),
        twice: outcome(() => db.open()),
      };
    });
    same((db) => [db.isOpen, (db.open(), db.prepare("SELECT 2 AS two").get())], { open: false });
  });

  test("foreign keys are enforced, as node:sqlite does by default", () => {
    same((db) => {
      db.exec("CREATE TABLE p(id INTEGER PRIMARY KEY); CREATE TABLE c(p INTEGER REFERENCES p(id))");
      return { fk: db.prepare("PRAGMA foreign_keys").get(), insert: outcome(() => db.exec("INSERT INTO c VALUES (9)")) };
    });
  });
});

describe("what only the SDK does", () => {
  test("a path names one of the engine's databases", () => {
    assert.equal(databaseName(undefined), undefined);
    assert.equal(databaseName(""), undefined);
    assert.equal(databaseName("/home/me/.openclaw/lcm.db"), "lcm");
    assert.equal(databaseName("lcm.sqlite"), "lcm");
    assert.equal(databaseName("file:agent one.db?mode=rwc"), "agent_one");
    assert.equal(databaseName(new TextEncoder().encode("a/b/notes")), "notes");
    assert.equal(databaseName(new URL("file:///tmp/x%20y.db")), "x_y");
    assert.equal(databaseName(`${"n".repeat(100)}.db`), "n".repeat(64));
    assert.throws(() => databaseName(":memory:"), { code: "ERR_INVALID_ARG_VALUE", message: /in-memory databases are not offered/ });
    assert.throws(() => databaseName("a\0b"), { code: "ERR_INVALID_ARG_TYPE" });
    assert.throws(() => databaseName(7), { code: "ERR_INVALID_ARG_TYPE" });
    assert.throws(() => new DatabaseSync("x.db", { readOnly: true }), { code: "ERR_INVALID_ARG_VALUE", message: /readOnly/ });
    assert.throws(() => new DatabaseSync("x.db", { enableForeignKeyConstraints: false }), {
      code: "ERR_INVALID_ARG_VALUE",
      message: /always enforces foreign keys/,
    });
  });

  test("the database is opened with its first statement, by name, never outside a call", () => {
    fakeSql.calls.length = 0;
    const db = new DatabaseSync("/data/agents/main.db");
    assert.deepEqual(fakeSql.calls, [], "the constructor reaches no host");
    assert.throws(() => db.exec("SELECT 1"), { code: "ERR_INVALID_STATE", message: /only during a call/ });
    duringCall(() => db.exec("CREATE TABLE IF NOT EXISTS m(v)"));
    assert.deepEqual(fakeSql.calls.slice(0, 2), [
      { op: "open", name: "main" },
      { op: "executeBatch", sql: "CREATE TABLE IF NOT EXISTS m(v)" },
    ]);
    duringCall(() => new DatabaseSync("main.sqlite").prepare("INSERT INTO m VALUES (1)").run());
    assert.deepEqual(duringCall(() => new DatabaseSync("main").prepare("SELECT v FROM m").all()), [{ __proto__: null, v: 1 }]);
    duringCall(() => new DatabaseSync().exec("CREATE TABLE own(v)"));
    assert.equal(fakeSql.calls.filter((call) => call.op === "open" && call.name === undefined).length, 1);
  });

  test("an answer the host cut short is an error, never fewer rows; get() asks for one row", () => {
    const db = sdkDatabase();
    duringCall(() => {
      db.exec("CREATE TABLE many(v); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50) INSERT INTO many SELECT x FROM c");
      fakeSql.maxRows = 20;
      try {
        const statement = db.prepare("SELECT v FROM many ORDER BY v");
        for (const run of [() => statement.all(), () => [...statement.iterate()]]) {
          assert.throws(run, (error) => {
            assert.equal(error.code, "ERR_SQLITE_ERROR");
            assert.equal(error.errcode, 18);
            assert.equal(error.kind, "limit");
            assert.match(error.message, /more rows than the host answers at once \(it sent 20;.*LIMIT and OFFSET/);
            return true;
          });
        }
        fakeSql.calls.length = 0;
        assert.deepEqual(statement.get(), { __proto__: null, v: 1 });
        assert.equal(fakeSql.calls.at(-1).maxRows, 1);
        assert.equal(db.prepare("SELECT v FROM many LIMIT 20").all().length, 20);
      } finally {
        fakeSql.maxRows = 10_000;
      }
    });
  });

  test("the host's refusals are ERR_SQLITE_ERROR with the nearest SQLite code and the contract's kind", () => {
    duringCall(() => {
      const db = sdkDatabase();
      assert.throws(() => db.exec("ATTACH 'other.db' AS o"), {
        code: "ERR_SQLITE_ERROR",
        errcode: 23,
        errstr: "authorization denied",
        kind: "refused",
        message: "refused: the host refuses ATTACH and DETACH",
      });
      assert.throws(() => db.prepare("SELEC"), { errcode: 1, kind: "sqlite", errstr: "SQL logic error" });
      db.enableLoadExtension(false);
      assert.throws(() => db.enableLoadExtension(true), { errcode: 23, kind: "refused" });
      assert.throws(() => db.loadExtension("x.so"), { errcode: 23, kind: "refused" });
    });
  });

  test("setting a pragma the host tunes itself is answered as done; reading it and other pragmas reach the host", () => {
    const saved = fakeSql.refuse;
    // The host's refusal of those settings (its authorizer), mimicked.
    fakeSql.refuse = /^\s*(ATTACH|DETACH)\b|^\s*PRAGMA\s+(journal_mode|busy_timeout|cache_size|synchronous|temp_store|optimize)\b(?!\s*;?\s*$)|^\s*PRAGMA\s+optimize/i;
    try {
      duringCall(() => {
        const db = sdkDatabase();
        // What lossless-claw runs when it opens its database.
        for (const pragma of [
          "PRAGMA journal_mode = WAL", "PRAGMA busy_timeout = 30000", "PRAGMA cache_size = -65536",
          "PRAGMA synchronous = NORMAL", "PRAGMA temp_store = MEMORY;", "PRAGMA optimize", "pragma main.mmap_size(0)",
        ]) {
          db.exec(pragma);
        }
        db.exec("PRAGMA foreign_keys = ON");
        assert.equal(db.prepare("PRAGMA foreign_keys").get().foreign_keys, 1);
        assert.equal(typeof db.prepare("PRAGMA journal_mode").get().journal_mode, "string");
        // Sent to the host, the setting is refused (`exec` alone answers it).
        assert.throws(() => db.prepare("PRAGMA journal_mode = WAL").run(), { kind: "refused" });
      });
    } finally {
      fakeSql.refuse = saved;
    }
  });

  test("isTransaction: a new call starts outside the last call's transaction", () => {
    const db = sdkDatabase();
    duringCall(() => {
      db.exec("BEGIN");
      assert.equal(db.isTransaction, true);
    });
    duringCall(() => assert.equal(db.isTransaction, false));
  });

  test("named and positional values in one call bind as node:sqlite binds them; the host is sent every index", () => {
    same((db) => {
      const statement = db.prepare("SELECT :a AS a, ? AS b, ?5 AS c");
      return [[{ a: 1 }, 2, 3], [{ a: 1 }, 2, 3, 4], [{ a: 1 }, 2, 3, 4, 5], [1, 2], [{ a: 9 }], [], [{ a: 1 }, 2, 3, 4, 5, 6]].map(
        (args) => outcome(() => [statement.get(...args), statement.expandedSQL]),
      );
    });
    duringCall(() => {
      const statement = sdkDatabase().prepare("SELECT :a AS a, ? AS b, ?5 AS c");
      fakeSql.calls.length = 0;
      statement.get({ a: 1 }, 2);
      assert.deepEqual(fakeSql.calls[0].params, {
        tag: "positional",
        val: [{ tag: "real", val: 1 }, { tag: "real", val: 2 }, { tag: "null" }, { tag: "null" }, { tag: "null" }],
      });
    });
  });

  test("statements prepared on every call share one host statement per text, and at most 128 stay compiled", () => {
    duringCall(() => {
      const db = sdkDatabase();
      db.exec("CREATE TABLE t(n INTEGER)");
      const live = fakeSql.liveStatements;
      const prepared = fakeSql.calls.filter((call) => call.op === "prepare").length;
      for (let i = 0; i < 2000; i++) db.prepare("INSERT INTO t VALUES (?)").run(i);
      assert.equal(fakeSql.calls.filter((call) => call.op === "prepare").length, prepared + 1);
      const first = db.prepare("SELECT count(*) AS n FROM t WHERE n >= 0");
      for (let i = 0; i < 300; i++) db.prepare(`SELECT ${i} AS n`).get();
      assert.equal(fakeSql.liveStatements, live + 128);
      // Its host statement was dropped; it is compiled again when run.
      assert.deepEqual({ ...first.get() }, { n: 2000 });
      db.close();
      assert.equal(fakeSql.liveStatements, live);
      assert.throws(() => first.get(), { code: "ERR_INVALID_STATE" });
    });
  });

  test("every parameter is sent on every run, so no value outlives its run (as node:sqlite clears them)", () => {
    same((db) => {
      const named = db.prepare("SELECT :a AS a, :b AS b");
      const mixed = db.prepare("SELECT :a AS a, ? AS c");
      return [named.get({ a: 1 }), named.get({ b: 2 }), named.get(), mixed.get({ a: 1 }, 5), mixed.get({ a: 3 }), mixed.get()];
    });
    duringCall(() => {
      const statement = sdkDatabase().prepare("SELECT :a AS a, @b AS b, :a AS again");
      fakeSql.calls.length = 0;
      statement.get({ b: 2 });
      assert.deepEqual(fakeSql.calls[0].params, {
        tag: "named",
        val: [{ name: ":a", value: { tag: "null" } }, { name: "@b", value: { tag: "real", val: 2 } }],
      });
    });
  });
});

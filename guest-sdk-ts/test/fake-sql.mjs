// A fake of the host's `ctxbox:engine/sql` import, backed by node:sqlite
// itself: a test double for the transport only (the contract's values,
// parameters, answers and errors as the transpiled component and the SDK see
// them). It keeps no call transactions, quotas or deadlines and refuses only
// what `fakeSql.refuse` matches: the host's own behaviour is tested in Rust.
// A positional list binds by index, as the host binds it (`?NNN` is the
// NNN-th); node:sqlite binds positional values only to the indexes that are
// not a named parameter's, so those are passed by name, found with the
// SDK's SQL reader (itself checked against node:sqlite in sql-text.test.mjs).
import { DatabaseSync } from "node:sqlite";
import { parameters } from "../src/sql-text.ts";

/**
 * The fake's state: `databases` by name (`""` for the engine's own, each an
 * in-memory node:sqlite database), `maxRows` (the host's `sql.maxRows`),
 * `refuse` (statements answered `refused`), `calls` (what was asked),
 * `liveStatements` (statements prepared and not yet dropped).
 */
export const fakeSql = { databases: new Map(), maxRows: 10_000, refuse: /^\s*(ATTACH|DETACH)\b/i, calls: [], liveStatements: 0 };

/** A `sql-error` the way a transpiled import reports one: thrown with a `payload`. */
function sqlError(kind, code, message) {
  const error = new Error(message);
  error.payload = { kind, code, message };
  return error;
}

/** Runs `run` against node:sqlite, answering its errors as the contract's. */
function answer(sql, run) {
  if (sql !== undefined && fakeSql.refuse.test(sql)) throw sqlError("refused", 0, "the host refuses ATTACH and DETACH");
  try {
    return run();
  } catch (error) {
    if (error.code === "ERR_SQLITE_ERROR") throw sqlError("sqlite", error.errcode, error.message);
    throw error;
  }
}

const toNode = (value) => (value.tag === "null" ? null : value.val);
function fromNode(value) {
  if (value === null) return { tag: "null" };
  if (typeof value === "bigint") return { tag: "integer", val: value };
  if (typeof value === "number") return { tag: "real", val: value };
  if (typeof value === "string") return { tag: "text", val: value };
  return { tag: "blob", val: new Uint8Array(value) };
}

/** node:sqlite's arguments for the contract's `params` of statement `sql`. */
function args(sql, params) {
  if (params.tag === "none") return [];
  if (params.tag === "named") return [Object.fromEntries(params.val.map(({ name, value }) => [name, toNode(value)]))];
  const names = new Map(parameters(sql).filter((p) => p.name[0] !== "?").map((p) => [p.index, p.name]));
  if (names.size === 0) return params.val.map(toNode);
  const named = {};
  const positional = [];
  params.val.forEach((value, i) => {
    if (names.has(i + 1)) named[names.get(i + 1)] = toNode(value);
    else positional.push(toNode(value));
  });
  return [named, ...positional];
}

function execute(statement, params) {
  statement.setReadBigInts(true);
  const { changes, lastInsertRowid } = statement.run(...args(statement.sourceSQL, params));
  return { changes, lastInsertRowid };
}

function query(statement, params, maxRows) {
  statement.setReadBigInts(true);
  statement.setReturnArrays(true);
  const columns = statement.columns().map((column) => column.name);
  const cap = Math.min(maxRows ?? fakeSql.maxRows, fakeSql.maxRows);
  const rows = [];
  let truncated = false;
  for (const row of statement.iterate(...args(statement.sourceSQL, params))) {
    if (rows.length === cap) {
      truncated = true;
      break;
    }
    rows.push(row.map(fromNode));
  }
  return { columns, rows, truncated };
}

/** The contract's `statement` resource. */
export class Statement {
  #statement;
  #sql;
  constructor(statement, sql) {
    this.#statement = statement;
    this.#sql = sql;
  }
  columns() {
    return this.#statement.columns().map((column) => column.name);
  }
  execute(params) {
    fakeSql.calls.push({ op: "statement.execute", sql: this.#sql, params });
    return answer(undefined, () => execute(this.#statement, params));
  }
  query(params, maxRows) {
    fakeSql.calls.push({ op: "statement.query", sql: this.#sql, params, maxRows });
    return answer(undefined, () => query(this.#statement, params, maxRows));
  }
  [Symbol.dispose]() {
    fakeSql.liveStatements -= 1;
  }
}

/** The contract's `database` resource. */
export class Database {
  #db;
  constructor(db) {
    this.#db = db;
  }
  static open(name) {
    fakeSql.calls.push({ op: "open", name });
    if (name !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(name)) throw sqlError("limit", 0, `bad database name ${name}`);
    const key = name ?? "";
    if (!fakeSql.databases.has(key)) fakeSql.databases.set(key, new DatabaseSync(":memory:"));
    return new Database(fakeSql.databases.get(key));
  }
  executeBatch(sql) {
    fakeSql.calls.push({ op: "executeBatch", sql });
    answer(sql, () => this.#db.exec(sql));
  }
  execute(sql, params) {
    fakeSql.calls.push({ op: "execute", sql, params });
    return answer(sql, () => execute(this.#db.prepare(sql), params));
  }
  query(sql, params, maxRows) {
    fakeSql.calls.push({ op: "query", sql, params, maxRows });
    return answer(sql, () => query(this.#db.prepare(sql), params, maxRows));
  }
  prepare(sql) {
    fakeSql.calls.push({ op: "prepare", sql });
    const statement = answer(sql, () => new Statement(this.#db.prepare(sql), sql));
    fakeSql.liveStatements += 1;
    return statement;
  }
  [Symbol.dispose]() {}
}

/**
 * `DatabaseSync` and `StatementSync` shaped like `node:sqlite`'s, over the
 * host's SQL power (`ctxbox:engine/sql`), so code written for `node:sqlite`
 * runs on the engine's own database.
 *
 * Where a database lives: the path names one of the engine's databases, never
 * a file. No path (or `""`) is the engine's database; any other path is the
 * database named after its file name without the extension, other characters
 * than `A-Z a-z 0-9 _ -` written as `_` (`~/.openclaw/lcm.db` and `lcm.sqlite`
 * are both `lcm`). `:memory:` is refused: the host keeps every database on
 * disk. All of them share the engine's state quota.
 *
 * The host is reached only during an export call: the constructor and
 * `open()` check their arguments, and the database is opened with its first
 * statement. A statement run outside a call (at the module's top level) is
 * an `ERR_INVALID_STATE` error.
 */
import * as sql from "ctxbox:engine/sql@0.1.0";
import { currentCall } from "./console.js";
import { firstStatement, hasStatement, parameters, transactionEffects, type Parameter } from "./sql-text.js";

/** What a column's value reads as. */
export type SQLOutputValue = null | number | bigint | string | Uint8Array;
/** What a parameter may be given as (`node:sqlite` binds numbers as REAL, bigints as INTEGER). */
export type SQLInputValue = null | undefined | number | bigint | string | boolean | ArrayBufferView;
/** A row: an object with a `null` prototype, or an array with `returnArrays`. */
export type Row = Record<string, SQLOutputValue> | SQLOutputValue[];

/** The options of `new DatabaseSync(path, options)` that this host honours. */
export interface DatabaseSyncOptions {
  /** Open in the constructor (default `true`); else call `open()`. */
  open?: boolean;
  /** Must be `false`: the host offers no read-only connection. */
  readOnly?: boolean;
  /** Must be `true` or left out: the host always enforces foreign keys (as `node:sqlite` does by default). */
  enableForeignKeyConstraints?: boolean;
  /** Accepted; `enableLoadExtension(true)` is refused all the same. */
  allowExtension?: boolean;
  /** Accepted and ignored: the host decides how long a statement may wait. */
  timeout?: number;
  /** Integers read as `bigint` (default `false`). */
  readBigInts?: boolean;
  /** Rows as arrays (default `false`). */
  returnArrays?: boolean;
  /** `{ id }` binds `:id`, `@id` or `$id` (default `true`). */
  allowBareNamedParameters?: boolean;
  /** Named parameters the statement lacks are ignored instead of an error (default `false`). */
  allowUnknownNamedParameters?: boolean;
  /** Must be `false` or left out: SQLite's double-quoted strings are the host's build setting. */
  enableDoubleQuotedStringLiterals?: boolean;
}

/** What `StatementSync.run()` answers. */
export interface StatementResultingChanges {
  changes: number | bigint;
  lastInsertRowid: number | bigint;
}

/** A result column as `StatementSync.columns()` describes it (the host reports names only). */
export interface StatementColumnMetadata {
  name: string;
  column: null;
  database: null;
  table: null;
  type: null;
}

/** An error as `node:sqlite` throws it: `code`, and for SQLite's own `errcode` and `errstr`. */
export interface SqliteError extends Error {
  code: string;
  errcode?: number;
  errstr?: string;
  /** The `sql` contract's error kind, when the host answered the error. */
  kind?: sql.ErrorKind;
}

/** SQLite's `sqlite3_errstr` for each primary result code. */
const ERRSTR: Record<number, string> = {
  0: "not an error",
  1: "SQL logic error",
  3: "access permission denied",
  4: "query aborted",
  5: "database is locked",
  6: "database table is locked",
  7: "out of memory",
  8: "attempt to write a readonly database",
  9: "interrupted",
  10: "disk I/O error",
  11: "database disk image is malformed",
  12: "unknown operation",
  13: "database or disk is full",
  14: "unable to open database file",
  15: "locking protocol",
  17: "database schema has changed",
  18: "string or blob too big",
  19: "constraint failed",
  20: "datatype mismatch",
  21: "bad parameter or other API misuse",
  23: "authorization denied",
  25: "column index out of range",
  26: "file is not a database",
  27: "notification message",
  28: "warning message",
};

/**
 * The SQLite result code reported for a host error that is not SQLite's own:
 * what code written for `node:sqlite` would see for the same trouble there.
 */
const ERRCODE_OF_KIND: Record<Exclude<sql.ErrorKind, "sqlite">, number> = {
  refused: 23, // SQLITE_AUTH
  "quota-exceeded": 13, // SQLITE_FULL
  limit: 18, // SQLITE_TOOBIG
  aborted: 9, // SQLITE_INTERRUPT
  unavailable: 14, // SQLITE_CANTOPEN
};

/** `sqlite3_errstr(code)`: extended codes read as their primary code. */
export function errstr(code: number): string {
  if (code === 516) return "abort due to ROLLBACK";
  return ERRSTR[code & 0xff] ?? "unknown error";
}

/** A `node:sqlite`-style error with `code` and `ErrorType`. */
function nodeError(code: string, message: string, ErrorType: ErrorConstructor = Error): SqliteError {
  const error = new ErrorType(message) as SqliteError;
  error.code = code;
  return error;
}

/** An `ERR_SQLITE_ERROR` with SQLite's code and message. */
function sqliteError(errcode: number, message: string, kind?: sql.ErrorKind): SqliteError {
  const error = nodeError("ERR_SQLITE_ERROR", message);
  error.errcode = errcode;
  error.errstr = errstr(errcode);
  if (kind) error.kind = kind;
  return error;
}

const ERROR_KINDS: ReadonlySet<string> = new Set(["sqlite", "refused", "quota-exceeded", "limit", "aborted", "unavailable"]);

/** The `sql-error` a raw import threw (in its `payload`), if it is one. */
function sqlErrorOf(thrown: unknown): sql.SqlError | undefined {
  const payload = (thrown as { payload?: unknown } | null)?.payload as Partial<sql.SqlError> | undefined;
  if (payload && typeof payload.kind === "string" && ERROR_KINDS.has(payload.kind) && typeof payload.message === "string") {
    return { kind: payload.kind, code: typeof payload.code === "number" ? payload.code : 0, message: payload.message };
  }
  return undefined;
}

/**
 * Runs a host call, rethrowing its `sql-error` as `node:sqlite` would: an
 * `ERR_SQLITE_ERROR` whose `errcode` is SQLite's code (for the host's own
 * refusals and limits, the nearest SQLite code: refused `SQLITE_AUTH`,
 * quota-exceeded `SQLITE_FULL`, limit `SQLITE_TOOBIG`, aborted
 * `SQLITE_INTERRUPT`, unavailable `SQLITE_CANTOPEN`) and whose `kind` is the
 * contract's.
 */
function hostCall<T>(run: () => T): T {
  if (currentCall() === undefined) {
    throw nodeError(
      "ERR_INVALID_STATE",
      "the engine's database can be used only during a call to the engine, not at the module's top level",
    );
  }
  try {
    return run();
  } catch (thrown) {
    const error = sqlErrorOf(thrown);
    if (!error) throw thrown;
    const errcode = error.kind === "sqlite" ? error.code : ERRCODE_OF_KIND[error.kind];
    const prefix = error.kind === "sqlite" ? "" : `${error.kind}: `;
    throw sqliteError(errcode, `${prefix}${error.message}`, error.kind);
  }
}

/**
 * The database name a `node:sqlite` path stands for: `undefined` (the
 * engine's database) for no path or `""`, else the file name without its
 * extension, as a contract name (see the module's comment).
 */
export function databaseName(path: string | Uint8Array | URL | undefined): string | undefined {
  let text: string;
  if (path === undefined) return undefined;
  if (typeof path === "string") text = path;
  else if (path instanceof Uint8Array) text = new TextDecoder().decode(path);
  else if (typeof URL !== "undefined" && path instanceof URL) text = decodeURIComponent(path.pathname);
  else throw nodeError("ERR_INVALID_ARG_TYPE", 'The "path" argument must be a string, Uint8Array, or URL without null bytes.', TypeError);
  if (text.includes("\0")) {
    throw nodeError("ERR_INVALID_ARG_TYPE", 'The "path" argument must be a string, Uint8Array, or URL without null bytes.', TypeError);
  }
  text = text.trim();
  if (text.startsWith("file:")) text = text.slice(5).replace(/\?.*$/s, "");
  if (text === "") return undefined;
  if (text === ":memory:" || text.startsWith(":memory:") || text === "") {
    throw nodeError(
      "ERR_INVALID_ARG_VALUE",
      "in-memory databases are not offered: the host keeps an engine's databases on disk (use new DatabaseSync() or a file name)",
      TypeError,
    );
  }
  const file = text.split(/[\\/]/).filter((part) => part !== "").at(-1) ?? "";
  const dot = file.lastIndexOf(".");
  const stem = dot > 0 ? file.slice(0, dot) : file;
  const name = stem.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
  if (name === "") throw nodeError("ERR_INVALID_ARG_VALUE", `the path ${JSON.stringify(text)} names no database file`, TypeError);
  return name;
}

/** A parameter's contract value, bound as `node:sqlite` binds it. */
function toValue(value: unknown, position: string): sql.Value {
  switch (typeof value) {
    case "undefined":
    case "function":
      return { tag: "null" };
    case "number":
      return Number.isNaN(value) ? { tag: "null" } : { tag: "real", val: value };
    case "bigint":
      if (value > 0x7fffffffffffffffn || value < -0x8000000000000000n) {
        throw nodeError("ERR_INVALID_ARG_VALUE", "BigInt value is too large to bind.", TypeError);
      }
      return { tag: "integer", val: value };
    case "boolean":
      return { tag: "integer", val: value ? 1n : 0n };
    case "string":
      return { tag: "text", val: value };
    case "object":
      if (value === null) return { tag: "null" };
      if (ArrayBuffer.isView(value)) {
        return { tag: "blob", val: new Uint8Array(value.buffer, value.byteOffset, value.byteLength).slice() };
      }
  }
  throw nodeError("ERR_INVALID_ARG_TYPE", `Provided value cannot be bound to SQLite parameter ${position}.`, TypeError);
}

/** Whether `value` is a named-parameter object (as `node:sqlite` decides: any object but a typed array or view). */
const isNamedObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !ArrayBuffer.isView(value);

/** How a statement's values are read and bound. */
interface Settings {
  readBigInts: boolean;
  returnArrays: boolean;
  allowBareNamedParameters: boolean;
  allowUnknownNamedParameters: boolean;
}

/** `run()`, `get()`, `all()`: the contract's answers turned into `node:sqlite`'s. */
function readValue(value: sql.Value, settings: Settings): SQLOutputValue {
  switch (value.tag) {
    case "null":
      return null;
    case "integer":
      return settings.readBigInts ? value.val : safeNumber(value.val);
    case "real":
    case "text":
    case "blob":
      return value.val;
  }
}

function safeNumber(value: bigint): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw nodeError("ERR_OUT_OF_RANGE", `Value is too large to be represented as a JavaScript number: ${value}`, RangeError);
  }
  return Number(value);
}

/** A connection-wide transaction flag as far as this SDK has seen statements run. */
interface TransactionState {
  open: boolean;
  /** The export call in which `open` was last set: a new call starts outside any. */
  call: number | undefined;
}

/**
 * Pragmas that tune what the host manages for every database (its journal,
 * its waiting for locks, its cache, its syncing, where temporary data goes,
 * its statistics). The host refuses to let an engine set them; engines
 * written for node:sqlite set them when they open a database.
 */
const HOST_TUNED_PRAGMAS: ReadonlySet<string> = new Set([
  "journal_mode", "busy_timeout", "cache_size", "cache_spill", "synchronous", "temp_store",
  "mmap_size", "wal_autocheckpoint", "locking_mode", "threads", "optimize",
]);

/**
 * Whether `statement` (one, maybe ending in `;`) sets one of the
 * {@link HOST_TUNED_PRAGMAS} (`PRAGMA name = value`, `PRAGMA name(value)`,
 * or `PRAGMA optimize`). Reading one is left to the host, which answers it.
 */
function hostTunedPragma(statement: string): boolean {
  const pragma = /^\s*PRAGMA\s+(?:main\.)?([A-Za-z_]+)\s*(=\s*[^;]+?|\([^;)]*\))?\s*;?\s*$/i.exec(statement);
  if (!pragma) return false;
  const name = (pragma[1] ?? "").toLowerCase();
  return HOST_TUNED_PRAGMAS.has(name) && (pragma[2] !== undefined || name === "optimize");
}

/** A compiled statement, like `node:sqlite`'s `StatementSync`. */
export class StatementSync {
  #database: DatabaseSync;
  #opening: number;
  #source: string;
  #parameters: readonly Parameter[];
  #settings: Settings;
  #lastBound: Map<number, sql.Value> = new Map();

  /** @internal Made by {@link DatabaseSync.prepare}. */
  constructor(database: DatabaseSync, source: string, settings: Settings) {
    this.#database = database;
    this.#opening = database._opening;
    this.#source = source;
    this.#parameters = parameters(source);
    this.#settings = { ...settings };
  }

  /** The SQL text it was compiled from (its first statement, as `node:sqlite` answers). */
  get sourceSQL(): string {
    return this.#source;
  }

  /** The SQL text with the values last bound written in (`NULL` for unbound parameters). */
  get expandedSQL(): string {
    let out = "";
    let at = 0;
    for (const parameter of this.#parameters) {
      out += this.#source.slice(at, parameter.start) + literal(this.#lastBound.get(parameter.index));
      at = parameter.end;
    }
    return out + this.#source.slice(at);
  }

  /** Runs it and answers the rows changed and the last inserted rowid. */
  run(...args: unknown[]): StatementResultingChanges {
    const params = this.#bind(args);
    const changes = this.#call((handle) => handle.execute(params));
    this.#database._ran(this.#source);
    const read = (n: bigint) => (this.#settings.readBigInts ? n : safeNumber(n));
    return { changes: read(changes.changes), lastInsertRowid: read(changes.lastInsertRowid) };
  }

  /** The first row, or `undefined` when there is none. */
  get(...args: unknown[]): Row | undefined {
    const params = this.#bind(args);
    const rows = this.#call((handle) => handle.query(params, 1));
    this.#database._ran(this.#source);
    const first = rows.rows[0];
    return first === undefined ? undefined : this.#row(rows.columns, first);
  }

  /**
   * Every row. More rows than the host answers at once (`sql.maxRows`,
   * `sql.maxAnswerBytes`) are an error naming the limit, never a short
   * answer: page such a query with `LIMIT` and `OFFSET`.
   */
  all(...args: unknown[]): Row[] {
    const params = this.#bind(args);
    const rows = this.#call((handle) => handle.query(params, undefined));
    this.#database._ran(this.#source);
    if (rows.truncated) {
      throw sqliteError(
        ERRCODE_OF_KIND.limit,
        `limit: the query has more rows than the host answers at once (it sent ${rows.rows.length}; ` +
          "see sql.maxRows and sql.maxAnswerBytes): page it with LIMIT and OFFSET",
        "limit",
      );
    }
    return rows.rows.map((row) => this.#row(rows.columns, row));
  }

  /** The rows as an iterator (read all at once, with {@link all}'s limit). */
  iterate(...args: unknown[]): IterableIterator<Row> {
    return this.all(...args)[Symbol.iterator]();
  }

  /** Its result columns (the host reports their names; the rest is `null`). */
  columns(): StatementColumnMetadata[] {
    const names = this.#call((handle) => handle.columns());
    return names.map((name) =>
      Object.assign(Object.create(null) as object, { column: null, database: null, name, table: null, type: null }),
    );
  }

  /** Integers read as `bigint` (and `run()`'s numbers). */
  setReadBigInts(enabled: boolean): void {
    this.#settings.readBigInts = flag(enabled, "readBigInts");
  }

  /** Rows as arrays instead of objects. */
  setReturnArrays(enabled: boolean): void {
    this.#settings.returnArrays = flag(enabled, "returnArrays");
  }

  /** Whether `{ id }` binds `:id`, `@id` or `$id` (default `true`). */
  setAllowBareNamedParameters(enabled: boolean): void {
    this.#settings.allowBareNamedParameters = flag(enabled, "allowBareNamedParameters");
  }

  /** Whether a named parameter the statement lacks is ignored instead of an error (default `false`). */
  setAllowUnknownNamedParameters(enabled: boolean): void {
    this.#settings.allowUnknownNamedParameters = flag(enabled, "allowUnknownNamedParameters");
  }

  #call<T>(run: (handle: sql.Statement) => T): T {
    if (!this.#database.isOpen || this.#database._opening !== this.#opening) {
      throw nodeError("ERR_INVALID_STATE", "statement has been finalized");
    }
    const handle = this.#database._compiled(this.#source);
    return hostCall(() => run(handle));
  }

  #row(columns: string[], values: sql.Value[]): Row {
    if (this.#settings.returnArrays) return values.map((value) => readValue(value, this.#settings));
    const row = Object.create(null) as Record<string, SQLOutputValue>;
    columns.forEach((name, i) => {
      row[name] = readValue(values[i] ?? { tag: "null" }, this.#settings);
    });
    return row;
  }

  /**
   * The contract's parameters for `node:sqlite`-style arguments: an optional
   * object of named parameters first, then positional values, which take
   * the indexes that are not a named parameter's, in order (as node:sqlite
   * binds them). Every parameter of the statement is sent on every run,
   * NULL when not given (node:sqlite clears the last run's values), so
   * nothing depends on what the host keeps between runs: by name when the
   * statement has only named ones, else by index.
   */
  #bind(args: unknown[]): sql.Params {
    const named = isNamedObject(args[0]) ? args[0] : undefined;
    const positional = (named ? args.slice(1) : args).map((value, i) => toValue(value, String(i + 1)));
    const slots = new Map<number, sql.Value>();
    for (const { name, value } of named ? this.#named(named) : []) slots.set(this.#indexOf(name), value);
    const namedIndexes = new Set(this.#parameters.filter((p) => p.name[0] !== "?").map((p) => p.index));
    const count = this.#parameters.reduce((max, p) => Math.max(max, p.index), 0);
    let index = 0;
    for (const value of positional) {
      do index += 1;
      while (namedIndexes.has(index));
      // More values than parameters: SQLite's SQLITE_RANGE, as in node:sqlite.
      if (index > count) throw sqliteError(25, "column index out of range");
      slots.set(index, value);
    }
    this.#lastBound = slots;
    if (count === 0) return { tag: "none" };
    const onlyNamed = this.#parameters.every((p) => p.name[0] !== "?");
    if (onlyNamed) {
      const names = new Map(this.#parameters.map((p) => [p.name, p.index]));
      return { tag: "named", val: [...names].map(([name, at]) => ({ name, value: slots.get(at) ?? { tag: "null" } })) };
    }
    const values = nulls(count);
    for (const [at, value] of slots) values[at - 1] = value;
    return { tag: "positional", val: values };
  }

  #indexOf(name: string): number {
    return this.#parameters.find((p) => p.name === name)?.index ?? 0;
  }

  /** The named values of `object`, each under the name the statement writes it with. */
  #named(object: Record<string, unknown>): sql.NamedValue[] {
    const names = new Set(this.#parameters.map((p) => p.name).filter((name) => name[0] !== "?"));
    const bound: sql.NamedValue[] = [];
    for (const key of Object.keys(object)) {
      let name: string | undefined;
      if (names.has(key)) {
        name = key;
      } else if (this.#settings.allowBareNamedParameters && !/^[:@$]/.test(key)) {
        const candidates = [":", "@", "$"].map((prefix) => prefix + key).filter((candidate) => names.has(candidate));
        if (candidates.length > 1) {
          throw nodeError(
            "ERR_INVALID_STATE",
            `Cannot create bare named parameter '${key}' because of conflicting names '${candidates[0]}' and '${candidates[1]}'.`,
          );
        }
        name = candidates[0];
      }
      if (name === undefined) {
        if (this.#settings.allowUnknownNamedParameters) continue;
        throw nodeError("ERR_INVALID_STATE", `Unknown named parameter '${key}'`);
      }
      bound.push({ name, value: toValue(object[key], name) });
    }
    return bound;
  }
}

/** `count` NULLs. */
const nulls = (count: number): sql.Value[] => Array.from({ length: count }, () => ({ tag: "null" }) as const);

/** A value written into SQL text, as `sqlite3_expanded_sql` writes it. */
function literal(value: sql.Value | undefined): string {
  switch (value?.tag) {
    case undefined:
    case "null":
      return "NULL";
    case "integer":
      return String(value.val);
    case "real":
      return realLiteral(value.val);
    case "text":
      return `'${value.val.replaceAll("'", "''")}'`;
    case "blob":
      return `x'${[...value.val].map((byte) => byte.toString(16).padStart(2, "0")).join("")}'`;
  }
}

/** A REAL as SQLite's `%!.15g` writes it: 15 significant digits, always a decimal point. */
function realLiteral(value: number): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? "NULL" : value > 0 ? "Inf" : "-Inf";
  const [mantissa = "", exponentText] = value.toExponential(14).split("e");
  const exponent = Number(exponentText);
  const trim = (digits: string) => digits.replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, ".0");
  if (exponent < -4 || exponent >= 15) {
    const sign = exponent < 0 ? "-" : "+";
    return `${trim(mantissa)}e${sign}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  return trim(value.toFixed(Math.max(0, 14 - exponent)));
}

function flag(value: unknown, name: string): boolean {
  if (typeof value !== "boolean") {
    throw nodeError("ERR_INVALID_ARG_TYPE", `The "${name}" argument must be a boolean.`, TypeError);
  }
  return value;
}

/**
 * How many compiled statements a connection keeps (the host allows 1000
 * statements per instance, across its databases).
 */
const COMPILED_KEPT = 128;

/** A connection to one of the engine's databases, like `node:sqlite`'s `DatabaseSync`. */
export class DatabaseSync {
  #name: string | undefined;
  #settings: Settings;
  #open = false;
  #handle: sql.Database | undefined;
  /**
   * The host's compiled statements by SQL text, least recently used first.
   * Node frees a statement when it is garbage; the sandbox cannot see that,
   * and engines written for Node prepare statements on every call, so the
   * host's statements are kept here, shared by every `StatementSync` of the
   * same text, at most {@link COMPILED_KEPT} of them.
   */
  #compiled = new Map<string, sql.Statement>();
  #openings = 0;
  #transaction: TransactionState = { open: false, call: undefined };

  /** See the module's comment for what `path` names; `options` as {@link DatabaseSyncOptions}. */
  constructor(path?: string | Uint8Array | URL, options: DatabaseSyncOptions = {}) {
    this.#name = databaseName(path);
    if (options.readOnly) {
      throw nodeError("ERR_INVALID_ARG_VALUE", "read-only databases are not offered by the host's SQL power (readOnly)", TypeError);
    }
    if (options.enableDoubleQuotedStringLiterals) {
      throw nodeError(
        "ERR_INVALID_ARG_VALUE",
        "double-quoted string literals follow the host's SQLite build (enableDoubleQuotedStringLiterals)",
        TypeError,
      );
    }
    if (options.enableForeignKeyConstraints === false) {
      throw nodeError(
        "ERR_INVALID_ARG_VALUE",
        "the host always enforces foreign keys (enableForeignKeyConstraints: false is not offered)",
        TypeError,
      );
    }
    this.#settings = {
      readBigInts: options.readBigInts ?? false,
      returnArrays: options.returnArrays ?? false,
      allowBareNamedParameters: options.allowBareNamedParameters ?? true,
      allowUnknownNamedParameters: options.allowUnknownNamedParameters ?? false,
    };
    if (options.open ?? true) this.open();
  }

  /** Whether it is open (the host's database is reached with the first statement). */
  get isOpen(): boolean {
    return this.#open;
  }

  /**
   * Whether a transaction the engine began (`BEGIN`) is open, as far as the
   * statements run through this connection show: a new export call starts
   * outside any (the host ends every call's transaction with the call).
   */
  get isTransaction(): boolean {
    this.#openOrThrow();
    return this.#transaction.open && this.#transaction.call === currentCall();
  }

  /** Opens a database made with `{ open: false }` or closed. */
  open(): void {
    if (this.#open) throw nodeError("ERR_INVALID_STATE", "database is already open");
    this.#open = true;
    this.#openings += 1;
  }

  /** Closes it: its statements are finalized. */
  close(): void {
    this.#openOrThrow();
    for (const compiled of this.#compiled.values()) compiled[Symbol.dispose]();
    this.#compiled.clear();
    this.#handle?.[Symbol.dispose]();
    this.#handle = undefined;
    this.#open = false;
    this.#transaction = { open: false, call: undefined };
  }

  /**
   * Runs one or more statements separated by `;`, without parameters. A
   * lone statement setting a pragma the host tunes itself (see
   * {@link hostTunedPragma}) is answered here as done.
   */
  exec(sqlText: string): void {
    const handle = this.#connection();
    if (hostTunedPragma(text(sqlText))) return;
    hostCall(() => handle.executeBatch(text(sqlText)));
    this._ran(sqlText);
  }

  /** Compiles a statement (the first one of `sqlText`; the rest is ignored, as in node:sqlite). */
  prepare(sqlText: string): StatementSync {
    const source = text(sqlText);
    if (!hasStatement(source)) {
      throw nodeError("ERR_INVALID_ARG_VALUE", "The SQL query contains no statements.", TypeError);
    }
    const first = firstStatement(source);
    this._compiled(first);
    return new StatementSync(this, first, this.#settings);
  }

  /** `false` is accepted; loading extensions is refused by the host. */
  enableLoadExtension(allow: boolean): void {
    this.#openOrThrow();
    if (flag(allow, "allow")) {
      throw sqliteError(ERRCODE_OF_KIND.refused, "refused: the host does not load SQLite extensions", "refused");
    }
  }

  /** Refused: the host does not load SQLite extensions. */
  loadExtension(_path: string): never {
    this.#openOrThrow();
    throw sqliteError(ERRCODE_OF_KIND.refused, "refused: the host does not load SQLite extensions", "refused");
  }

  /** Closes it if open (`using db = new DatabaseSync()`). */
  [Symbol.dispose](): void {
    if (this.#open) this.close();
  }

  /** @internal Which opening of this connection it is (a statement of an earlier one is finalized). */
  get _opening(): number {
    return this.#openings;
  }

  /** @internal The host's statement for `source`, compiled on first use and kept (see `#compiled`). */
  _compiled(source: string): sql.Statement {
    const kept = this.#compiled.get(source);
    if (kept) {
      this.#compiled.delete(source);
      this.#compiled.set(source, kept);
      return kept;
    }
    const handle = this.#connection();
    const compiled = hostCall(() => handle.prepare(source));
    this.#compiled.set(source, compiled);
    if (this.#compiled.size > COMPILED_KEPT) {
      const [oldest, dropped] = this.#compiled.entries().next().value as [string, sql.Statement];
      this.#compiled.delete(oldest);
      dropped[Symbol.dispose]();
    }
    return compiled;
  }

  /** @internal Notes what a statement that succeeded did to the transaction. */
  _ran(source: string): void {
    for (const effect of transactionEffects(source)) {
      if (effect) this.#transaction = { open: effect === "begin", call: currentCall() };
    }
  }

  #openOrThrow(): void {
    if (!this.#open) throw nodeError("ERR_INVALID_STATE", "database is not open");
  }

  /** The host's database, opened on first use. */
  #connection(): sql.Database {
    this.#openOrThrow();
    if (!this.#handle) {
      const name = this.#name;
      this.#handle = hostCall(() => sql.Database.open(name));
    }
    return this.#handle;
  }
}

function text(value: unknown): string {
  if (typeof value !== "string") throw nodeError("ERR_INVALID_ARG_TYPE", 'The "sql" argument must be a string.', TypeError);
  return value;
}

declare module 'ctxbox:engine/sql@0.1.0' {
  /**
   * A value in a row or a parameter.
   */
  export type Value = ValueNull | ValueInteger | ValueReal | ValueText | ValueBlob;
  export interface ValueNull {
    tag: 'null',
  }
  export interface ValueInteger {
    tag: 'integer',
    val: bigint,
  }
  export interface ValueReal {
    tag: 'real',
    val: number,
  }
  export interface ValueText {
    tag: 'text',
    val: string,
  }
  export interface ValueBlob {
    tag: 'blob',
    val: Uint8Array,
  }
  /**
   * A named parameter: `name` as written in the statement, with its
   * prefix (`:id`, `@id` or `$id`).
   */
  export interface NamedValue {
    name: string,
    value: Value,
  }
  /**
   * A statement's parameters.
   */
  export type Params = ParamsNone | ParamsPositional | ParamsNamed;
  /**
   * None.
   */
  export interface ParamsNone {
    tag: 'none',
  }
  /**
   * `?` and `?NNN` parameters, in order (`?NNN` is the NNN-th).
   */
  export interface ParamsPositional {
    tag: 'positional',
    val: Array<Value>,
  }
  /**
   * `:name`, `@name` and `$name` parameters.
   */
  export interface ParamsNamed {
    tag: 'named',
    val: Array<NamedValue>,
  }
  /**
   * Why a statement failed.
   * # Variants
   * 
   * ## `"sqlite"`
   * 
   * SQLite refused or failed the statement (syntax, constraint, no
   * such table, …): `code` is SQLite's extended result code.
   * ## `"refused"`
   * 
   * The host refused what the statement does (see the list above).
   * ## `"quota-exceeded"`
   * 
   * The database would grow past the engine's quota.
   * ## `"limit"`
   * 
   * A limit of this interface: statement length, statements per
   * call, rows or bytes per answer, a handle used outside its call.
   * ## `"aborted"`
   * 
   * The call was cancelled or reached its deadline notice.
   * ## `"unavailable"`
   * 
   * The host could not serve the database (its disk, a shared store
   * that keeps no SQL databases): not the engine's doing.
   */
  export type ErrorKind = 'sqlite' | 'refused' | 'quota-exceeded' | 'limit' | 'aborted' | 'unavailable';
  /**
   * A failed statement.
   */
  export interface SqlError {
    kind: ErrorKind,
    /**
     * SQLite's extended result code (`kind` `sqlite`), else 0.
     */
    code: number,
    /**
     * SQLite's message or the host's, at most 1 KiB.
     */
    message: string,
  }
  /**
   * What a statement that returns no rows did.
   */
  export interface Changes {
    /**
     * Rows inserted, updated or deleted by the statement.
     */
    changes: bigint,
    /**
     * The rowid of the most recent successful insert on this database.
     */
    lastInsertRowid: bigint,
  }
  /**
   * Rows a query returned.
   */
  export interface Rows {
    /**
     * Column names, in the statement's order.
     */
    columns: Array<string>,
    /**
     * Each row's values, one per column.
     */
    rows: Array<Array<Value>>,
    /**
     * Whether the query had more rows than it was allowed to return
     * (`max-rows`, `sql.maxRows` or `sql.maxAnswerBytes`): the rows
     * returned are the first ones.
     */
    truncated: boolean,
  }
  
  export class Database implements Disposable {
    /**
     * This type does not have a public constructor.
     */
    private constructor();
    /**
    * Opens the engine's database, or with `name` one more of its
    * databases (for example one per agent): 1 to 64 of `A-Z a-z 0-9
    * _ -`. All of an engine's databases share its quota. A handle
    * lasts as long as the instance; statements run in the call that
    * uses them.
    */
    static open(name: string | undefined): Database;
    /**
    * Runs one or more statements separated by `;`, without
    * parameters, discarding any rows (`node:sqlite`'s `exec`).
    */
    executeBatch(sql: string): void;
    /**
    * Runs one statement and reports its changes.
    */
    execute(sql: string, params: Params): Changes;
    /**
    * Runs one statement and returns its rows, at most `max-rows` of
    * them (none: `sql.maxRows`).
    */
    query(sql: string, params: Params, maxRows: number | undefined): Rows;
    /**
    * Compiles one statement to run many times.
    */
    prepare(sql: string): Statement;
    [Symbol.dispose](): void;
  }
  
  export class Statement implements Disposable {
    /**
     * This type does not have a public constructor.
     */
    private constructor();
    /**
    * Its result columns (empty for a statement that returns none).
    */
    columns(): Array<string>;
    /**
    * Runs it and reports its changes.
    */
    execute(params: Params): Changes;
    /**
    * Runs it and returns its rows (see `database.query`).
    */
    query(params: Params, maxRows: number | undefined): Rows;
    [Symbol.dispose](): void;
  }
}

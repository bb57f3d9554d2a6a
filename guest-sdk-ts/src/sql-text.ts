/**
 * Reading SQL text the way SQLite's tokenizer does, for what the `sql`
 * contract does not report: a statement's parameters (names and indexes, so
 * `{ id: 1 }` can bind `:id`, `@id` or `$id`) and which statements open or
 * end a transaction. String literals, quoted identifiers and comments are
 * skipped, so nothing inside them is mistaken for a parameter or a keyword.
 */

/** A parameter as written in a statement, at the place SQLite numbers it. */
export interface Parameter {
  /** Its text with the prefix (`?`, `?3`, `:id`, `@id`, `$id`). */
  name: string;
  /** SQLite's index for it (1-based): what positional values bind to. */
  index: number;
  /** Where it starts and ends in the text. */
  start: number;
  end: number;
}

/** A token: a word (keyword or identifier, upper-cased), `;`, or a parameter. */
type Token =
  | { kind: "word"; text: string }
  | { kind: "semicolon"; end: number }
  | { kind: "parameter"; text: string; start: number; end: number };

/** Texts whose reading is remembered, per kind of reading (the newest used). */
const REMEMBERED_TEXTS = 256;
/** Longest text whose reading is remembered: statements, not migration scripts run once. */
const REMEMBERED_TEXT_CHARS = 8192;

/**
 * `read`, remembering its answer for the last {@link REMEMBERED_TEXTS} texts
 * it was asked about. Engines written for Node prepare the same statement on
 * every call, and reading SQL text character by character is the costliest
 * thing `node:sqlite` does in the sandbox's interpreter; an answer is frozen,
 * since callers share it.
 */
function remembered<T extends object>(read: (sql: string) => T): (sql: string) => T {
  const kept = new Map<string, T>();
  return (sql) => {
    const hit = kept.get(sql);
    if (hit !== undefined) {
      kept.delete(sql);
      kept.set(sql, hit);
      return hit;
    }
    const answer = Object.freeze(read(sql));
    if (sql.length <= REMEMBERED_TEXT_CHARS) {
      kept.set(sql, answer);
      if (kept.size > REMEMBERED_TEXTS) kept.delete(kept.keys().next().value as string);
    }
    return answer;
  };
}

const isAsciiLetter = (code: number): boolean => (code >= 65 && code <= 90) || (code >= 97 && code <= 122);
const isDigit = (code: number): boolean => code >= 48 && code <= 57;
/** Letters, digits, `_` and `.`: what a number (hex, exponent) is read over. */
const isNumberPart = (code: number): boolean => isAsciiLetter(code) || isDigit(code) || code === 95 || code === 46;
const isWordStart = (c: string): boolean => {
  const code = c.charCodeAt(0);
  return isAsciiLetter(code) || code === 95 || code > 0x7f;
};
const isWordPart = (c: string): boolean => {
  const code = c.charCodeAt(0);
  return isAsciiLetter(code) || isDigit(code) || code === 95 || code === 36 || code > 0x7f;
};

/** The tokens of `sql` that matter here (literals, operators and comments skipped). */
function* tokens(sql: string): Generator<Token> {
  let i = 0;
  const n = sql.length;
  /** The index just past a quoted run opened at `i` and closed by `close` (doubled closes are escapes). */
  const quoted = (close: string): number => {
    let j = i + 1;
    for (;;) {
      const at = sql.indexOf(close, j);
      if (at < 0) return n;
      if (close !== "]" && sql.charAt(at + 1) === close) {
        j = at + 2;
        continue;
      }
      return at + 1;
    }
  };
  while (i < n) {
    const c = sql.charAt(i);
    if (c === "-" && sql.charAt(i + 1) === "-") {
      const end = sql.indexOf("\n", i);
      i = end < 0 ? n : end + 1;
    } else if (c === "/" && sql.charAt(i + 1) === "*") {
      const end = sql.indexOf("*/", i + 2);
      i = end < 0 ? n : end + 2;
    } else if (c === "'" || c === '"' || c === "`") {
      i = quoted(c);
    } else if (c === "[") {
      i = quoted("]");
    } else if (c === ";") {
      i += 1;
      yield { kind: "semicolon", end: i };
    } else if (c === "?") {
      let j = i + 1;
      while (j < n && isDigit(sql.charCodeAt(j))) j += 1;
      yield { kind: "parameter", text: sql.slice(i, j), start: i, end: j };
      i = j;
    } else if ((c === ":" || c === "@" || c === "$") && i + 1 < n && isWordPart(sql.charAt(i + 1))) {
      let j = i + 1;
      for (;;) {
        while (j < n && isWordPart(sql.charAt(j))) j += 1;
        // Tcl-style `$a::b` names, as SQLite reads them.
        if (c === "$" && sql.charAt(j) === ":" && sql.charAt(j + 1) === ":") {
          j += 2;
          continue;
        }
        break;
      }
      yield { kind: "parameter", text: sql.slice(i, j), start: i, end: j };
      i = j;
    } else if ((c === "x" || c === "X") && sql.charAt(i + 1) === "'") {
      i += 1;
      i = quoted("'");
    } else if (isWordStart(c)) {
      let j = i + 1;
      while (j < n && isWordPart(sql.charAt(j))) j += 1;
      yield { kind: "word", text: sql.slice(i, j).toUpperCase() };
      i = j;
    } else if (isDigit(c.charCodeAt(0)) || c === ".") {
      // A number (with any exponent or hex digits): not a word.
      let j = i + 1;
      while (j < n && isNumberPart(sql.charCodeAt(j))) j += 1;
      i = j;
    } else {
      i += 1;
    }
  }
}

/**
 * The parameters of one statement, each occurrence with SQLite's index: `?`
 * takes the next index, `?NNN` index NNN, a name the index of its first
 * occurrence or else the next one.
 */
export const parameters: (sql: string) => readonly Parameter[] = remembered(readParameters);

function readParameters(sql: string): Parameter[] {
  const found: Parameter[] = [];
  const byName = new Map<string, number>();
  let count = 0;
  for (const token of tokens(sql)) {
    if (token.kind !== "parameter") continue;
    let index: number;
    if (token.text === "?") {
      index = ++count;
    } else if (token.text[0] === "?") {
      index = Number(token.text.slice(1));
      count = Math.max(count, index);
    } else {
      index = byName.get(token.text) ?? ++count;
      byName.set(token.text, index);
    }
    found.push({ name: token.text, index, start: token.start, end: token.end });
  }
  return found;
}

/** Whether `sql` holds a statement (not only spaces, comments and `;`). */
export function hasStatement(sql: string): boolean {
  return transactionEffects(sql).length > 0;
}

/** How a statement changes the transaction state: opens one, ends one, or neither. */
export type TransactionEffect = "begin" | "end" | undefined;

/** A statement of a text of several: its first words (upper-cased) and where it ends. */
interface StatementWords {
  words: string[];
  end: number;
}

/**
 * The statements of `sql`, separated by `;` (those inside a `CREATE
 * TRIGGER` body do not end the statement), each with its first words.
 */
const statements: (sql: string) => readonly StatementWords[] = remembered(readStatements);

function readStatements(sql: string): StatementWords[] {
  const found: StatementWords[] = [];
  let words: string[] = [];
  // Inside a trigger's BEGIN … END body: the CASE … END nesting depth + 1.
  let triggerDepth = 0;
  const finish = (end: number) => {
    if (words.length > 0) found.push({ words, end });
    words = [];
    triggerDepth = 0;
  };
  for (const token of tokens(sql)) {
    if (token.kind === "semicolon") {
      if (triggerDepth === 0) finish(token.end);
      continue;
    }
    if (token.kind !== "word") {
      words.push("?");
      continue;
    }
    words.push(token.text);
    const trigger = words[1] === "TRIGGER" || words[2] === "TRIGGER";
    if (words[0] === "CREATE" && trigger) {
      if (token.text === "BEGIN" && triggerDepth === 0) triggerDepth = 1;
      else if (token.text === "CASE" && triggerDepth > 0) triggerDepth += 1;
      else if (token.text === "END" && triggerDepth > 0) triggerDepth -= 1;
    }
  }
  finish(sql.length);
  return found;
}

/**
 * What each statement of `sql` (one or several, separated by `;`) does to the
 * transaction: `BEGIN` opens one; `COMMIT`, `END` and `ROLLBACK` (but not
 * `ROLLBACK TO`) end it.
 */
export function transactionEffects(sql: string): TransactionEffect[] {
  return statements(sql).map((statement) => effectOf(statement.words));
}

/**
 * `sql` up to the end of its first statement: what `node:sqlite`'s
 * `prepare` compiles (it ignores the rest, where the host refuses a text of
 * several).
 */
export function firstStatement(sql: string): string {
  const first = statements(sql)[0];
  return first ? sql.slice(0, first.end) : sql;
}

function effectOf(words: string[]): TransactionEffect {
  switch (words[0]) {
    case "BEGIN":
      return "begin";
    case "COMMIT":
    case "END":
      return "end";
    case "ROLLBACK":
      // `ROLLBACK [TRANSACTION] TO [SAVEPOINT] name` keeps the transaction.
      return words.includes("TO") ? undefined : "end";
    default:
      return undefined;
  }
}

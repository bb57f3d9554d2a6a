// How the SDK reads SQL text: parameters (with SQLite's indexes) outside
// literals, identifiers and comments, checked against node:sqlite's own
// binding; which statements open or end a transaction.
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { test } from "node:test";
import { sdkModule } from "./sdk-source.mjs";

const { parameters, transactionEffects, hasStatement, firstStatement } = await sdkModule("sql-text");

test("parameters are found outside literals, quoted identifiers and comments, indexed as SQLite indexes them", () => {
  const db = new DatabaseSync(":memory:");
  db.exec('CREATE TABLE t("a?" TEXT, [b:x] TEXT, `c@` TEXT)');
  const statements = [
    "SELECT ?, ?, ?",
    "SELECT ?2, ?, :a, @b, $c, :a, ?1",
    "SELECT '?', \"a?\", [b:x], `c@`, x'3f', -- :no\n :yes /* @no */ FROM t",
    "SELECT $a::b, :ünï, @x_1$y",
    "SELECT ?10",
    "SELECT 1.5e3 AS n, :p",
  ];
  for (const sql of statements) {
    const found = parameters(sql);
    const count = found.reduce((max, p) => Math.max(max, p.index), 0);
    const namedIndexes = new Set(found.filter((p) => p.name[0] !== "?").map((p) => p.index));
    const named = Object.fromEntries(found.filter((p) => p.name[0] !== "?").map((p) => [p.name, 1]));
    const first = namedIndexes.size > 0 ? [named] : [];
    // node:sqlite binds positional values to every index but the named ones:
    // exactly `count` indexes in all fit, one more is SQLite's range error.
    const fits = Array(count - namedIndexes.size).fill(1);
    const statement = db.prepare(sql);
    assert.doesNotThrow(() => statement.all(...first, ...fits), `${sql}: ${count} parameters`);
    assert.throws(() => statement.all(...first, ...fits, 1), /column index out of range/, `${sql}: no more than ${count}`);
  }
  assert.deepEqual(parameters("SELECT ?2, ?, :a, :a, ?1").map((p) => [p.name, p.index]), [["?2", 2], ["?", 3], [":a", 4], [":a", 4], ["?1", 1]]);
  assert.deepEqual(parameters("SELECT '?' || \"?\" -- ?").length, 0);
});

test("BEGIN opens, COMMIT/END/ROLLBACK end, ROLLBACK TO and trigger bodies do not", () => {
  assert.deepEqual(transactionEffects("BEGIN; INSERT INTO t VALUES (1); COMMIT"), ["begin", undefined, "end"]);
  assert.deepEqual(transactionEffects("begin immediate transaction;end transaction;"), ["begin", "end"]);
  assert.deepEqual(transactionEffects("ROLLBACK TRANSACTION TO SAVEPOINT s; ROLLBACK"), [undefined, "end"]);
  assert.deepEqual(
    transactionEffects("CREATE TEMP TRIGGER tr AFTER INSERT ON t BEGIN SELECT CASE WHEN 1 THEN 2 END; DELETE FROM t; END; BEGIN"),
    [undefined, "begin"],
  );
  assert.deepEqual(transactionEffects("SELECT ';' AS semicolon; -- COMMIT;\n/* BEGIN; */"), [undefined]);
  assert.equal(hasStatement("  ;; -- nothing\n/* at all */ ;"), false);
  assert.equal(hasStatement("SELECT 1"), true);
  assert.equal(firstStatement("SELECT ';'; SELECT 2"), "SELECT ';';");
  assert.equal(firstStatement("CREATE TRIGGER t AFTER INSERT ON x BEGIN DELETE FROM y; END; SELECT 1"), "CREATE TRIGGER t AFTER INSERT ON x BEGIN DELETE FROM y; END;");
  assert.equal(firstStatement("SELECT 1 -- no semicolon"), "SELECT 1 -- no semicolon");
});

test("a statement's reading is remembered for the newest 256 texts and shared frozen; long texts are read each time", () => {
  const sql = "SELECT * FROM messages WHERE id = :id AND conversation = ?";
  const first = parameters(sql);
  assert.equal(parameters(sql), first, "the same text is read once");
  assert.ok(Object.isFrozen(first));
  assert.deepEqual(first.map((parameter) => parameter.index), [1, 2]);
  for (let at = 0; at < 256; at += 1) parameters(`SELECT ${at}, ?`);
  assert.notEqual(parameters(sql), first, "256 newer texts pushed it out");
  assert.deepEqual(parameters(sql), first, "read again, the same answer");
  const long = `SELECT :a /* ${"x".repeat(9000)} */`;
  assert.notEqual(parameters(long), parameters(long));
  assert.deepEqual(parameters(long).map((parameter) => parameter.name), [":a"]);
});

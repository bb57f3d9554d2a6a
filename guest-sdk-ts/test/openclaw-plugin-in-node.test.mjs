// bench/openclaw-plugin-in-node.mjs on a real session: the test plugin
// (build-fixture-plugin, which answers every `assemble` with the messages it
// is given) replayed through the adapter in Node makes the calls the turn
// runner makes — one `assemble` per model call of the transcript's active
// branch, one `afterTurn` and `maintain` per turn — and reports each.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

const here = (relative) => fileURLToPath(new URL(relative, import.meta.url));

test("the in-Node bench replays a branched session's active branch, a call per model call and per turn", () => {
  const output = execFileSync(
    process.execPath,
    [
      here("../bench/openclaw-plugin-in-node.mjs"),
      "--plugin",
      here("build-fixture-plugin"),
      "--window",
      "16000",
      // 15 turns and 24 model calls on its active branch, as `ctxbox run` reports it.
      here("../../tests/fixtures/sessions/qwen35-feishu-delivery-mirror-branching-zh.jsonl"),
    ],
    { encoding: "utf8" },
  );
  const lines = output.trim().split("\n");
  assert.match(lines[0], /^qwen35-feishu-delivery-mirror-branching-zh\.jsonl: 15 turns, 54 messages, window 16000/);
  const calls = new Map(
    lines
      .slice(2)
      .map((line) => line.split("|").map((cell) => cell.trim()))
      .map(([method, count, total]) => [method, { count: Number(count), total: Number(total) }]),
  );
  assert.deepEqual([...calls.keys()], ["bootstrap", "assemble", "afterTurn", "maintain"]);
  assert.equal(calls.get("assemble").count, 24);
  assert.equal(calls.get("afterTurn").count, 15);
  assert.equal(calls.get("maintain").count, 15);
  for (const [method, { total }] of calls) assert.ok(Number.isFinite(total) && total >= 0, `${method}: ${total} ms`);
});

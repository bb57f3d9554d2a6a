// The guest's `process` and `setImmediate`: env from the engine's
// configuration only, nextTick and setImmediate ordered as in Node, the
// refusals named.
import assert from "node:assert/strict";
import { test } from "node:test";
import { fakeConfig } from "./fake-host-log.mjs";
import { sdkModule } from "./sdk-source.mjs";

const { process: guestProcess, resetEnv } = await sdkModule("node/process");
const { setImmediate: guestImmediate, clearImmediate: guestClear } = await sdkModule("node/timers");
const { duringCall } = await sdkModule("console");

test("env holds the configured env strings only, read during a call", () => {
  resetEnv();
  fakeConfig.json = JSON.stringify({ env: { LCM_DB: "lcm.db", N: 3, TZ: "UTC" }, other: true });
  assert.deepEqual(guestProcess.env, {}, "outside a call there is no configuration");
  assert.deepEqual(duringCall(() => guestProcess.env), { LCM_DB: "lcm.db", TZ: "UTC" });
  assert.equal(guestProcess.env.HOME, undefined, "nothing of the machine");
  guestProcess.env.SET = "kept";
  assert.equal(duringCall(() => guestProcess.env.SET), "kept");
  resetEnv();
  fakeConfig.json = undefined;
  assert.deepEqual(duringCall(() => guestProcess.env), {});
});

test("nextTick runs before setImmediate, both after the current code, as in Node", async () => {
  for (const [tick, immediate] of [[guestProcess.nextTick, guestImmediate], [process.nextTick, setImmediate]]) {
    const order = [];
    await new Promise((done) => {
      immediate((value) => {
        order.push(`immediate ${value}`);
        done();
      }, 1);
      tick((value) => order.push(`tick ${value}`), 2);
      order.push("now");
    });
    assert.deepEqual(order, ["now", "tick 2", "immediate 1"]);
  }
  let ran = false;
  guestClear(guestImmediate(() => (ran = true)));
  await new Promise((done) => setTimeout(done, 5));
  assert.equal(ran, false, "a cleared immediate does not run");
  assert.throws(() => guestImmediate("nope"), { code: "ERR_INVALID_ARG_TYPE" });
});

test("no machine: / as the working directory, exit and chdir refused by name", () => {
  assert.equal(guestProcess.cwd(), "/");
  assert.deepEqual(guestProcess.argv, ["ctxbox", "engine"]);
  assert.throws(() => guestProcess.exit(1), { code: "ERR_CTXBOX_REFUSED", message: /process\.exit is not offered/ });
  assert.throws(() => guestProcess.chdir("/tmp"), { code: "ERR_CTXBOX_REFUSED" });
  const [seconds, nanos] = guestProcess.hrtime();
  assert.ok(Number.isInteger(seconds) && nanos >= 0 && nanos < 1e9);
  assert.equal(typeof guestProcess.hrtime.bigint(), "bigint");
});

// The binary the plugin runs: found (setting, platform package, PATH),
// versioned, checked by `ctxbox doctor`; its problems said once.

import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { Sidecar } from "../src/sidecar.js";
import { fakeSidecar } from "./fake-sidecar-bin.js";
import {
  binaryProblem,
  checkInstallation,
  doctorArgs,
  doctorProblems,
  findBinary,
  helloProblems,
  platformPackage,
  sayOnce,
  versionProblem,
} from "../src/install.js";

const dir = mkdtempSync(join(tmpdir(), "ctxbox-install-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function script(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}`);
  chmodSync(path, 0o755);
  return path;
}

test("versions outside the supported range are named, with what is needed", () => {
  assert.equal(versionProblem("/bin/ctxbox", "0.1.0"), undefined);
  assert.equal(versionProblem("/bin/ctxbox", "0.1.9"), undefined);
  assert.match(versionProblem("/bin/ctxbox", "0.0.9")!, /too old .*>= 0\.1\.0, < 0\.2\.0/);
  assert.match(versionProblem("/bin/ctxbox", "0.2.0")!, /newer than this plugin knows/);
  assert.match(versionProblem("/bin/ctxbox", "1.0.0")!, /newer than this plugin knows/);
  assert.match(versionProblem("/bin/ctxbox", "banana")!, /not a ctxbox version/);
});

test("a missing binary says how to get one; a present one is asked its version", async () => {
  const missing = await binaryProblem(join(dir, "nope"));
  assert.match(missing!, /no ctxbox binary/);
  assert.match(missing!, /ctxboxBin/);
  assert.match((await binaryProblem("ctxbox-surely-not-on-path"))!, /not on PATH/);
  assert.match((await binaryProblem(script("old", "echo 'ctxbox 0.0.1'\n")))!, /too old/);
  assert.equal(await binaryProblem(script("good", "echo 'ctxbox 0.1.0'\n")), undefined);
});

test("the setting wins, then the platform package, then PATH", () => {
  assert.equal(findBinary("/opt/ctxbox"), "/opt/ctxbox");
  const packaged = script("packaged", "echo 'ctxbox 0.1.0'\n");
  const asked: string[] = [];
  assert.equal(
    findBinary(undefined, (id) => {
      asked.push(id);
      return packaged;
    }),
    packaged,
  );
  assert.deepEqual(asked, [`${platformPackage()}/bin/ctxbox`]);
  assert.equal(
    findBinary(undefined, () => {
      throw new Error("Cannot find module");
    }),
    "ctxbox",
  );
  assert.equal(platformPackage("linux", "x64"), "@ctxbox/openclaw-linux-x64");
});

test("doctor's problems for this plugin come with their fix; Hermes's are left out", () => {
  const output = JSON.stringify({
    ok: false,
    findings: [
      { area: "engine", subject: "keep-recnet", status: "problem", detail: "no engine of that name is registered", fix: "name a bundled engine" },
      { area: "hermes", subject: "selected", status: "problem", detail: "not ctxbox", fix: "x" },
      { area: "data-dir", subject: "free space", status: "ok", detail: "9000 MiB free" },
    ],
  });
  assert.deepEqual(doctorProblems(output), ["keep-recnet: no engine of that name is registered (fix: name a bundled engine)"]);
  assert.deepEqual(doctorProblems("not json"), []);
  assert.deepEqual(doctorArgs("lossless", "/d", "/c.toml"), ["doctor", "--json", "--engine", "lossless", "--data-dir", "/d", "--config", "/c.toml"]);
});

test("the checks at start say each problem once", async () => {
  const report = JSON.stringify({
    ok: false,
    findings: [{ area: "openclaw", subject: "selected", status: "problem", detail: `slot is legacy ${process.pid}`, fix: "set it" }],
  });
  const doctor = script("doctor", `if [ "$1" = --version ]; then echo 'ctxbox 0.1.0'; else echo '${report}'; fi\n`);
  const warnings: string[] = [];
  await checkInstallation(doctor, doctorArgs("keep-recent", dir, undefined), (m) => warnings.push(m));
  await checkInstallation(doctor, doctorArgs("keep-recent", dir, undefined), (m) => warnings.push(m));
  assert.deepEqual(warnings, [`ctxbox: ctxbox doctor: selected: slot is legacy ${process.pid} (fix: set it)`]);

  const missing: string[] = [];
  await checkInstallation(join(dir, "absent"), [], (m) => missing.push(m));
  assert.equal(missing.length, 1);
  assert.match(missing[0], /^ctxbox: no ctxbox binary/);
  assert.equal(sayOnce((m) => missing.push(m), missing[0].slice("ctxbox: ".length)), false, "said already");
});

test("hello's answer names an unknown engine and a wrong version", () => {
  const good = { version: "0.1.0", defaultEngine: "keep-recent", engines: ["keep-recent", "legacy", "lossless"] };
  assert.deepEqual(helloProblems("/bin/ctxbox", good), []);
  assert.deepEqual(helloProblems("/bin/ctxbox", { ...good, defaultEngine: "/e/mine.wasm" }), []);
  const unknown = helloProblems("/bin/ctxbox", { ...good, defaultEngine: "keep-recnet" });
  assert.equal(unknown.length, 1);
  assert.match(unknown[0], /no engine `keep-recnet`.*keep-recent, lossless/);
  assert.doesNotMatch(unknown[0], /legacy/);
  assert.match(helloProblems("/bin/ctxbox", { ...good, version: "0.0.3" })[0], /too old/);
  assert.deepEqual(helloProblems("/bin/ctxbox", {}), [], "an older sidecar names neither");
});

test("the sidecar hands hello's answer to onHello at every start", async () => {
  const fake = fakeSidecar({ protocol: 2 });
  const answers: Record<string, unknown>[] = [];
  const sidecar = new Sidecar({ bin: fake.bin, args: [], onHello: (answer) => answers.push(answer) });
  // The sidecar's process and pipes are unref'd (it must never keep OpenClaw alive): hold the loop open.
  const alive = setInterval(() => undefined, 1_000);
  try {
    await sidecar.connect();
  } finally {
    sidecar.close();
    clearInterval(alive);
  }
  assert.equal(answers.length, 1);
  assert.equal(answers[0].protocol, 2);
});

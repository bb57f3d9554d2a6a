// A fake `ctxbox` binary for the unit tests: a script that runs the scripted
// fake sidecar (fake-sidecar.ts) with the given options, and what the
// plugin sent it. Its directories are removed when the test file ends.

import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after } from "node:test";
import { fileURLToPath } from "node:url";

const FAKE = fileURLToPath(new URL("./fake-sidecar.js", import.meta.url));

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The fake sidecar's options (see fake-sidecar.ts). */
export interface FakeOptions {
  /** 2: negotiates (1 or 2); any other: speaks only that version, as today's server does 1. */
  protocol: number;
  tools?: { name: string; description: string; parameters: object }[];
  busy?: Record<string, number>;
  /** The error code `busy` answers with (default `session-busy`). */
  busyCode?: string;
  quarantineOnError?: boolean;
  /** What `compact` answers at once (no reverse request). */
  compact?: object;
  /** Answer delays by method, ms. */
  delayMs?: Record<string, number>;
  /** `assemble` answers a note and the last this many messages. */
  keepLast?: number;
  /** Methods that, without a `sync`, find their session given up (commitTurn: `session-unknown`). */
  evictBefore?: string[];
}

/** One line the fake received, with when. */
export interface Logged {
  at: number;
  line: { id?: unknown; method?: string; params?: Record<string, any>; result?: any; error?: { code: string; message: string } };
}

/** A fake `ctxbox` binary (a script running the fake sidecar) and what it was sent. */
export function fakeSidecar(options: FakeOptions): { bin: string; dir: string; log: () => Logged[]; raw: () => string } {
  const dir = mkdtempSync(join(tmpdir(), "ctxbox-fake-"));
  dirs.push(dir);
  const logPath = join(dir, "received.jsonl");
  writeFileSync(logPath, "");
  writeFileSync(join(dir, "options.json"), JSON.stringify(options));
  const bin = join(dir, "ctxbox");
  // Answers `--version` and `doctor` as a sound ctxbox would (the plugin asks at start).
  writeFileSync(
    bin,
    `#!/bin/sh\ncase "$1" in\n  --version) echo "ctxbox 0.1.0"; exit 0 ;;\n  doctor) echo '{"ok":true,"version":"0.1.0","findings":[]}'; exit 0 ;;\nesac\n` +
      `exec "${process.execPath}" "${FAKE}" "${logPath}" "${join(dir, "options.json")}"\n`,
  );
  chmodSync(bin, 0o755);
  const raw = () => readFileSync(logPath, "utf8");
  const log = () =>
    raw()
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Logged);
  return { bin, dir, log, raw };
}

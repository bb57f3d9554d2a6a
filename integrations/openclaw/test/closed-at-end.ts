// What a unit-test file opens and must not leave behind: the sidecars it
// starts (closed) and the directories it makes (removed) when it ends.

import { rmSync } from "node:fs";
import { after } from "node:test";

import type { Sidecar } from "../src/sidecar.js";

/** Lists to push a file's sidecars and directories to; emptied when the file's tests end. */
export function closedAtEnd(): { opened: Sidecar[]; dirs: string[] } {
  const opened: Sidecar[] = [];
  const dirs: string[] = [];
  after(() => {
    for (const sidecar of opened) sidecar.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return { opened, dirs };
}

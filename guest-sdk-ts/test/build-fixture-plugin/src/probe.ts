import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "path";

/** The globals as the module's body saw them (they must exist before it runs). */
const globalsAtLoad = `${typeof process} ${typeof Buffer} ${typeof setImmediate}`;

/** Loads a module the way lossless-claw loads optional OpenClaw helpers. */
const importAtRunTime = Function("specifier", "return import(specifier)") as (specifier: string) => Promise<unknown>;

export async function probe(): Promise<Record<string, unknown>> {
  const packageJson = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  const require = createRequire(import.meta.url);
  const name = ["node", "path"].join(":");
  const viaVariable = (await import(name)) as { basename(p: string): string };
  let missing = "resolved";
  try {
    await importAtRunTime("openclaw/plugin-sdk/no-such-module");
  } catch (error) {
    missing = (error as Error).message;
  }
  mkdirSync(join("/home/engine", ".fixture", "logs"), { recursive: true });
  writeFileSync("/home/engine/.fixture/logs/a.log", "kept in memory");
  return {
    globalsAtLoad,
    version: packageJson.version,
    moduleUrl: import.meta.url,
    requirePath: (require("node:path") as { join(...p: string[]): string }).join("a", "b"),
    importVariable: viaVariable.basename("/x/y.txt"),
    importCore: typeof (await importAtRunTime("openclaw/plugin-sdk/core")),
    missing,
    unicodeClass: /\p{Lu}+/u.exec("abcDÉF")?.[0],
    written: readFileSync("/home/engine/.fixture/logs/a.log", "utf8"),
  };
}

/**
 * `openclaw/plugin-sdk/core` inside a ctxbox engine: the functions context
 * engines use, with OpenClaw's meaning.
 * - `delegateCompactionToRuntime`: the runtime's own compaction of the
 *   session, here the host's native compaction (`host.delegate-compaction`),
 *   for the current session and during `compact` only;
 * - `buildMemorySystemPromptAddition` / `prepareMemorySystemPromptAddition`:
 *   the active memory plugin's prompt section; the sandbox has no memory
 *   plugin, so there is none (`undefined`), as in an OpenClaw without one;
 * - `definePluginEntry`, `emptyPluginConfigSchema`, `jsonResult`: the entry
 *   and tool-result helpers.
 */
import { delegateCompaction } from "../../host.js";
import { requireSession } from "../call.js";
import { compactParamsFromOpenClaw, compactResultToOpenClaw, type OpenClawCompactResult } from "../compaction.js";

/** Runs the host's native compaction of the current session with OpenClaw's params. */
export async function delegateCompactionToRuntime(params: Record<string, unknown>): Promise<OpenClawCompactResult> {
  const call = requireSession("delegateCompactionToRuntime", params.sessionId);
  if (call.operation !== "compact") {
    throw new Error(`delegateCompactionToRuntime: the host compacts only during \`compact\`, not \`${call.operation}\``);
  }
  return compactResultToOpenClaw(delegateCompaction(compactParamsFromOpenClaw(params)));
}

/** The memory plugin's system-prompt section: none in the sandbox. */
export function buildMemorySystemPromptAddition(_params: Record<string, unknown>): string | undefined {
  return undefined;
}

/** {@link buildMemorySystemPromptAddition}, prepared ahead: none in the sandbox. */
export async function prepareMemorySystemPromptAddition(_params: Record<string, unknown>): Promise<string | undefined> {
  return undefined;
}

/** A plugin's configuration schema that accepts only an empty object, as OpenClaw's. */
export function emptyPluginConfigSchema(): Record<string, unknown> {
  return {
    safeParse(value: unknown) {
      const empty =
        value === undefined ||
        (value !== null && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length === 0);
      return empty ? { success: true, data: value } : { success: false, error: { issues: [{ path: [], message: "config must be empty" }] } };
    },
    jsonSchema: { type: "object", additionalProperties: false, properties: {} },
  };
}

/** A plugin entry: the definition OpenClaw loads, its `configSchema` defaulting to {@link emptyPluginConfigSchema}. */
export function definePluginEntry<T extends { register: (api: never) => unknown; configSchema?: unknown }>(entry: T): T {
  return { ...entry, configSchema: entry.configSchema ?? emptyPluginConfigSchema() };
}

/** A tool result holding `payload` as pretty JSON text, with `payload` as its details. */
export function jsonResult(payload: unknown): { content: { type: "text"; text: string }[]; details: unknown } {
  return { content: [{ type: "text", text: JSON.stringify(payload, null, 2) }], details: payload };
}

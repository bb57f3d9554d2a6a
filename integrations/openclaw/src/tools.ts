// The engine's tools in OpenClaw (PROTOCOL.md version 2: `tools`,
// `callTool`). OpenClaw takes only tools its manifest declares
// (`contracts.tools`), and asks a plugin's tool factories synchronously for
// each run: so each declared `ctxbox_<name>` gets a factory that answers from
// the list the sidecar last reported (asked again each turn, and whenever the
// sidecar restarted) and offers the tool only while the engine offers it.

import { readFileSync } from "node:fs";

import { Sidecar, SidecarError, withTimeout } from "./sidecar.js";
import type { AgentTool, ToolContext, ToolResult } from "./types.js";

/** What an engine's tool is called in OpenClaw: this prefix and its own name. */
export const TOOL_PREFIX = "ctxbox_";

/** A tool as the sidecar reports it. */
export interface EngineTool {
  name: string;
  description: string;
  /** A JSON Schema object. */
  parameters: Record<string, unknown>;
}

/** The `ctxbox_…` names a plugin manifest (`openclaw.plugin.json`) declares in `contracts.tools`. */
export function declaredTools(manifestPath: string | URL): string[] {
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as { contracts?: { tools?: unknown } };
  const tools = manifest.contracts?.tools;
  if (!Array.isArray(tools)) return [];
  return tools.filter((name): name is string => typeof name === "string" && name.startsWith(TOOL_PREFIX) && name.length > TOOL_PREFIX.length);
}

/** The configured engine's tools as the running sidecar last reported them. */
export class ToolCatalog {
  private known: { generation: number; tools: Map<string, EngineTool> } | undefined;
  private asking: Promise<void> | undefined;
  /** The last failure warned of, so a sidecar that stays down is not reported at every lookup. */
  private problem: string | undefined;

  constructor(
    private readonly sidecar: Sidecar,
    private readonly options: { engine: string; timeoutMs: number; warn: (message: string) => void },
  ) {}

  /** Whether the list is the running sidecar's. */
  get fresh(): boolean {
    return this.known !== undefined && this.known.generation === this.sidecar.generation && this.sidecar.protocol !== undefined;
  }

  /**
   * The engine's tool `name`, or undefined when the engine does not offer it
   * or the running sidecar has not been asked yet (it is asked then, for the
   * runs after this one).
   */
  lookup(name: string): EngineTool | undefined {
    if (!this.fresh) {
      void this.refresh();
      return undefined;
    }
    return this.known?.tools.get(name);
  }

  /** Asks the sidecar for the engine's tools (once at a time); never rejects. */
  refresh(): Promise<void> {
    this.asking ??= this.ask()
      .then(
        () => {
          this.problem = undefined;
        },
        (error: unknown) => {
          const problem = error instanceof Error ? error.message : String(error);
          if (problem !== this.problem) this.options.warn(`ctxbox could not list the engine's tools: ${problem}`);
          this.problem = problem;
        },
      )
      .finally(() => {
        this.asking = undefined;
      });
    return this.asking;
  }

  private async ask(): Promise<void> {
    const { engine, timeoutMs } = this.options;
    await withTimeout(this.sidecar.connect(), timeoutMs, "the sidecar did not start in time");
    const generation = this.sidecar.generation;
    // Protocol 1 has no tools.
    if ((this.sidecar.protocol ?? 1) < 2) {
      this.known = { generation, tools: new Map() };
      return;
    }
    const answer = (await this.sidecar.call("tools", { engine }, timeoutMs)) as { tools?: unknown };
    if (this.sidecar.generation !== generation) return;
    const tools = new Map<string, EngineTool>();
    for (const tool of Array.isArray(answer?.tools) ? answer.tools : []) {
      const { name, description, parameters } = (tool ?? {}) as Partial<EngineTool>;
      if (typeof name !== "string" || name === "" || typeof parameters !== "object" || parameters === null || Array.isArray(parameters)) {
        this.options.warn(`ctxbox: the engine reported a tool without a name or a parameters object: ${JSON.stringify(tool)?.slice(0, 200)}`);
        continue;
      }
      tools.set(name, { name, description: typeof description === "string" ? description : "", parameters });
    }
    for (const tool of tools.values()) tool.description = shownNames(tool.description, tools.keys());
    this.known = { generation, tools };
  }
}

/**
 * `description` with each of the engine's tool `names` it mentions in
 * backticks (`` `expand` ``) renamed as the model sees the tool
 * (`` `ctxbox_expand` ``): an engine describes its tools by its own names.
 */
export function shownNames(description: string, names: Iterable<string>): string {
  let shown = description;
  for (const name of names) shown = shown.split(`\`${name}\``).join(`\`${TOOL_PREFIX}${name}\``);
  return shown;
}

/** What running a tool needs. */
export interface ToolOptions {
  /** The ctxbox engine every call names. */
  engine: string;
  /** Longest a tool call may take, ms. */
  callTimeoutMs: number;
}

/**
 * OpenClaw's tool factory for the declared `toolName` (`ctxbox_<name>`): for
 * a run with a session, the engine's tool `<name>` while the engine offers
 * it; otherwise null (OpenClaw then leaves it out).
 */
export function toolFactory(
  toolName: string,
  sidecar: Sidecar,
  catalog: ToolCatalog,
  options: ToolOptions,
): (ctx: ToolContext) => AgentTool | null {
  const name = toolName.slice(TOOL_PREFIX.length);
  return (ctx) => {
    const sessionId = ctx?.sessionId;
    if (!sessionId) return null;
    const definition = catalog.lookup(name);
    if (!definition) return null;
    return {
      name: toolName,
      label: `ctxbox ${name}`,
      description: definition.description,
      parameters: definition.parameters,
      execute: (_toolCallId, params, signal) =>
        runTool(sidecar, catalog, options, { sessionId, sessionKey: ctx.sessionKey }, name, params, signal),
    };
  };
}

/** Calls the engine's tool; throws an Error with the message the model should read when it fails. */
async function runTool(
  sidecar: Sidecar,
  catalog: ToolCatalog,
  options: ToolOptions,
  session: { sessionId: string; sessionKey?: string },
  name: string,
  args: unknown,
  signal: AbortSignal | undefined,
): Promise<ToolResult> {
  let answer: { content?: unknown; isError?: unknown; servedBy?: unknown };
  try {
    answer = (await sidecar.call(
      "callTool",
      { engine: options.engine, ...session, name, arguments: args ?? {} },
      options.callTimeoutMs,
      { signal },
    )) as typeof answer;
  } catch (error) {
    const why = error instanceof SidecarError ? `${error.code}: ${error.message}` : error instanceof Error ? error.message : String(error);
    throw new Error(`ctxbox could not run ${TOOL_PREFIX}${name}: ${why}`);
  }
  const text = typeof answer?.content === "string" ? answer.content : JSON.stringify(answer?.content ?? "");
  if (answer?.isError === true) {
    // The engine may have been quarantined: ask again which tools it offers.
    void catalog.refresh();
    throw new Error(text || `${TOOL_PREFIX}${name} failed`);
  }
  return { content: [{ type: "text", text }], details: { servedBy: answer?.servedBy } };
}

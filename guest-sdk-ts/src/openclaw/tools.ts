/**
 * The tools an OpenClaw plugin registers (`api.registerTool`) as the
 * engine's tools (`wit/tools.wit`): their TypeBox parameter schemas are JSON
 * Schema already (TypeBox's own markers are symbols, which JSON leaves out);
 * a call runs the tool's `execute(toolCallId, params)` and answers the text
 * of its result.
 */
import { isThenable } from "../console.js";
import { randomUUID } from "../node/crypto.js";
import type { Awaitable, ToolInit } from "../engine.js";
import { EngineFailure } from "../errors.js";
import type { SessionRef } from "../wit.js";
import type { ToolRegistration } from "./api.js";
import { openClawSessionKey } from "./call.js";

/** An OpenClaw agent tool, as far as the sandbox uses it. */
interface AgentTool {
  name: string;
  label?: string;
  description?: string;
  parameters?: unknown;
  execute: (toolCallId: string, params: Record<string, unknown>) => unknown;
}

/** The tools one factory answered (a tool, a list of them, or none). */
function toolsOf(answer: unknown): AgentTool[] {
  const list = Array.isArray(answer) ? answer : answer == null ? [] : [answer];
  return list.filter(
    (tool): tool is AgentTool =>
      tool !== null && typeof tool === "object" && typeof tool.name === "string" && typeof tool.execute === "function",
  );
}

/** The context OpenClaw gives a tool factory, for `session` (none when listing). */
function toolContext(session: SessionRef | undefined, config: Record<string, unknown>): Record<string, unknown> {
  return session === undefined ? { config } : { config, sessionId: session.sessionId, sessionKey: openClawSessionKey(session) };
}

/**
 * The engine's tool list: every registered factory asked without a session.
 * A factory that answers a Promise cannot be listed (the host asks for the
 * list synchronously); its declared names are listed with an empty schema.
 */
export function listRegisteredTools(registrations: ToolRegistration[], config: Record<string, unknown>): ToolInit[] {
  return registrations.flatMap((registration) => {
    const answer = registration.factory(toolContext(undefined, config));
    if (isThenable(answer)) {
      return registration.names.map((name) => ({ name, description: name, parameters: { type: "object" } }));
    }
    return toolsOf(answer).map((tool) => ({
      name: tool.name,
      description: tool.description ?? tool.label ?? tool.name,
      parameters: (tool.parameters as Record<string, unknown> | undefined) ?? { type: "object", properties: {} },
    }));
  });
}

/** A tool call's id: the contract passes none, OpenClaw's tools want one. */
function toolCallId(): string {
  return `ctxbox-${randomUUID()}`;
}

/** The text the model reads of a tool's result: its text blocks, else its details (or the result) as JSON. */
export function resultText(result: unknown): string {
  const { content, details } = (result ?? {}) as { content?: unknown; details?: unknown };
  if (Array.isArray(content)) {
    const texts = content.flatMap((block) =>
      block && typeof block === "object" && (block as { type?: unknown }).type === "text" && typeof (block as { text?: unknown }).text === "string"
        ? [(block as { text: string }).text]
        : [],
    );
    if (texts.length > 0) return texts.join("\n");
  }
  if (typeof result === "string") return result;
  return JSON.stringify(details ?? result ?? null);
}

/** Answers the model's call of tool `name` with `params` for `session`. */
export async function callRegisteredTool(
  registrations: ToolRegistration[],
  config: Record<string, unknown>,
  session: SessionRef,
  name: string,
  params: Record<string, unknown>,
): Promise<string> {
  const context = toolContext(session, config);
  // The registration that declared the name first; one without names may offer any.
  const candidates = [
    ...registrations.filter((registration) => registration.names.includes(name)),
    ...registrations.filter((registration) => registration.names.length === 0),
  ];
  for (const registration of candidates) {
    const answer: Awaitable<unknown> = registration.factory(context);
    const tool = toolsOf(isThenable(answer) ? await answer : answer).find((candidate) => candidate.name === name);
    if (tool) return resultText(await tool.execute(toolCallId(), params));
  }
  throw new EngineFailure("unsupported", `no tool \`${name}\``);
}

// Answers the sidecar's reverse `complete` requests (PROTOCOL.md, version 2)
// with OpenClaw's own model: the session-bound `runtimeContext.llm` of the
// call being served when it has one (bootstrap, maintain, compact),
// otherwise the plugin-wide `api.runtime.llm`.

import { SidecarError, type ReverseOptions, type ReverseRequest } from "./sidecar.js";
import type { LlmCapability, LlmCompleteParams, LlmCompleteResult, LlmMessage } from "./types.js";

/** What a `complete` answers (PROTOCOL.md). */
interface Completion {
  text: string;
  inputTokens?: number;
  outputTokens?: number;
  model?: string;
}

/** The reverse requests this client answers, with `pluginLlm` (`api.runtime.llm`) when OpenClaw offers it. */
export function reverseOptions(pluginLlm: LlmCapability | undefined): ReverseOptions {
  return {
    capabilities: ["complete"],
    handle: async (request) => {
      if (request.method !== "complete") {
        throw new SidecarError("unknown-method", `this client answers no ${request.method} requests`);
      }
      return complete(request, pluginLlm);
    },
  };
}

/** One completion: checks the request, asks the model, checks its answer. */
async function complete(request: ReverseRequest, pluginLlm: LlmCapability | undefined): Promise<Completion> {
  const params = completeParams(request.params, request.signal);
  const llm = request.context?.llm ?? pluginLlm;
  if (!llm) throw new SidecarError("unavailable", "OpenClaw offers this plugin no model (api.runtime.llm is missing)");
  let result: LlmCompleteResult;
  try {
    result = await llm.complete(params);
  } catch (error) {
    throw llmError(error, request.signal);
  }
  return completion(result);
}

/** OpenClaw's `llm.complete` parameters for a `complete` request's `params`; throws `failed` naming a bad field. */
function completeParams(params: Record<string, unknown>, signal: AbortSignal): LlmCompleteParams {
  const bad = (field: string, what: string) => new SidecarError("failed", `complete: \`${field}\` ${what}`);
  const messages = params.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw bad("messages", "must be a non-empty array");
  const checked: LlmMessage[] = messages.map((message: unknown, index) => {
    const { role, content } = (message ?? {}) as { role?: unknown; content?: unknown };
    if (role !== "system" && role !== "user" && role !== "assistant") {
      throw bad(`messages[${index}].role`, "must be system, user or assistant");
    }
    if (typeof content !== "string") throw bad(`messages[${index}].content`, "must be a string");
    return { role, content };
  });
  const out: LlmCompleteParams = { messages: checked, signal };
  if (params.systemPrompt !== undefined && params.systemPrompt !== null) {
    if (typeof params.systemPrompt !== "string") throw bad("systemPrompt", "must be a string");
    out.systemPrompt = params.systemPrompt;
  }
  if (params.maxTokens !== undefined && params.maxTokens !== null) {
    if (!Number.isInteger(params.maxTokens) || (params.maxTokens as number) < 1) throw bad("maxTokens", "must be a positive integer");
    out.maxTokens = params.maxTokens as number;
  }
  // OpenClaw's audit log names the purpose: say it is ctxbox's engine asking.
  const engine = typeof params.engine === "string" ? ` (${params.engine})` : "";
  const purpose = typeof params.purpose === "string" && params.purpose !== "" ? `: ${params.purpose}` : "";
  out.purpose = `ctxbox${engine}${purpose}`;
  return out;
}

/** The answer for a model result; throws `failed` or `cancelled` for one that carries no completion. */
function completion(result: LlmCompleteResult): Completion {
  const model = result.provider && result.model ? `${result.provider}/${result.model}` : result.model;
  if (result.stopReason === "aborted") throw new SidecarError("cancelled", "the model call was aborted");
  if (result.stopReason === "error") {
    throw new SidecarError("failed", `the model${model ? ` ${model}` : ""} failed (OpenClaw reported stopReason "error")`);
  }
  if (typeof result.text !== "string" || result.text.trim() === "") {
    throw new SidecarError("failed", `the model${model ? ` ${model}` : ""} answered no text`);
  }
  const answer: Completion = { text: result.text };
  if (Number.isFinite(result.usage?.inputTokens)) answer.inputTokens = result.usage!.inputTokens;
  if (Number.isFinite(result.usage?.outputTokens)) answer.outputTokens = result.usage!.outputTokens;
  if (model) answer.model = model;
  return answer;
}

/** The error answer for what `llm.complete` threw. */
function llmError(error: unknown, signal: AbortSignal): SidecarError {
  const { name, code, message } = (error ?? {}) as { name?: unknown; code?: unknown; message?: unknown };
  const text = typeof message === "string" ? message : String(error);
  if (signal.aborted || name === "AbortError" || code === "LLM_COMPLETION_ABORTED") {
    return new SidecarError("cancelled", `the model call was aborted: ${text}`);
  }
  // No model for this agent, no runtime to run one, or the operator's policy
  // denies it: asking again will not help.
  if (
    code === "LLM_COMPLETION_NOT_AUTHORIZED" ||
    code === "LLM_RUNTIME_UNAVAILABLE" ||
    /no model configured|requires an injected runtime config scope/i.test(text)
  ) {
    return new SidecarError("unavailable", text);
  }
  return new SidecarError("failed", typeof code === "string" ? `${code}: ${text}` : text);
}

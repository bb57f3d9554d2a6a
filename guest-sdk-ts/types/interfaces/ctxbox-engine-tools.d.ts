/// <reference path="./ctxbox-engine-types.d.ts" />
declare module 'ctxbox:engine/tools@0.1.0' {
  /**
   * The engine's tools (at most 16). Asked once per instance, before the
   * first call that needs them; the same for every session.
   */
  export function listTools(): Array<ToolDefinition>;
  /**
   * Answers the model's call to tool `name` with `arguments` (a JSON
   * object the model wrote: check it) in `session`. The answer is the
   * tool result the model reads (at most 256 KiB); an `engine-error`
   * answers the model with that error, as any failed tool does. The
   * history is not lent; read what the tool needs from `host.state`,
   * `host.index-search` or `host.read-transcript-delta`.
   */
  export function callTool(session: SessionRef, name: string, arguments: Json): string;
  export type SessionRef = import('ctxbox:engine/types@0.1.0').SessionRef;
  export type EngineError = import('ctxbox:engine/types@0.1.0').EngineError;
  export type Json = import('ctxbox:engine/types@0.1.0').Json;
  /**
   * A tool, as the model is told of it.
   */
  export interface ToolDefinition {
    /**
     * 1 to 64 characters of `a-z`, `A-Z`, `0-9`, `_` and `-`. A name a
     * host tool already has is not offered (an engine cannot shadow a
     * host tool); runtimes may prefix it (OpenClaw: `ctxbox_<name>`).
     */
    name: string,
    /**
     * What it does and when to use it, for the model (at most 2 KiB).
     */
    description: string,
    /**
     * Its arguments as a JSON Schema object (at most 16 KiB).
     */
    parameters: Json,
  }
}

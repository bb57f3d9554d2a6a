/**
 * `defineEngine`: an engine written as an object with `info` and `assemble`,
 * every other export filled with the reference's default behaviour (the same
 * defaults as the Rust SDK's `Engine` trait), every export guarded so that
 * whatever it throws reaches the host as an `engine-error` instead of a trap.
 * The engine's tools (`wit/tools.wit`) come with it: none by default.
 */
import { duringCall, installConsole, isThenable } from "./console.js";
import { EngineFailure, toEngineError } from "./errors.js";
import { delegateCompaction } from "./host.js";
import { readRange } from "./history.js";
import type {
  AfterTurnParams,
  AssembleParams,
  AssembleResult,
  BootstrapResult,
  CompactParams,
  CompactResult,
  EngineInfo,
  History,
  IngestBatchResult,
  IngestResult,
  Json,
  MaintainReason,
  MaintainResult,
  MessageEntry,
  SessionRef,
  SubagentEndReason,
  SubagentSpawn,
  ToolDefinition,
} from "./wit.js";

/**
 * What a method answers: the value, or (an `async` method) a Promise of it.
 * The export waits for the Promise (componentize-js runs the event loop, with
 * its timers, until it settles; host calls stay synchronous); a rejection is
 * answered as the export's `engine-error`, like a throw.
 */
export type Awaitable<T> = T | Promise<T>;

/** `engine-info` with everything but `id` and `name` optional (`ownsCompaction` defaults to false). */
export type EngineInfoInit = Omit<EngineInfo, "ownsCompaction"> & { ownsCompaction?: boolean };

/**
 * A tool as an engine declares it: a {@link ToolDefinition}, whose
 * `parameters` (a JSON Schema object) may also be given as an object rather
 * than JSON text.
 */
export type ToolInit = Omit<ToolDefinition, "parameters"> & { parameters: Json | Record<string, unknown> };

/**
 * What an engine author writes. Only `info` and `assemble` are required; the
 * methods run with the completed engine as `this`, so a method may call
 * another (the default `ingestBatch` calls `ingest`, the default `afterTurn`
 * calls `ingestBatch`). Every method but `info` and `tools` may be `async`
 * (see {@link Awaitable}); `this.ingest(…)` and the like then answer Promises.
 */
export interface EngineSpec {
  /** Who the engine is; the host asks once per load. */
  info: EngineInfoInit | (() => EngineInfoInit);
  /** Builds the prompt for the next model call from `history`. */
  assemble(this: Engine, session: SessionRef, history: History, params: AssembleParams): Awaitable<AssembleResult>;
  /** First sight of a session. Default: nothing to import. */
  bootstrap?(this: Engine, session: SessionRef, history: History): Awaitable<BootstrapResult>;
  /** A message was appended. Default: not ingested (the host's transcript keeps it). */
  ingest?(this: Engine, session: SessionRef, entry: MessageEntry, isHeartbeat: boolean): Awaitable<IngestResult>;
  /** Several messages were appended. Default: `ingest` each, count the ingested ones. */
  ingestBatch?(this: Engine, session: SessionRef, entries: MessageEntry[], isHeartbeat: boolean): Awaitable<IngestBatchResult>;
  /** Makes the context smaller. Default: the host's native compaction (`host.delegateCompaction`). */
  compact?(this: Engine, session: SessionRef, history: History, params: CompactParams): Awaitable<CompactResult>;
  /** The turn is over. Default: `ingestBatch` the turn's new messages (from `prePromptMessageCount`). */
  afterTurn?(this: Engine, session: SessionRef, history: History, params: AfterTurnParams): Awaitable<void>;
  /** Housekeeping. Default: nothing changed. */
  maintain?(
    this: Engine,
    session: SessionRef,
    history: History,
    reason: MaintainReason,
    runtimeContext: Json | undefined,
  ): Awaitable<MaintainResult>;
  /** A subagent is about to be spawned. Default: nothing to undo (`undefined`). */
  prepareSubagentSpawn?(this: Engine, spawn: SubagentSpawn): Awaitable<string | undefined>;
  /** Undoes a preparation after a failed spawn. Default: nothing. */
  rollbackSubagentSpawn?(this: Engine, preparationId: string): Awaitable<void>;
  /** A subagent's session ended. Default: nothing. */
  onSubagentEnded?(this: Engine, childSessionKey: string, reason: SubagentEndReason): Awaitable<void>;
  /** The instance is about to be dropped. Default: nothing. */
  dispose?(this: Engine): Awaitable<void>;
  /**
   * Tools the engine offers the model (at most 16), the same for every
   * session; the host asks once per instance. Names are 1 to 64 of
   * `a-z A-Z 0-9 _ -`. Default: none.
   */
  tools?: ToolInit[] | (() => ToolInit[]);
  /**
   * Answers the model's call to one of `tools`: `argumentsJson` is the JSON
   * object the model wrote (check it, e.g. with {@link toolArguments}). The
   * answer is the tool result the model reads (at most 256 KiB). Whatever it
   * throws is shown to the model as the tool's failure (an `engine-error`);
   * it does not quarantine the engine. The history is not lent: read what a
   * tool needs from `state`, `host.index` or `host.readTranscriptDelta`.
   * Default: no such tool (`unsupported`).
   */
  callTool?(this: Engine, session: SessionRef, name: string, argumentsJson: Json): Awaitable<string>;
}

/** The complete `engine` export: every function of `wit/engine.wit`. */
export interface Engine {
  info(): EngineInfo;
  assemble(session: SessionRef, history: History, params: AssembleParams): Awaitable<AssembleResult>;
  bootstrap(session: SessionRef, history: History): Awaitable<BootstrapResult>;
  ingest(session: SessionRef, entry: MessageEntry, isHeartbeat: boolean): Awaitable<IngestResult>;
  ingestBatch(session: SessionRef, entries: MessageEntry[], isHeartbeat: boolean): Awaitable<IngestBatchResult>;
  compact(session: SessionRef, history: History, params: CompactParams): Awaitable<CompactResult>;
  afterTurn(session: SessionRef, history: History, params: AfterTurnParams): Awaitable<void>;
  /**
   * Housekeeping. `runtimeContext` (JSON) holds the `sessionTarget` (`agentId`,
   * `sessionId`, `sessionKey`, `storePath`), `workspaceDir`, `agentDir`, `cwd`,
   * and after a compaction its `trigger` and, when it rotated the session,
   * `previousSessionId`.
   */
  maintain(session: SessionRef, history: History, reason: MaintainReason, runtimeContext: Json | undefined): Awaitable<MaintainResult>;
  prepareSubagentSpawn(spawn: SubagentSpawn): Awaitable<string | undefined>;
  rollbackSubagentSpawn(preparationId: string): Awaitable<void>;
  onSubagentEnded(childSessionKey: string, reason: SubagentEndReason): Awaitable<void>;
  dispose(): Awaitable<void>;
}

/** The `tools` export: every function of `wit/tools.wit`. */
export interface Tools {
  listTools(): ToolDefinition[];
  callTool(session: SessionRef, name: string, argumentsJson: Json): Awaitable<string>;
}

/**
 * Where `defineEngine` keeps an engine's {@link Tools} on the `engine` object
 * it returns. `ctxbox-ts-build` exports them from there as the component's
 * `tools`, so an engine module needs to export only `engine`.
 */
export const TOOLS: unique symbol = Symbol.for("@ctxbox/guest/tools");

/** What an engine without tools answers to a tool call. */
function noSuchTool(name: string): never {
  throw new EngineFailure("unsupported", `no tool \`${name}\``);
}

/**
 * The `tools` export of `engine`: the tools `defineEngine` was given, or
 * none. `ctxbox-ts-build` exports it for you; a module componentized some
 * other way writes `export const tools = toolsOf(engine);`.
 */
export function toolsOf(engine: Engine): Tools {
  return (
    (engine as Engine & { [TOOLS]?: Tools })[TOOLS] ?? {
      listTools: () => [],
      callTool: guarded((_session: SessionRef, name: string) => noSuchTool(name)),
    }
  );
}

/**
 * The arguments of a tool call, parsed: the model wrote them, so anything but
 * a JSON object is thrown as an `invalid-input` {@link EngineFailure} (which
 * the model is shown). The fields are not checked: do that before use.
 */
export function toolArguments<T extends object = Record<string, unknown>>(argumentsJson: Json): T {
  let value: unknown;
  try {
    value = JSON.parse(argumentsJson);
  } catch (error) {
    throw new EngineFailure("invalid-input", `the arguments are not JSON: ${(error as Error).message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new EngineFailure("invalid-input", "the arguments are not a JSON object");
  }
  return value as T;
}

/** `tool` with its parameters as JSON text. */
function definition(tool: ToolInit): ToolDefinition {
  const { name, description, parameters } = tool;
  return { name, description, parameters: typeof parameters === "string" ? parameters : JSON.stringify(parameters) };
}

/** The reference's behaviour for every optional export. */
const defaults: Omit<Engine, "info" | "assemble"> = {
  bootstrap: () => ({ bootstrapped: false }),
  ingest: () => ({ ingested: false }),
  ingestBatch(session, entries, isHeartbeat) {
    let ingestedCount = 0;
    // Synchronous while `ingest` is; awaiting each answer once it is async.
    const from = (start: number): Awaitable<IngestBatchResult> => {
      for (let at = start; at < entries.length; at += 1) {
        const answer = this.ingest(session, entries[at] as MessageEntry, isHeartbeat);
        if (isThenable(answer)) {
          return answer.then((result) => {
            if (result.ingested) ingestedCount += 1;
            return from(at + 1);
          });
        }
        if (answer.ingested) ingestedCount += 1;
      }
      return { ingestedCount };
    };
    return from(0);
  },
  compact: (_session, _history, params) => delegateCompaction(params),
  afterTurn(session, history, params) {
    const fresh = readRange(history, params.prePromptMessageCount, history.len());
    if (fresh.length === 0) return;
    const answer = this.ingestBatch(session, fresh, params.isHeartbeat);
    if (isThenable(answer)) return answer.then(() => undefined);
  },
  maintain: () => ({ changed: false, rewrittenEntries: 0 }),
  prepareSubagentSpawn: () => undefined,
  rollbackSubagentSpawn: () => {},
  onSubagentEnded: () => {},
  dispose: () => {},
};

/**
 * Runs `run`, turning anything it throws, or the rejection of the Promise an
 * `async` method answers, into the `engine-error` the export answers.
 */
function guarded<A extends unknown[], R>(run: (...args: A) => R): (...args: A) => R {
  return (...args: A): R => {
    let answer: R;
    try {
      answer = duringCall(() => run(...args));
    } catch (thrown) {
      // componentize-js answers `err(value)` for a thrown non-Error value.
      throw toEngineError(thrown);
    }
    if (!isThenable(answer)) return answer;
    return answer.then(undefined, (thrown: unknown) => {
      throw toEngineError(thrown);
    }) as R;
  };
}

/**
 * The `engine` export of an engine module: `export const engine = defineEngine({...})`.
 * Also installs a `console` that writes to `host.log`.
 */
export function defineEngine(spec: EngineSpec): Engine {
  installConsole();
  const { info, tools, callTool, ...methods } = spec;
  const complete = { ...defaults, ...methods } as Omit<Engine, "info">;
  const engine = {
    info: (): EngineInfo => {
      const init = typeof info === "function" ? info() : info;
      return { ...init, ownsCompaction: init.ownsCompaction ?? false };
    },
  } as Engine;
  for (const name of Object.keys(complete) as (keyof typeof complete)[]) {
    const method = complete[name] as (...args: unknown[]) => unknown;
    (engine as unknown as Record<string, unknown>)[name] = guarded((...args: unknown[]) =>
      method.apply(engine, args),
    );
  }
  engine.info = guarded(engine.info);
  const answerTool = callTool ?? ((_session: SessionRef, name: string): string => noSuchTool(name));
  const toolsExport: Tools = {
    // `list-tools` answers no error: whatever `tools` throws traps the call
    // (the host quarantines the engine), as a panic in the Rust SDK does.
    listTools: () =>
      duringCall(() => (typeof tools === "function" ? tools() : (tools ?? [])).map(definition)),
    callTool: guarded((session: SessionRef, name: string, argumentsJson: Json) =>
      answerTool.call(engine, session, name, argumentsJson),
    ),
  };
  Object.defineProperty(engine, TOOLS, { value: toolsExport, enumerable: false });
  return engine;
}

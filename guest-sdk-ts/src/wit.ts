/// <reference path="../types/wit.d.ts" />
/// <reference path="./globals.d.ts" />
/**
 * The contract's types, re-exported under short names from the declarations
 * `jco guest-types` generates from `wit/` (checked in under `types/`).
 */
import type * as types from "ctxbox:engine/types@0.1.0";
import type * as engine from "ctxbox:engine/engine@0.1.0";
import type * as host from "ctxbox:engine/host@0.1.0";
import type * as history from "ctxbox:engine/history@0.1.0";
import type * as tools from "ctxbox:engine/tools@0.1.0";

export type Json = types.Json;
export type Usage = types.Usage;
export type ContentBlock = types.ContentBlock;
export type ToolCall = types.ToolCall;
export type StopReason = types.StopReason;
export type AgentMessage = types.AgentMessage;
export type MessageKind = types.MessageKind;
export type MessageEntry = types.MessageEntry;
export type SessionRef = types.SessionRef;
export type HostParam = types.HostParam;
export type CompactParams = types.CompactParams;
export type CompactResult = types.CompactResult;
export type EngineError = types.EngineError;
export type EngineErrorKind = types.EngineErrorKind;

export type EngineInfo = engine.EngineInfo;
export type BootstrapResult = engine.BootstrapResult;
export type IngestResult = engine.IngestResult;
export type IngestBatchResult = engine.IngestBatchResult;
export type AssembleParams = engine.AssembleParams;
export type AssembledItem = engine.AssembledItem;
export type AssembleResult = engine.AssembleResult;
export type AfterTurnParams = engine.AfterTurnParams;
export type MaintainReason = engine.MaintainReason;
export type MaintainResult = engine.MaintainResult;
export type SubagentSpawn = engine.SubagentSpawn;
export type SubagentEndReason = engine.SubagentEndReason;

export type LogLevel = host.LogLevel;
export type HostError = host.HostError;
export type HostErrorKind = host.HostErrorKind;
export type TranscriptDelta = host.TranscriptDelta;
export type TranscriptReset = host.TranscriptReset;
export type StateEntry = host.StateEntry;
export type CompletionRole = host.CompletionRole;
export type CompletionMessage = host.CompletionMessage;
export type CompletionRequest = host.CompletionRequest;
export type Completion = host.Completion;
export type IndexScope = host.IndexScope;
export type IndexDocument = host.IndexDocument;
export type IndexQuery = host.IndexQuery;
export type IndexHit = host.IndexHit;
export type IndexPage = host.IndexPage;

export type History = history.History;
export type ToolPairing = history.ToolPairing;

export type ToolDefinition = tools.ToolDefinition;

// The `ctxbox:engine/host` import for the OpenClaw tests that load SDK
// sources in Node (openclaw-source.mjs): every function answered by one
// fake-host.mjs host, `fake`, whose records (`logs`, `completions`,
// `delegated`, `state`) and settings (`config`, `modelError`) the tests read
// and set; a test replaces a function with `fake.host.<name> = …`.
import { fakeHost } from "./fake-host.mjs";

export const fake = fakeHost();
fake.host = fake.imports["ctxbox:engine/host"];
const call = (name) => (...args) => fake.host[name](...args);

export const log = call("log");
export const reportProgress = call("reportProgress");
export const aborted = call("aborted");
export const engineConfig = call("engineConfig");
export const runtimeSettings = call("runtimeSettings");
export const estimateTokens = call("estimateTokens");
export const delegateCompaction = call("delegateCompaction");
export const summarize = call("summarize");
export const readTranscriptDelta = call("readTranscriptDelta");
export const stateGet = call("stateGet");
export const stateSet = call("stateSet");
export const stateDelete = call("stateDelete");
export const stateScan = call("stateScan");
export const complete = call("complete");
export const indexPut = call("indexPut");
export const indexDelete = call("indexDelete");
export const indexSearch = call("indexSearch");

/**
 * `openclaw/plugin-sdk` (the SDK's root module) inside a ctxbox engine: the
 * functions of the sandbox's `openclaw/plugin-sdk/core`, which OpenClaw's
 * root module exports too.
 */
export * from "./core.js";

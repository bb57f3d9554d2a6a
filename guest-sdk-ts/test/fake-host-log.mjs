// The `ctxbox:engine/host` import as sdk-source.mjs offers it: only `log`,
// into `logs`.
export const logs = [];
export const log = (level, message) => logs.push({ level, message });

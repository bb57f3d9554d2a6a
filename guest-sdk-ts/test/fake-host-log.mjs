// The `ctxbox:engine/host` import as sdk-source.mjs offers it: `log` (into
// `logs`) and `engineConfig` (the JSON text in `fakeConfig.json`).
export const logs = [];
export const fakeConfig = { json: undefined };
export const log = (level, message) => logs.push({ level, message });
export const engineConfig = () => fakeConfig.json;

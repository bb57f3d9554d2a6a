// An OpenClaw plugin as its authors write one (its published entry is
// dist/index.js, built from this file): a context engine and one tool,
// `probe`, whose answer reports what the sandbox's layers gave it.
import { probe } from "./src/probe.js";

type Api = {
  registerContextEngine(id: string, factory: () => unknown): void;
  registerTool(tool: unknown): void;
};

export default {
  id: "build-fixture",
  name: "Build Fixture",
  register(api: Api) {
    api.registerContextEngine("build-fixture", () => ({
      info: { id: "build-fixture", name: "Build Fixture", ownsCompaction: false },
      ingest: async () => ({ ingested: true }),
      assemble: async ({ messages }: { messages: unknown[] }) => ({ messages, estimatedTokens: 0 }),
      compact: async () => ({ ok: true, compacted: false, reason: "nothing to do" }),
    }));
    api.registerTool({
      name: "probe",
      description: "What the sandbox's Node layers answer",
      parameters: { type: "object", properties: {} },
      execute: async () => ({ content: [{ type: "text", text: JSON.stringify(await probe()) }] }),
    });
  },
};

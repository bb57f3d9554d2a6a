// A test engine for the SDK's unit tests: each export exercises one SDK
// feature, chosen by the session id, so the tests can drive it through the
// transpiled component with a fake host.
import {
  EngineFailure,
  assembled,
  defineEngine,
  fittingSuffix,
  host,
  insert,
  keep,
  messageText,
  readRange,
  splitPair,
  state,
  toArray,
  tokens,
  userText,
} from "@ctxbox/guest";

// Logged while the build pre-initializes the module: dropped, not a failed build.
console.log("top level");

export const engine = defineEngine({
  info: () => ({ id: "sdk-test", name: "SDK test engine" }),

  ingest(session, entry) {
    state.setJson(`ingested/${session.sessionId}/${entry.id}`, entry);
    return { ingested: !entry.id.startsWith("skip") };
  },

  assemble(session, history, params) {
    switch (session.sessionId) {
      case "throw-error":
        throw new Error("boom");
      case "throw-failure":
        throw new EngineFailure("invalid-input", "the input is wrong");
      case "throw-value":
        throw { why: "not an Error" };
      case "host-error":
        host.summarize("text", { maxTokens: 10 });
        break;
      case "console":
        console.log("hello", { n: 1, big: 2n });
        console.warn("careful");
        console.error(new Error("shown"));
        break;
      case "state": {
        state.setJson("k/json", { when: 1700000000000n, list: [1, "two"] });
        state.setText("k/text", "héllo");
        const back = state.getJson<{ when: bigint }>("k/json");
        const scanned = state.scan("k/").map((entry) => entry.key);
        const summary = JSON.stringify({
          bigint: typeof back?.when === "bigint" && back.when === 1700000000000n,
          text: state.getText("k/text"),
          scanned,
          deleted: state.delete("k/text"),
          missing: state.get("k/none") === undefined,
        });
        return assembled([insert(userText(summary))], 1);
      }
      case "history": {
        const all = toArray(history);
        const summary = JSON.stringify({
          read: all.length,
          ids: readRange(history, 1, 3).map((entry) => entry.id),
          split: [0, 1, 2, 3, 4].map((cut) => splitPair(history, cut) ?? null),
          text: all[0] ? messageText(all[0].message) : "",
          tokens: tokens(history, 0, history.len()),
          fitting: [0, 20, 30, Infinity].map((max) => fittingSuffix(history, max)),
          estimate: host.estimateTokens(all),
        });
        return assembled([insert(userText(summary))], 1);
      }
    }
    const len = history.len();
    const budget = Number(params.tokenBudget ?? 0n);
    return assembled([keep(0, len)], tokens(history, 0, len) + budget * 0);
  },
});

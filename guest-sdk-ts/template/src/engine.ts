/**
 * `{name}`: a ctxbox context engine. `assemble` keeps the newest messages that
 * fit the budget; every other export has the reference's default behaviour
 * (compaction is delegated to the host).
 *
 * What must outlive the instance goes to the host: `state` (key-value),
 * `host.index` (full-text search) or the engine's own SQL database,
 * `new DatabaseSync("memory.db")`, shaped like `node:sqlite`'s (see the SDK's
 * README, "SQL: DatabaseSync", in vendor/ctxbox-guest).
 */
import { assembled, defineEngine, fittingSuffix, keep, splitPair, tokens } from "@ctxbox/guest";

export const engine = defineEngine({
  info: { id: "{name}", name: "{name}", version: "0.1.0" },

  assemble(_session, history, params) {
    const len = history.len();
    const budget = params.tokenBudget === undefined ? Infinity : Number(params.tokenBudget);
    // The newest messages that fit, never opening on a tool result whose
    // call is left out: one host call (each one costs tens of microseconds
    // in a JavaScript engine, so ask the host for answers, not for a loop).
    let start = fittingSuffix(history, budget);
    if (start >= len && len > 0) {
      // Nothing fits: the newest message (with its call) beats an empty prompt.
      start = splitPair(history, len - 1)?.[0] ?? len - 1;
    }
    console.debug(`keeping ${len - start} of ${len} messages`);
    return assembled([keep(start, len)], tokens(history, start, len));
  },
});

//! What the runner tells engines about the run around a call, in the shapes
//! the reference uses: the runtime settings of `assemble`, `compact` and
//! `after-turn` (schema version 1: runtime mode, model, engine selection,
//! limits, diagnostics), and the runtime context of a compaction (its
//! `trigger`, the observed `currentTokenCount`, the overflow attempt), of
//! `after-turn` (the last prompt's `currentTokenCount`) and of `maintain`
//! (the compaction's `trigger`, the agent's `workspaceDir` and `agentDir`,
//! the session's `cwd`, the predecessor of a rotated session). Each runtime
//! context also carries the `sessionTarget` (`agentId`, `sessionId`,
//! `sessionKey`, `storePath`), as the reference's does.
//!
//! Both are JSON, and both reach an engine only if its
//! `accepted-host-params` lets them (the guard projects them away otherwise).

use serde_json::{Map, Value, json};

use super::{Session, TurnRunner};
use crate::contract::types::{AgentMessage, Json, MaintainReason, MessageEntry, Usage};

/// What asked for a compaction (the reference's `trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CompactionTrigger {
    /// The pre-prompt check: the context would not fit the budget.
    Budget,
    /// The provider refused the prompt as too large.
    Overflow,
    /// A user asked (`/compact`).
    Manual,
    /// The model timed out on a nearly full prompt.
    TimeoutRecovery,
}

impl CompactionTrigger {
    /// The reference's name for it.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Budget => "budget",
            Self::Overflow => "overflow",
            Self::Manual => "manual",
            Self::TimeoutRecovery => "timeout_recovery",
        }
    }

    /// Why the run is degraded while this compaction runs, if it is.
    fn degraded_reason(self) -> Option<&'static str> {
        match self {
            Self::Overflow => Some("context_overflow"),
            Self::Budget | Self::Manual | Self::TimeoutRecovery => None,
        }
    }
}

/// Which overflow recovery attempt a compaction is, of how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Attempt {
    /// 1-based.
    pub(super) number: u32,
    /// The turn's cap.
    pub(super) of: u32,
}

impl TurnRunner {
    /// The runtime settings of a call, degraded for `reason` when given.
    pub(super) fn runtime_settings(&self, degraded_reason: Option<&str>) -> Json {
        let model = self.config.model.as_deref();
        json!({
            "schemaVersion": 1,
            "runtime": {
                "host": "ctxbox",
                "mode": if degraded_reason.is_some() { "degraded" } else { "normal" },
                "harnessId": Value::Null,
                "runtimeId": Value::Null,
            },
            "model": {
                "requested": model,
                "resolved": model,
                "provider": Value::Null,
                "family": Value::Null,
            },
            "contextEngineSelection": {
                "selectedId": self.engine.selected_id(),
                "source": "configured",
            },
            "executionHost": {
                "id": "ctxbox",
                "label": concat!("ctxbox ", env!("CARGO_PKG_VERSION")),
            },
            "limits": {
                "promptTokenBudget": self.config.prompt_budget(),
                "maxOutputTokens": self.config.reserve(),
            },
            "diagnostics": {
                "fallbackReason": Value::Null,
                "degradedReason": degraded_reason,
            },
        })
        .to_string()
    }

    /// The runtime settings of a compaction `trigger` asked for.
    pub(super) fn compaction_settings(&self, trigger: CompactionTrigger) -> Json {
        self.runtime_settings(trigger.degraded_reason())
    }
}

/// The runtime context of a compaction. `last_call` is the usage the
/// session's last model call reported: a recovery compaction's context
/// carries it as the reference's `promptCache.lastCallUsage` (that call's
/// own figures, not the turn's sum), for engines that keep a provider's
/// prompt cache in mind.
pub(super) fn compaction_context(
    trigger: CompactionTrigger,
    current_token_count: Option<u64>,
    attempt: Option<Attempt>,
    last_call: Option<&Usage>,
) -> Json {
    let mut context = json!({ "trigger": trigger.as_str() });
    if let Some(usage) = last_call {
        context["promptCache"] = json!({
            "lastCallUsage": {
                "input": usage.input,
                "output": usage.output,
                "cacheRead": usage.cache_read,
                "cacheWrite": usage.cache_write,
                "total": usage.total,
            }
        });
    }
    if let Some(count) = current_token_count.filter(|count| *count > 0) {
        context["currentTokenCount"] = json!(count);
    }
    if let Some(attempt) = attempt {
        context["attempt"] = json!(attempt.number);
        context["maxAttempts"] = json!(attempt.of);
    }
    if trigger == CompactionTrigger::Manual {
        context["forceReason"] = json!("manual");
    }
    context.to_string()
}

/// The runtime context of `after-turn`: the prompt size the provider
/// reported for the turn's last model call (input plus cached tokens), when
/// it reported one.
pub(super) fn after_turn_context(answers: &[MessageEntry]) -> Option<Json> {
    let prompt_tokens = answers
        .iter()
        .rev()
        .find_map(|entry| match &entry.message {
            AgentMessage::Assistant {
                usage: Some(usage), ..
            } => Some(usage.input + usage.cache_read + usage.cache_write),
            _ => None,
        })
        .filter(|tokens| *tokens > 0)?;
    Some(json!({ "currentTokenCount": prompt_tokens }).to_string())
}

/// The reference's `sessionTarget` of `session` for the runner's agent:
/// `agentId`, `sessionId`, `sessionKey` and `storePath` (the directory that
/// holds the session's transcript), the absent ones left out.
pub(super) fn session_target(agent_id: Option<&str>, session: &Session) -> Value {
    let session_ref = session.session_ref();
    let mut target = Map::new();
    if let Some(agent_id) = agent_id {
        target.insert("agentId".into(), agent_id.into());
    }
    target.insert("sessionId".into(), session_ref.session_id.as_str().into());
    if let Some(key) = &session_ref.session_key {
        target.insert("sessionKey".into(), key.as_str().into());
    }
    if let Some(store) = std::path::Path::new(&session_ref.session_file).parent() {
        target.insert("storePath".into(), store.to_string_lossy().into());
    }
    Value::Object(target)
}

/// `context` (a JSON object, or nothing) with `sessionTarget` set to
/// `target`.
pub(super) fn with_session_target(context: Option<Json>, target: &Value) -> Json {
    let mut context = context
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    context["sessionTarget"] = target.clone();
    context.to_string()
}

/// What a `maintain` call is told besides its reason.
pub(super) struct MaintainContext<'a> {
    pub(super) reason: MaintainReason,
    /// The compaction's trigger (`maintain(compaction)`).
    pub(super) trigger: Option<&'a str>,
    /// The session the compaction rotated away from, if it did.
    pub(super) previous_session_id: Option<&'a str>,
    /// Whether it runs in the background, after the turn returned.
    pub(super) background: bool,
}

impl TurnRunner {
    /// The runtime context of `maintain` for `session`: the session target,
    /// the agent's `workspaceDir` and `agentDir`, the session's `cwd`, and
    /// what `context` says (`trigger`, `previousSessionId`,
    /// `allowDeferredCompactionExecution` in the background).
    pub(super) fn maintain_context(
        &self,
        session: &Session,
        context: &MaintainContext<'_>,
    ) -> Json {
        let agent = &self.config.agent;
        let mut value = json!({
            "sessionTarget": session_target(agent.id.as_deref(), session),
            "cwd": session.transcript().header().cwd,
        });
        let paths = [
            ("workspaceDir", &agent.workspace_dir),
            ("agentDir", &agent.agent_dir),
        ];
        for (key, path) in paths {
            if let Some(path) = path {
                value[key] = json!(path.to_string_lossy());
            }
        }
        if context.reason == MaintainReason::Compaction
            && let Some(trigger) = context.trigger
        {
            value["trigger"] = json!(trigger);
        }
        if let Some(previous) = context.previous_session_id {
            value["previousSessionId"] = json!(previous);
        }
        if context.background {
            value["allowDeferredCompactionExecution"] = json!(true);
        }
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Value {
        serde_json::from_str(json).expect("JSON")
    }

    #[test]
    fn a_compaction_context_names_its_trigger_and_attempt() {
        let overflow = parse(&compaction_context(
            CompactionTrigger::Overflow,
            Some(40_000),
            Some(Attempt { number: 2, of: 3 }),
            None,
        ));
        assert_eq!(
            overflow,
            json!({"trigger": "overflow", "currentTokenCount": 40_000, "attempt": 2, "maxAttempts": 3})
        );
        let manual = parse(&compaction_context(
            CompactionTrigger::Manual,
            None,
            None,
            None,
        ));
        assert_eq!(
            manual,
            json!({"trigger": "manual", "forceReason": "manual"})
        );
        let budget = parse(&compaction_context(
            CompactionTrigger::Budget,
            Some(0),
            None,
            None,
        ));
        assert_eq!(
            budget,
            json!({"trigger": "budget"}),
            "zero is no observation"
        );
        let timeout = parse(&compaction_context(
            CompactionTrigger::TimeoutRecovery,
            None,
            Some(Attempt { number: 1, of: 2 }),
            Some(&Usage {
                input: 100,
                output: 20,
                cache_read: 900,
                cache_write: 0,
                total: 1_020,
            }),
        ));
        assert_eq!(
            timeout["promptCache"],
            json!({"lastCallUsage": {"input": 100, "output": 20, "cacheRead": 900, "cacheWrite": 0, "total": 1_020}}),
            "the last call's own usage, as the reference's promptCache"
        );
    }

    #[test]
    fn only_overflow_compactions_are_degraded() {
        assert_eq!(
            CompactionTrigger::Overflow.degraded_reason(),
            Some("context_overflow")
        );
        assert_eq!(CompactionTrigger::Budget.degraded_reason(), None);
        assert_eq!(CompactionTrigger::Manual.degraded_reason(), None);
    }
}

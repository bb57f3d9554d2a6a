//! The lifecycle exports (`bootstrap`, `ingest`, `ingest-batch`,
//! `after-turn`, `maintain`) on a session with history, on a session the
//! engine has never seen and on an empty history; and the subagent hooks.
//! `after-turn` and `maintain` are given the runtime context a host gives
//! (the session target, the workspace, a compaction's trigger), so an engine
//! that reads it is checked on the real shape.

use super::judge::Finding;
use super::{Checker, cases, failure_text};
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::failure::Operation;
use crate::contract::history::History;
use crate::contract::types::{
    AfterTurnParams, AgentMessage, ContextMode, MaintainReason, MessageEntry, SessionRef,
    SubagentEndReason, SubagentSpawn,
};
use crate::sandbox::WasmEngine;

/// The subagent the subagent hooks are asked about, keyed as a host keys
/// them (`agent:<agent>:subagent:<uuid>`).
const CHECK_CHILD_KEY: &str = "agent:check:subagent:00000000-0000-4000-8000-000000000000";

/// The runtime context a host gives `after-turn` and (with `reason`)
/// `maintain` about `session`: its `sessionTarget`, the agent's
/// `workspaceDir`, the session's `cwd`, and for `maintain(compaction)` the
/// compaction's `trigger`.
fn host_context(session: &SessionRef, reason: Option<MaintainReason>) -> serde_json::Value {
    let mut context = serde_json::json!({
        "sessionTarget": {
            "agentId": "check",
            "sessionId": session.session_id,
            "sessionKey": session.session_key.clone().unwrap_or_else(|| "agent:check:main".into()),
            "storePath": std::path::Path::new(&session.session_file)
                .parent()
                .map(|dir| dir.to_string_lossy().into_owned()),
        }
    });
    if reason.is_some() {
        context["workspaceDir"] = serde_json::json!("/workspace");
        context["cwd"] = serde_json::json!("/workspace");
    }
    if reason == Some(MaintainReason::Compaction) {
        context["trigger"] = serde_json::json!("budget");
    }
    context
}

/// One round of lifecycle calls.
struct Round<'a> {
    /// Prefix of the check names (empty for the main session).
    label: &'a str,
    session: &'a SessionRef,
    history: &'a History,
    /// Whether the round starts with `bootstrap`, as a host does on first
    /// sight; otherwise `bootstrap` comes last, after calls about a session
    /// the engine was never told of.
    bootstrap_first: bool,
    /// What `ingest` is given; `None`: the history's newest entry.
    fresh: Option<&'a MessageEntry>,
    /// Whether a heartbeat `ingest` follows.
    heartbeat: bool,
    /// How many of the history's newest entries `ingest-batch` is given.
    batch_size: usize,
    /// The `maintain` reasons tried.
    maintain: &'a [MaintainReason],
}

impl Checker {
    pub(super) async fn lifecycle(
        &mut self,
        engine: &WasmEngine,
        session: &SessionRef,
        history: &History,
    ) {
        self.round(
            engine,
            Round {
                label: "",
                session,
                history,
                bootstrap_first: true,
                fresh: None,
                heartbeat: true,
                batch_size: 4,
                maintain: &[
                    MaintainReason::Bootstrap,
                    MaintainReason::Turn,
                    MaintainReason::Compaction,
                ],
            },
        )
        .await;

        match self.session("never-seen", super::messages(12)) {
            Ok((stranger, strange_history, _transcript)) => {
                self.round(
                    engine,
                    Round {
                        label: "never-seen session: ",
                        session: &stranger,
                        history: &strange_history,
                        bootstrap_first: false,
                        fresh: None,
                        heartbeat: false,
                        batch_size: 4,
                        maintain: &[MaintainReason::Turn],
                    },
                )
                .await;
                engine.close_session(&stranger.session_id).await;
            }
            Err(error) => self.record(
                "never-seen session",
                "a scratch session",
                Finding::fail(error),
            ),
        }

        match self.session("empty", Vec::new()) {
            Ok((empty, empty_history, _transcript)) => {
                let first = cases::entry("first", AgentMessage::user_text("hello"));
                self.round(
                    engine,
                    Round {
                        label: "empty history: ",
                        session: &empty,
                        history: &empty_history,
                        bootstrap_first: true,
                        fresh: Some(&first),
                        heartbeat: false,
                        batch_size: 0,
                        maintain: &[MaintainReason::Bootstrap],
                    },
                )
                .await;
                engine.close_session(&empty.session_id).await;
            }
            Err(error) => self.record("empty history", "a scratch session", Finding::fail(error)),
        }
    }

    async fn round(&mut self, engine: &WasmEngine, round: Round<'_>) {
        let Round {
            label,
            session,
            history,
            ..
        } = round;
        let call = self.compacting();
        if round.bootstrap_first {
            self.bootstrap(engine, label, session, history).await;
        }
        let entries = history.entries();
        let batch = &entries[entries.len().saturating_sub(round.batch_size)..];
        let Some(arriving) = round.fresh.or(entries.last()) else {
            return self.record(
                label,
                "a scratch session",
                Finding::fail("nothing to ingest".to_owned()),
            );
        };

        let name = format!("{label}ingest");
        let ingested = self
            .timed(
                &name,
                Operation::Ingest,
                engine.ingest(&call, session, arriving, false),
            )
            .await;
        self.record(
            &name,
            "an answer for a new message",
            ingested
                .map(|r| format!("ingested: {}", r.ingested))
                .map_err(failure_text),
        );
        if round.heartbeat {
            let name = format!("{label}ingest: heartbeat");
            let heartbeat = self
                .timed(
                    &name,
                    Operation::Ingest,
                    engine.ingest(&call, session, arriving, true),
                )
                .await;
            self.record(
                &name,
                "an answer for a heartbeat message",
                heartbeat
                    .map(|r| format!("ingested: {}", r.ingested))
                    .map_err(failure_text),
            );
        }

        let name = format!("{label}ingest-batch");
        let size = batch.len();
        let batch = self
            .timed(
                &name,
                Operation::IngestBatch,
                engine.ingest_batch(&call, session, batch, false),
            )
            .await;
        let batch = match batch {
            Ok(result) if result.ingested_count as usize <= size => {
                Ok(format!("ingested {} of {size}", result.ingested_count))
            }
            Ok(result) => Err(format!(
                "claims {} ingested of {size}",
                result.ingested_count
            )),
            Err(failure) => Err(failure_text(failure)),
        };
        self.record(&name, "a count no larger than the batch", batch);

        let name = format!("{label}after-turn");
        let mut after_context = host_context(session, None);
        after_context["currentTokenCount"] = serde_json::json!(3_000);
        let after = AfterTurnParams {
            pre_prompt_message_count: history.len().saturating_sub(size) as u32,
            token_budget: Some(4_000),
            is_heartbeat: false,
            runtime_context: Some(after_context.to_string()),
            runtime_settings: Some(r#"{"schemaVersion":1}"#.into()),
        };
        let after_turn = self
            .timed(
                &name,
                Operation::AfterTurn,
                engine.after_turn(&call, session, history, &after),
            )
            .await;
        let after_turn = after_turn
            .map(|()| "ok".to_owned())
            .map_err(|failure| self.compaction_failure(failure));
        self.record(&name, "the turn's end handled", after_turn);

        for &reason in round.maintain {
            let name = format!("{label}maintain: {reason:?}").to_lowercase();
            let context = host_context(session, Some(reason)).to_string();
            let maintained = self
                .timed(
                    &name,
                    Operation::Maintain,
                    engine.maintain(&call, session, history, reason, Some(&context)),
                )
                .await;
            self.record(
                &name,
                "an answer",
                maintained
                    .map(|r| format!("changed: {}", r.changed))
                    .map_err(failure_text),
            );
        }
        if !round.bootstrap_first {
            self.bootstrap(engine, label, session, history).await;
        }
    }

    async fn bootstrap(
        &mut self,
        engine: &WasmEngine,
        label: &str,
        session: &SessionRef,
        history: &History,
    ) {
        let name = format!("{label}bootstrap");
        let bootstrapped = self
            .timed(
                &name,
                Operation::Bootstrap,
                engine.bootstrap(&CallOptions::default(), session, history),
            )
            .await;
        let expected = match history.len() {
            0 => "an answer for a session without history",
            _ => "an answer for a session with history",
        };
        self.record(
            &name,
            expected,
            bootstrapped
                .map(|r| format!("bootstrapped: {}", r.bootstrapped))
                .map_err(failure_text),
        );
    }

    pub(super) async fn subagents(&mut self, engine: &WasmEngine) {
        let call = CallOptions::default();
        let spawn = SubagentSpawn {
            parent_session_key: "agent:main".into(),
            child_session_key: CHECK_CHILD_KEY.into(),
            context_mode: ContextMode::Isolated,
            ttl_ms: Some(60_000),
        };
        let name = "subagent spawn and rollback";
        let prepared = self
            .timed(
                name,
                Operation::PrepareSubagentSpawn,
                engine.prepare_subagent_spawn(&call, &spawn),
            )
            .await;
        let outcome = match prepared {
            Ok(Some(id)) => self
                .timed(
                    name,
                    Operation::RollbackSubagentSpawn,
                    engine.rollback_subagent_spawn(&call, &id),
                )
                .await
                .map(|()| format!("prepared `{id}` and rolled it back"))
                .map_err(failure_text),
            Ok(None) => Ok("nothing to prepare".to_owned()),
            Err(failure) => Err(failure_text(failure)),
        };
        self.record(name, "a preparation that can be rolled back", outcome);
        let name = "on-subagent-ended";
        let ended = self
            .timed(
                name,
                Operation::OnSubagentEnded,
                engine.on_subagent_ended(&call, CHECK_CHILD_KEY, SubagentEndReason::Completed),
            )
            .await
            .map(|()| "ok".to_owned())
            .map_err(failure_text);
        self.record(name, "an answer", ended);
    }
}

//! Conversions between the generated bindings (`wit`) and host types.
//!
//! `From` impls cannot be written between two foreign-to-each-other types in
//! both directions without orphan trouble, so each direction is a small named
//! function: `to_wit_*` for what the host sends, `from_wit_*` for what the
//! guest returns.

use super::bindings::ctxbox::engine::{history as wit_history, host as wit_host, types as wit};
use super::bindings::exports::ctxbox::engine::engine as wit_engine;
use crate::contract::history::ToolPairing;
use crate::contract::services::{ServiceError, TranscriptDelta};
use crate::contract::text::{MAX_ENGINE_TEXT_BYTES, untrusted_line};
use crate::contract::types::{
    AfterTurnParams, AgentMessage, AssembleParams, AssembleResult, AssembledItem, BootstrapResult,
    CompactParams, CompactResult, CompactionTarget, ContentBlock, ContextMode, ContextProjection,
    EngineInfo, HostParam, IngestBatchResult, IngestResult, MaintainReason, MaintainResult,
    MessageEntry, MessageKind, RotatedSession, SessionRef, StopReason, SubagentEndReason,
    SubagentSpawn, TurnMaintenanceMode, Usage,
};

// ---- messages (both directions) ----

pub(crate) fn to_wit_entry(entry: &MessageEntry) -> wit::MessageEntry {
    wit::MessageEntry {
        id: entry.id.clone(),
        parent_id: entry.parent_id.clone(),
        timestamp_ms: entry.timestamp_ms,
        message: to_wit_message(&entry.message),
    }
}

pub(crate) fn from_wit_entry(entry: wit::MessageEntry) -> MessageEntry {
    MessageEntry {
        id: entry.id,
        parent_id: entry.parent_id,
        timestamp_ms: entry.timestamp_ms,
        message: from_wit_message(entry.message),
    }
}

pub(crate) fn to_wit_message(message: &AgentMessage) -> wit::AgentMessage {
    match message {
        AgentMessage::User { content } => wit::AgentMessage::User(wit::UserMessage {
            content: to_wit_blocks(content),
        }),
        AgentMessage::Assistant {
            content,
            model,
            provider,
            usage,
            stop_reason,
            error_message,
        } => wit::AgentMessage::Assistant(wit::AssistantMessage {
            content: to_wit_blocks(content),
            model: model.clone(),
            provider: provider.clone(),
            usage: usage.map(|u| wit::Usage {
                input: u.input,
                output: u.output,
                cache_read: u.cache_read,
                cache_write: u.cache_write,
                total: u.total,
            }),
            stop_reason: match stop_reason {
                StopReason::Stop => wit::StopReason::Stop,
                StopReason::Length => wit::StopReason::Length,
                StopReason::ToolUse => wit::StopReason::ToolUse,
                StopReason::Error => wit::StopReason::Error,
                StopReason::Aborted => wit::StopReason::Aborted,
            },
            error_message: error_message.clone(),
        }),
        AgentMessage::ToolResult {
            tool_call_id,
            tool_name,
            content,
            is_error,
            details,
        } => wit::AgentMessage::ToolResult(wit::ToolResultMessage {
            tool_call_id: tool_call_id.clone(),
            tool_name: tool_name.clone(),
            content: to_wit_blocks(content),
            is_error: *is_error,
            details: details.clone(),
        }),
        AgentMessage::Custom {
            custom_type,
            content,
            display,
            details,
        } => wit::AgentMessage::Custom(wit::CustomMessage {
            custom_type: custom_type.clone(),
            content: to_wit_blocks(content),
            display: *display,
            details: details.clone(),
        }),
        AgentMessage::CompactionSummary {
            summary,
            tokens_before,
        } => wit::AgentMessage::CompactionSummary(wit::CompactionSummary {
            summary: summary.clone(),
            tokens_before: *tokens_before,
        }),
        AgentMessage::BranchSummary { summary, from_id } => {
            wit::AgentMessage::BranchSummary(wit::BranchSummary {
                summary: summary.clone(),
                from_id: from_id.clone(),
            })
        }
    }
}

pub(crate) fn from_wit_message(message: wit::AgentMessage) -> AgentMessage {
    match message {
        wit::AgentMessage::User(m) => AgentMessage::User {
            content: from_wit_blocks(m.content),
        },
        wit::AgentMessage::Assistant(m) => AgentMessage::Assistant {
            content: from_wit_blocks(m.content),
            model: m.model,
            provider: m.provider,
            usage: m.usage.map(|u| Usage {
                input: u.input,
                output: u.output,
                cache_read: u.cache_read,
                cache_write: u.cache_write,
                total: u.total,
            }),
            stop_reason: match m.stop_reason {
                wit::StopReason::Stop => StopReason::Stop,
                wit::StopReason::Length => StopReason::Length,
                wit::StopReason::ToolUse => StopReason::ToolUse,
                wit::StopReason::Error => StopReason::Error,
                wit::StopReason::Aborted => StopReason::Aborted,
            },
            error_message: m.error_message,
        },
        wit::AgentMessage::ToolResult(m) => AgentMessage::ToolResult {
            tool_call_id: m.tool_call_id,
            tool_name: m.tool_name,
            content: from_wit_blocks(m.content),
            is_error: m.is_error,
            details: m.details,
        },
        wit::AgentMessage::Custom(m) => AgentMessage::Custom {
            custom_type: m.custom_type,
            content: from_wit_blocks(m.content),
            display: m.display,
            details: m.details,
        },
        wit::AgentMessage::CompactionSummary(m) => AgentMessage::CompactionSummary {
            summary: m.summary,
            tokens_before: m.tokens_before,
        },
        wit::AgentMessage::BranchSummary(m) => AgentMessage::BranchSummary {
            summary: m.summary,
            from_id: m.from_id,
        },
    }
}

fn to_wit_blocks(blocks: &[ContentBlock]) -> Vec<wit::ContentBlock> {
    blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } | ContentBlock::Data { json: text } => {
                wit::ContentBlock::Text(text.clone())
            }
            ContentBlock::Thinking { text, signature } => {
                wit::ContentBlock::Thinking(wit::Thinking {
                    text: text.clone(),
                    signature: signature.clone(),
                })
            }
            ContentBlock::Image { mime_type, data } => wit::ContentBlock::Image(wit::Image {
                mime_type: mime_type.clone(),
                data: data.clone(),
            }),
            ContentBlock::ToolCall {
                id,
                name,
                arguments_json,
            } => wit::ContentBlock::ToolCall(wit::ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments_json: arguments_json.clone(),
            }),
        })
        .collect()
}

fn from_wit_blocks(blocks: Vec<wit::ContentBlock>) -> Vec<ContentBlock> {
    blocks
        .into_iter()
        .map(|block| match block {
            wit::ContentBlock::Text(text) => ContentBlock::Text { text },
            wit::ContentBlock::Thinking(t) => ContentBlock::Thinking {
                text: t.text,
                signature: t.signature,
            },
            wit::ContentBlock::Image(i) => ContentBlock::Image {
                mime_type: i.mime_type,
                data: i.data,
            },
            wit::ContentBlock::ToolCall(c) => ContentBlock::ToolCall {
                id: c.id,
                name: c.name,
                arguments_json: c.arguments_json,
            },
        })
        .collect()
}

pub(crate) fn to_wit_kind(kind: MessageKind) -> wit::MessageKind {
    match kind {
        MessageKind::User => wit::MessageKind::User,
        MessageKind::Assistant => wit::MessageKind::Assistant,
        MessageKind::ToolResult => wit::MessageKind::ToolResult,
        MessageKind::Custom => wit::MessageKind::Custom,
        MessageKind::CompactionSummary => wit::MessageKind::CompactionSummary,
        MessageKind::BranchSummary => wit::MessageKind::BranchSummary,
    }
}

pub(crate) fn to_wit_pairing(pairing: ToolPairing) -> wit_history::ToolPairing {
    match pairing {
        ToolPairing::None => wit_history::ToolPairing::None,
        ToolPairing::ToolCalls { last_result } => wit_history::ToolPairing::ToolCalls(last_result),
        ToolPairing::ToolResult { call } => wit_history::ToolPairing::ToolResult(call),
    }
}

// ---- what the host sends ----

pub(crate) fn to_wit_session(session: &SessionRef) -> wit::SessionRef {
    wit::SessionRef {
        session_id: session.session_id.clone(),
        session_key: session.session_key.clone(),
        session_file: session.session_file.clone(),
    }
}

pub(crate) fn to_wit_assemble_params(params: &AssembleParams) -> wit_engine::AssembleParams {
    wit_engine::AssembleParams {
        token_budget: params.token_budget,
        available_tools: params.available_tools.clone(),
        citations_mode: params.citations_mode.clone(),
        model: params.model.clone(),
        prompt: params.prompt.clone(),
    }
}

pub(crate) fn to_wit_compact_params(params: &CompactParams) -> wit::CompactParams {
    wit::CompactParams {
        token_budget: params.token_budget,
        force: params.force,
        current_token_count: params.current_token_count,
        compaction_target: match params.compaction_target {
            CompactionTarget::Budget => wit::CompactionTarget::Budget,
            CompactionTarget::Threshold => wit::CompactionTarget::Threshold,
        },
        custom_instructions: params.custom_instructions.clone(),
        runtime_settings: params.runtime_settings.clone(),
        runtime_context: params.runtime_context.clone(),
    }
}

pub(crate) fn to_wit_compact_result(result: &CompactResult) -> wit::CompactResult {
    wit::CompactResult {
        ok: result.ok,
        compacted: result.compacted,
        reason: result.reason.clone(),
        summary: result.summary.clone(),
        first_kept_entry_id: result.first_kept_entry_id.clone(),
        tokens_before: result.tokens_before,
        tokens_after: result.tokens_after,
        rotated_session: result
            .rotated_session
            .as_ref()
            .map(|r| wit::RotatedSession {
                session_id: r.session_id.clone(),
                session_file: r.session_file.clone(),
            }),
        details: result.details.clone(),
    }
}

pub(crate) fn to_wit_after_turn_params(params: &AfterTurnParams) -> wit_engine::AfterTurnParams {
    wit_engine::AfterTurnParams {
        pre_prompt_message_count: params.pre_prompt_message_count,
        token_budget: params.token_budget,
        is_heartbeat: params.is_heartbeat,
        runtime_context: params.runtime_context.clone(),
    }
}

pub(crate) fn to_wit_maintain_reason(reason: MaintainReason) -> wit_engine::MaintainReason {
    match reason {
        MaintainReason::Bootstrap => wit_engine::MaintainReason::Bootstrap,
        MaintainReason::Turn => wit_engine::MaintainReason::Turn,
        MaintainReason::Compaction => wit_engine::MaintainReason::Compaction,
    }
}

pub(crate) fn to_wit_spawn(spawn: &SubagentSpawn) -> wit_engine::SubagentSpawn {
    wit_engine::SubagentSpawn {
        parent_session_key: spawn.parent_session_key.clone(),
        child_session_key: spawn.child_session_key.clone(),
        context_mode: match spawn.context_mode {
            ContextMode::Isolated => wit_engine::ContextMode::Isolated,
            ContextMode::Fork => wit_engine::ContextMode::Fork,
        },
        ttl_ms: spawn.ttl_ms,
    }
}

pub(crate) fn to_wit_end_reason(reason: SubagentEndReason) -> wit_engine::SubagentEndReason {
    match reason {
        SubagentEndReason::Deleted => wit_engine::SubagentEndReason::Deleted,
        SubagentEndReason::Completed => wit_engine::SubagentEndReason::Completed,
        SubagentEndReason::Swept => wit_engine::SubagentEndReason::Swept,
        SubagentEndReason::Released => wit_engine::SubagentEndReason::Released,
    }
}

/// A transcript read as `read-transcript-delta` answers it. That function has
/// no `unavailable` answer: a transcript the host cannot read is the failure
/// it always was, and the host's own.
pub(crate) fn to_wit_delta(
    delta: TranscriptDelta,
) -> Result<wit_host::TranscriptDelta, ServiceError> {
    Ok(match delta {
        TranscriptDelta::Page {
            cursor,
            entries,
            has_more,
            ..
        } => wit_host::TranscriptDelta::Page(wit_host::TranscriptPage {
            cursor,
            entries: entries.iter().map(to_wit_entry).collect(),
            has_more,
        }),
        TranscriptDelta::Reset { cursor, reason } => {
            wit_host::TranscriptDelta::Reset(wit_host::TranscriptReset { cursor, reason })
        }
        TranscriptDelta::Unavailable { reason } => return Err(ServiceError::HostFault(reason)),
        TranscriptDelta::Missing => wit_host::TranscriptDelta::Missing,
    })
}

/// A transcript read as `read-transcript-page` answers it.
pub(crate) fn to_wit_transcript_read(delta: TranscriptDelta) -> wit_host::TranscriptRead {
    match delta {
        TranscriptDelta::Page {
            cursor,
            entries,
            has_more,
            required_bytes,
            serialized_bytes,
        } => wit_host::TranscriptRead::Page(wit_host::BoundedTranscriptPage {
            cursor,
            entries: entries.iter().map(to_wit_entry).collect(),
            has_more,
            required_bytes,
            serialized_bytes,
        }),
        TranscriptDelta::Reset { cursor, reason } => {
            wit_host::TranscriptRead::Reset(wit_host::TranscriptReset { cursor, reason })
        }
        TranscriptDelta::Unavailable { reason } => wit_host::TranscriptRead::Unavailable(reason),
        TranscriptDelta::Missing => wit_host::TranscriptRead::Missing,
    }
}

pub(crate) fn to_wit_host_error(error: ServiceError) -> wit_host::HostError {
    let kind = match &error {
        ServiceError::Unavailable(_) => wit_host::HostErrorKind::Unavailable,
        ServiceError::InvalidArgument(_) => wit_host::HostErrorKind::InvalidArgument,
        ServiceError::QuotaExceeded(_) => wit_host::HostErrorKind::QuotaExceeded,
        ServiceError::Aborted(_) => wit_host::HostErrorKind::Aborted,
        // Lease loss only refuses a call's commit, after the engine
        // answered; should a service ever report it, it is a failure.
        ServiceError::Failed(_) | ServiceError::LeaseLost(_) | ServiceError::HostFault(_) => {
            wit_host::HostErrorKind::Failed
        }
    };
    wit_host::HostError {
        kind,
        message: error.to_string(),
    }
}

// ---- what the guest returns ----

/// The most bytes of an engine's `info` id, name or version the host keeps.
const MAX_INFO_TEXT_BYTES: usize = 256;

/// A `reason` an engine gave, safe to show and capped.
fn engine_reason(reason: &str) -> String {
    untrusted_line(reason, MAX_ENGINE_TEXT_BYTES)
}

pub(crate) fn from_wit_info(info: wit_engine::EngineInfo) -> EngineInfo {
    EngineInfo {
        id: untrusted_line(&info.id, MAX_INFO_TEXT_BYTES),
        name: untrusted_line(&info.name, MAX_INFO_TEXT_BYTES),
        version: info
            .version
            .map(|version| untrusted_line(&version, MAX_INFO_TEXT_BYTES)),
        owns_compaction: info.owns_compaction,
        accepted_host_params: info.accepted_host_params.map(|params| {
            params
                .into_iter()
                .map(|param| match param {
                    wit::HostParam::SessionKey => HostParam::SessionKey,
                    wit::HostParam::Prompt => HostParam::Prompt,
                    wit::HostParam::RuntimeSettings => HostParam::RuntimeSettings,
                    wit::HostParam::RuntimeContext => HostParam::RuntimeContext,
                })
                .collect()
        }),
        turn_maintenance_mode: info.turn_maintenance_mode.map(|mode| match mode {
            wit_engine::TurnMaintenanceMode::Foreground => TurnMaintenanceMode::Foreground,
            wit_engine::TurnMaintenanceMode::Background => TurnMaintenanceMode::Background,
        }),
    }
}

pub(crate) fn from_wit_bootstrap(result: wit_engine::BootstrapResult) -> BootstrapResult {
    BootstrapResult {
        bootstrapped: result.bootstrapped,
        imported_messages: result.imported_messages,
        reason: result.reason.as_deref().map(engine_reason),
    }
}

pub(crate) fn from_wit_ingest(result: wit_engine::IngestResult) -> IngestResult {
    IngestResult {
        ingested: result.ingested,
    }
}

pub(crate) fn from_wit_ingest_batch(result: wit_engine::IngestBatchResult) -> IngestBatchResult {
    IngestBatchResult {
        ingested_count: result.ingested_count,
    }
}

pub(crate) fn from_wit_assemble(result: wit_engine::AssembleResult) -> AssembleResult {
    AssembleResult {
        items: result
            .items
            .into_iter()
            .map(|item| match item {
                wit_engine::AssembledItem::Keep(range) => AssembledItem::Keep {
                    start: range.start,
                    end: range.end,
                },
                wit_engine::AssembledItem::Insert(message) => {
                    AssembledItem::Insert(from_wit_message(message))
                }
            })
            .collect(),
        estimated_tokens: result.estimated_tokens,
        system_prompt_addition: result.system_prompt_addition,
        context_projection: result
            .context_projection
            .map(|projection| match projection {
                wit_engine::ContextProjection::PerTurn => ContextProjection::PerTurn,
                wit_engine::ContextProjection::ThreadBootstrap(epoch) => {
                    ContextProjection::ThreadBootstrap { epoch }
                }
            }),
    }
}

pub(crate) fn from_wit_compact_params(params: wit::CompactParams) -> CompactParams {
    CompactParams {
        token_budget: params.token_budget,
        force: params.force,
        current_token_count: params.current_token_count,
        compaction_target: match params.compaction_target {
            wit::CompactionTarget::Budget => CompactionTarget::Budget,
            wit::CompactionTarget::Threshold => CompactionTarget::Threshold,
        },
        custom_instructions: params.custom_instructions,
        runtime_settings: params.runtime_settings,
        runtime_context: params.runtime_context,
    }
}

pub(crate) fn from_wit_compact_result(result: wit::CompactResult) -> CompactResult {
    CompactResult {
        ok: result.ok,
        compacted: result.compacted,
        reason: result.reason.as_deref().map(engine_reason),
        summary: result.summary,
        first_kept_entry_id: result.first_kept_entry_id,
        tokens_before: result.tokens_before,
        tokens_after: result.tokens_after,
        rotated_session: result.rotated_session.map(|r| RotatedSession {
            session_id: r.session_id,
            session_file: r.session_file,
        }),
        details: result.details,
    }
}

pub(crate) fn from_wit_maintain(result: wit_engine::MaintainResult) -> MaintainResult {
    MaintainResult {
        changed: result.changed,
        rewritten_entries: result.rewritten_entries,
        reason: result.reason.as_deref().map(engine_reason),
    }
}

/// An engine error's kind as the contract spells it (`host-failure`), for
/// messages: never the bindings' Rust name.
pub(crate) fn engine_error_kind(kind: wit::EngineErrorKind) -> &'static str {
    match kind {
        wit::EngineErrorKind::Unsupported => "unsupported",
        wit::EngineErrorKind::InvalidInput => "invalid-input",
        wit::EngineErrorKind::HostFailure => "host-failure",
        wit::EngineErrorKind::Internal => "internal",
    }
}

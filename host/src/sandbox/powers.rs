//! The host imports that give an engine powers beyond its own store: the
//! embedding host's model (`complete`) and a searchable index (`index-*`),
//! and the conversions of the optional `tools` export. Each import charges
//! what the guest passed against the call's input budget, then hands a
//! checked request to the host services (which hold the budgets).

use super::bindings::ctxbox::engine::host as wit_host;
use super::bindings::exports::ctxbox::engine::tools as wit_tools;
use super::convert::to_wit_host_error;
use super::store::StoreState;
use crate::contract::completion::{
    Completion, CompletionMessage, CompletionRequest, CompletionRole,
};
use crate::contract::index::{IndexDocument, IndexPage, IndexQuery, IndexScope};
use crate::contract::services::ServiceError;
use crate::contract::tools::EngineTool;

type HostResult<T> = Result<T, wit_host::HostError>;

/// `host.complete`: the call's session and request id go with it, so the
/// embedding host can answer with the session's own model. An answer during
/// a compaction re-arms its watchdog, as progress.
pub(super) async fn complete(
    state: &mut StoreState,
    request: wit_host::CompletionRequest,
) -> wasmtime::Result<HostResult<wit_host::Completion>> {
    let request = from_wit_completion_request(request);
    state.charge(request.text_bytes() + request.purpose.as_ref().map_or(0, String::len))?;
    if let Err(problem) = request.check() {
        return Ok(Err(to_wit_host_error(ServiceError::InvalidArgument(
            problem,
        ))));
    }
    let services = state.services.clone();
    let result = services
        .complete(state.call.service_call(&state.engine_id), &request)
        .await;
    if result.is_ok() {
        state.call.clock.progress();
    }
    Ok(state.answer(result).map(to_wit_completion))
}

/// `host.index-put`.
pub(super) async fn index_put(
    state: &mut StoreState,
    scope: wit_host::IndexScope,
    document: wit_host::IndexDocument,
) -> wasmtime::Result<HostResult<()>> {
    let document = IndexDocument {
        id: document.id,
        text: document.text,
        metadata: document.metadata,
    };
    state.charge(
        document.id.len() + document.text.len() + document.metadata.as_ref().map_or(0, String::len),
    )?;
    if let Err(problem) = document.check() {
        return Ok(Err(to_wit_host_error(ServiceError::InvalidArgument(
            problem,
        ))));
    }
    let services = state.services.clone();
    let result = services
        .index_put(
            state.call.service_call(&state.engine_id),
            from_wit_scope(scope),
            document,
        )
        .await;
    Ok(state.answer(result))
}

/// `host.index-delete`.
pub(super) async fn index_delete(
    state: &mut StoreState,
    scope: wit_host::IndexScope,
    id: String,
) -> wasmtime::Result<HostResult<bool>> {
    state.charge(id.len())?;
    let services = state.services.clone();
    let result = services
        .index_delete(
            state.call.service_call(&state.engine_id),
            from_wit_scope(scope),
            &id,
        )
        .await;
    Ok(state.answer(result))
}

/// `host.index-search`.
pub(super) async fn index_search(
    state: &mut StoreState,
    query: wit_host::IndexQuery,
) -> wasmtime::Result<HostResult<wit_host::IndexPage>> {
    let query = IndexQuery {
        text: query.text,
        scope: from_wit_scope(query.scope),
        limit: query.limit,
        offset: query.offset,
    };
    state.charge(query.text.len())?;
    if let Err(problem) = query.check() {
        return Ok(Err(to_wit_host_error(ServiceError::InvalidArgument(
            problem,
        ))));
    }
    let services = state.services.clone();
    let result = services
        .index_search(state.call.service_call(&state.engine_id), &query)
        .await;
    Ok(state.answer(result).map(to_wit_page))
}

fn from_wit_completion_request(request: wit_host::CompletionRequest) -> CompletionRequest {
    CompletionRequest {
        messages: request
            .messages
            .into_iter()
            .map(|message| CompletionMessage {
                role: match message.role {
                    wit_host::CompletionRole::System => CompletionRole::System,
                    wit_host::CompletionRole::User => CompletionRole::User,
                    wit_host::CompletionRole::Assistant => CompletionRole::Assistant,
                },
                text: message.text,
            })
            .collect(),
        system: request.system,
        max_tokens: request.max_tokens,
        purpose: request.purpose,
    }
}

fn to_wit_completion(completion: Completion) -> wit_host::Completion {
    wit_host::Completion {
        text: completion.text,
        input_tokens: completion.input_tokens,
        output_tokens: completion.output_tokens,
        model: completion.model,
    }
}

fn from_wit_scope(scope: wit_host::IndexScope) -> IndexScope {
    match scope {
        wit_host::IndexScope::Engine => IndexScope::Engine,
        wit_host::IndexScope::Session => IndexScope::Session,
    }
}

fn to_wit_page(page: IndexPage) -> wit_host::IndexPage {
    wit_host::IndexPage {
        hits: page
            .hits
            .into_iter()
            .map(|hit| wit_host::IndexHit {
                id: hit.id,
                session_id: hit.session_id,
                score: hit.score,
                snippet: hit.snippet,
                metadata: hit.metadata,
            })
            .collect(),
        has_more: page.has_more,
    }
}

/// The engine's tool definitions, as the host keeps them.
pub(super) fn from_wit_tools(tools: Vec<wit_tools::ToolDefinition>) -> Vec<EngineTool> {
    tools
        .into_iter()
        .map(|tool| EngineTool {
            name: tool.name,
            description: tool.description,
            parameters_json: tool.parameters,
        })
        .collect()
}

//! The engine's behaviour, run natively over in-memory histories.

use ctxbox_guest::testing::{MemoryHistory, check_tool_pairing, conversation, entries};
use ctxbox_guest::{ToolCall, ToolResultMessage};

use super::*;

/// The tool result in `message`, if it is one.
fn as_result(message: &AgentMessage) -> Option<&ToolResultMessage> {
    match message {
        AgentMessage::ToolResult(result) => Some(result),
        _ => None,
    }
}

fn is_placeholder(message: &AgentMessage) -> bool {
    as_result(message).is_some_and(|result| {
        message.text().starts_with("[Output elided") && result.details.is_none()
    })
}

/// Checks that the prompt is the history with exactly the results at
/// `replaced` swapped for placeholders answering the same calls.
fn assert_replaced_exactly(prompt: &AssembleResult, history: &MemoryHistory, replaced: &[usize]) {
    let messages = prompt.materialize(history);
    assert_eq!(
        messages.len(),
        history.entries().len(),
        "one message per entry"
    );
    for (index, (sent, original)) in messages.iter().zip(history.entries()).enumerate() {
        if replaced.contains(&index) {
            let (sent_result, original_result) = (
                as_result(sent).unwrap(),
                as_result(&original.message).unwrap(),
            );
            assert!(is_placeholder(sent), "entry {index}");
            assert_eq!(sent_result.tool_call_id, original_result.tool_call_id);
            assert_eq!(sent_result.tool_name, original_result.tool_name);
            assert_eq!(sent_result.is_error, original_result.is_error);
        } else {
            assert_eq!(sent, &original.message, "entry {index} is sent verbatim");
        }
    }
    check_tool_pairing(&messages, history).unwrap();
}

#[test]
fn info_leaves_compaction_to_the_host() {
    let info = info();
    assert_eq!(info.id, ID);
    assert!(!info.owns_compaction);
    assert_eq!(
        info.accepted_host_params, None,
        "compact hands every parameter on"
    );
}

#[test]
fn a_session_of_few_turns_is_sent_whole() {
    let history = MemoryHistory::new(conversation(3));
    let prompt = plan(&history, &Config::default());
    assert_eq!(prompt.items, vec![AssembledItem::keep(0..12)]);
    assert_eq!(prompt.estimated_tokens, history.tokens(0..12));
    assert_eq!(prompt.system_prompt_addition, None);
}

#[test]
fn tool_output_older_than_the_recent_turns_is_replaced() {
    // Eight turns of question, call, result, answer: the last three start at
    // entry 20, so the results at 2, 6, 10, 14 and 18 are stale.
    let history = MemoryHistory::new(conversation(8));
    let prompt = plan(&history, &Config::default());
    let stale = [2, 6, 10, 14, 18];
    assert_replaced_exactly(&prompt, &history, &stale);
    assert_eq!(
        prompt.system_prompt_addition.as_deref(),
        Some(SYSTEM_PROMPT_ADDITION)
    );

    let stale_tokens: u64 = stale
        .iter()
        .map(|&i| history.tokens(i as u32..i as u32 + 1))
        .sum();
    assert_eq!(
        prompt.estimated_tokens,
        history.tokens(0..32) - stale_tokens + 5 * PLACEHOLDER_TOKENS
    );
    assert!(prompt.estimated_tokens < history.tokens(0..32));
}

#[test]
fn the_recent_turns_are_counted_from_user_messages() {
    let history = MemoryHistory::new(conversation(8));
    let one_turn = plan(
        &history,
        &Config {
            recent_turns: 1,
            ..Config::default()
        },
    );
    assert_replaced_exactly(&one_turn, &history, &[2, 6, 10, 14, 18, 22, 26]);
    let every_turn = plan(
        &history,
        &Config {
            recent_turns: 0,
            ..Config::default()
        },
    );
    assert_replaced_exactly(&every_turn, &history, &[2, 6, 10, 14, 18, 22, 26, 30]);
    let all_recent = plan(
        &history,
        &Config {
            recent_turns: 8,
            ..Config::default()
        },
    );
    assert_replaced_exactly(&all_recent, &history, &[]);
}

#[test]
fn small_stale_results_are_kept() {
    let history = MemoryHistory::new(entries([
        AgentMessage::user_text("check the flag"),
        AgentMessage::tool_use([ToolCall::new("c1", "flag", "{}")]),
        AgentMessage::tool_result("c1", "flag", "on"),
        AgentMessage::tool_use([ToolCall::new("c2", "cat", "{}")]),
        AgentMessage::tool_result("c2", "cat", "long output ".repeat(100)),
        AgentMessage::user_text("next"),
        AgentMessage::assistant_text("ok"),
    ]));
    let prompt = plan(
        &history,
        &Config {
            recent_turns: 1,
            ..Config::default()
        },
    );
    assert_replaced_exactly(&prompt, &history, &[4]);
}

#[test]
fn parallel_calls_and_failed_results_stay_paired() {
    let big = "x".repeat(2_000);
    let mut failed = AgentMessage::tool_result("c2", "grep", big.clone());
    if let AgentMessage::ToolResult(result) = &mut failed {
        result.is_error = true;
        result.details = Some(r#"{"exit":2}"#.into());
    }
    let history = MemoryHistory::new(entries([
        AgentMessage::user_text("search"),
        AgentMessage::tool_use([
            ToolCall::new("c1", "read", "{}"),
            ToolCall::new("c2", "grep", "{}"),
        ]),
        AgentMessage::tool_result("c1", "read", big.clone()),
        failed,
        AgentMessage::assistant_text("found it"),
        AgentMessage::user_text("thanks"),
        AgentMessage::assistant_text("welcome"),
    ]));
    let prompt = plan(
        &history,
        &Config {
            recent_turns: 1,
            ..Config::default()
        },
    );
    assert_replaced_exactly(&prompt, &history, &[2, 3]);
    assert_eq!(
        prompt.items.len(),
        4,
        "keep, two placeholders, keep: {:?}",
        prompt.items
    );
}

#[test]
fn an_empty_history_gives_an_empty_prompt() {
    let prompt = plan(&MemoryHistory::default(), &Config::default());
    assert!(prompt.items.is_empty());
    assert_eq!(prompt.estimated_tokens, 0);
}

//! The conversations the conformance checker feeds engines: a tool-heavy
//! English one, a Chinese one, and the small edge cases.

use crate::contract::types::{AgentMessage, ContentBlock, MessageEntry, StopReason};

/// An entry with id `id`.
pub fn entry(id: impl Into<String>, message: AgentMessage) -> MessageEntry {
    MessageEntry {
        id: id.into(),
        parent_id: None,
        timestamp_ms: 1_772_501_268_324,
        message,
    }
}

/// An assistant message that says a few words and calls tool `call_id`.
pub fn tool_call(call_id: &str) -> AgentMessage {
    AgentMessage::Assistant {
        content: vec![
            ContentBlock::text("Let me look."),
            ContentBlock::ToolCall {
                id: call_id.into(),
                name: "exec".into(),
                arguments_json: format!(r#"{{"command":"cat notes-{call_id}.md"}}"#),
            },
        ],
        model: Some("check-model".into()),
        provider: Some("ctxbox-check".into()),
        usage: None,
        stop_reason: StopReason::ToolUse,
        error_message: None,
    }
}

/// The result of tool call `call_id`.
pub fn tool_result(call_id: &str, text: impl Into<String>) -> AgentMessage {
    AgentMessage::tool_result(call_id, "exec", text)
}

/// `turns` turns of: an ask, a tool call, its result, an answer (ids `e0`,
/// `e1`, …). Every third ask is in Chinese; results grow and shrink so budgets
/// land at every kind of boundary.
pub fn conversation(turns: usize) -> Vec<MessageEntry> {
    conversation_with(turns, 1)
}

/// Like [`conversation`], with tool results `scale` times as long: a
/// session whose compaction needs many summaries.
pub fn bulky_conversation(turns: usize, scale: usize) -> Vec<MessageEntry> {
    conversation_with(turns, scale.max(1))
}

fn conversation_with(turns: usize, scale: usize) -> Vec<MessageEntry> {
    let mut entries = Vec::with_capacity(turns * 4);
    for turn in 0..turns {
        let call_id = format!("call-{turn}");
        let ask = if turn % 3 == 2 {
            format!("请检查第 {turn} 个配置文件并告诉我哪里出错了。")
        } else {
            format!("Please check config file number {turn} and tell me what is wrong with it.")
        };
        let output = format!(
            "[server]\nport = {}\nhost = \"0.0.0.0\"\n# turn {turn}\n",
            8000 + turn
        );
        for message in [
            AgentMessage::user_text(ask),
            tool_call(&call_id),
            tool_result(&call_id, output.repeat((1 + turn % 4) * scale)),
            AgentMessage::assistant_text(format!(
                "Turn {turn}: the port is fine; the host binding is too open."
            )),
        ] {
            let id = format!("e{}", entries.len());
            entries.push(entry(id, message));
        }
    }
    entries
}

/// A conversation in Chinese, `turns` exchanges long.
pub fn chinese_conversation(turns: usize) -> Vec<MessageEntry> {
    (0..turns)
        .flat_map(|turn| {
            [
                entry(
                    format!("zh-u{turn}"),
                    AgentMessage::user_text(format!(
                        "第 {turn} 轮：请帮我把服务器的备份脚本改成每天凌晨三点运行，并把日志写到 /var/log/backup-{turn}.log。"
                    )),
                ),
                entry(
                    format!("zh-a{turn}"),
                    AgentMessage::assistant_text(format!(
                        "好的，第 {turn} 轮已完成：计划任务已更新为每天 03:00 运行，日志路径为 /var/log/backup-{turn}.log。"
                    )),
                ),
            ]
        })
        .collect()
}

//! The `extractive` summarizer (the default): deterministic, offline and fast.
//! It writes nothing new; it picks the lines that carry decisions, open work,
//! rules, the user's asks, errors and exact identifiers (paths, URLs, ids,
//! hashes, addresses, code spans) and files them under the required sections.
//!
//! It understands the conversation serialization of
//! [`crate::services::compaction`] (`[User]: …`, `[Assistant]: …`, `[Tool result]: …`)
//! and treats any other text as prose. Keyword lists cover English, Chinese,
//! German and Arabic, the languages of the reference transcripts.

use std::collections::HashSet;
use std::sync::LazyLock;

use async_trait::async_trait;
use regex::Regex;

use super::sections::{ERRORS_SECTION, SummaryDoc};
use super::{MergeRequest, SummarizeError, Summarizer, SummaryRequest, max_chars_for};
use crate::contract::text::clip;

/// Longest item taken from one line.
const ITEM_CHARS: usize = 300;
/// Most error lines taken from one tool result.
const ERRORS_PER_RESULT: usize = 2;

/// The extractive summarizer.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtractiveSummarizer;

#[async_trait]
impl Summarizer for ExtractiveSummarizer {
    fn id(&self) -> &str {
        "extractive"
    }

    async fn summarize(&self, request: SummaryRequest) -> Result<String, SummarizeError> {
        run_blocking(move || {
            extract(&request.text)
                .render(
                    max_chars_for(request.max_tokens),
                    u64::from(request.max_tokens),
                )
                .text
        })
        .await
    }

    async fn merge(&self, request: MergeRequest) -> Result<String, SummarizeError> {
        run_blocking(move || {
            let mut doc = SummaryDoc::default();
            for part in request.previous_summary.iter().chain(&request.parts) {
                doc.absorb(&SummaryDoc::parse(part));
            }
            doc.render(
                max_chars_for(request.max_tokens),
                u64::from(request.max_tokens),
            )
            .text
        })
        .await
    }
}

/// Runs CPU-bound work on the blocking pool, so chunks summarized
/// concurrently also run in parallel.
async fn run_blocking(
    work: impl FnOnce() -> String + Send + 'static,
) -> Result<String, SummarizeError> {
    tokio::task::spawn_blocking(work).await.map_err(|error| {
        SummarizeError::Internal(format!("extractive summarizer stopped: {error}"))
    })
}

/// Who wrote a line of serialized conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speaker {
    User,
    Assistant,
    Thinking,
    ToolCall,
    ToolResult,
    /// Summaries and anything unlabelled.
    Prose,
}

/// The role labels of the conversation serialization.
const LABELS: [(&str, Speaker); 7] = [
    ("[User]:", Speaker::User),
    ("[Assistant]:", Speaker::Assistant),
    ("[Assistant thinking]:", Speaker::Thinking),
    ("[Assistant tool calls]:", Speaker::ToolCall),
    ("[Tool result]:", Speaker::ToolResult),
    ("[Tool error]:", Speaker::ToolResult),
    ("[Summary]:", Speaker::Prose),
];

/// The summary of `text` as sections.
pub(crate) fn extract(text: &str) -> SummaryDoc {
    let mut doc = SummaryDoc::default();
    for (speaker, block) in blocks(text) {
        let lines: Vec<&str> = block
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if speaker == Speaker::User {
            let ask = ask_text(&block);
            if ask.chars().count() > 1 {
                doc.push(
                    "Pending user asks",
                    &format!("- {}", clip(&ask, ITEM_CHARS)),
                );
            }
        }
        let mut errors = 0;
        for line in lines.iter().filter(|line| !is_layout(line)) {
            let lower = line.to_lowercase();
            let item = || format!("- {}", clip(&collapse(line), ITEM_CHARS));
            match speaker {
                Speaker::User | Speaker::Assistant | Speaker::Prose => {
                    if matches_any(&lower, CONSTRAINT_MARKERS) {
                        doc.push("Constraints/Rules", &item());
                    }
                    if speaker != Speaker::User && matches_any(&lower, DECISION_MARKERS) {
                        doc.push("Decisions", &item());
                    }
                    if speaker != Speaker::User && matches_any(&lower, TODO_MARKERS) {
                        doc.push("Open TODOs", &item());
                    }
                    if speaker == Speaker::Prose && is_question(line) {
                        doc.push("Pending user asks", &item());
                    }
                    if speaker != Speaker::User && matches_any(&lower, ERROR_MARKERS) {
                        doc.push(ERRORS_SECTION, &item());
                    }
                }
                Speaker::ToolResult => {
                    if errors < ERRORS_PER_RESULT && matches_any(&lower, ERROR_MARKERS) {
                        doc.push(ERRORS_SECTION, &item());
                        errors += 1;
                    }
                }
                Speaker::Thinking | Speaker::ToolCall => {}
            }
        }
        for identifier in identifiers(&block) {
            doc.push("Exact identifiers", &format!("- {identifier}"));
        }
    }
    doc
}

/// `text` split into blocks by role label; unlabelled text continues the
/// block before it (prose at the start).
fn blocks(text: &str) -> Vec<(Speaker, String)> {
    let mut blocks: Vec<(Speaker, String)> = Vec::new();
    for line in text.lines() {
        let labelled = LABELS
            .iter()
            .find_map(|(label, speaker)| line.strip_prefix(label).map(|rest| (*speaker, rest)));
        match (labelled, blocks.last_mut()) {
            (Some((speaker, rest)), _) => blocks.push((speaker, rest.trim_start().to_owned())),
            (None, Some((_, block))) => {
                block.push('\n');
                block.push_str(line);
            }
            (None, None) => blocks.push((Speaker::Prose, line.to_owned())),
        }
    }
    blocks
}

/// Exact identifiers in `text`, in order of first appearance.
pub fn identifiers(text: &str) -> Vec<String> {
    // Word boundaries are ASCII ones: the regex engine's fast automata cannot
    // evaluate Unicode boundaries in non-ASCII text and fell back to a matcher
    // that took three quarters of a compaction's time on Chinese sessions. An
    // identifier next to CJK text ("提交abc1234f完成") is found this way too.
    static PATTERN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(concat!(
            r"(?P<url>https?://[^\s<>'`()\[\]{}]+)",
            r"|`(?P<code>[^`\n]{2,80})`",
            r"|(?P<uuid>(?-u:\b)[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}(?-u:\b))",
            r#"|(?P<winpath>(?-u:\b)[A-Za-z]:\\[^\s'"`<>|*?,;()]+)"#,
            r"|(?P<path>(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+)",
            r"|(?P<ip>(?-u:\b)(?:\d{1,3}\.){3}\d{1,3}(?::\d{2,5})?(?-u:\b))",
            r"|(?P<hex>(?-u:\b)[0-9a-f]{7,64}(?-u:\b))",
        ))
        .expect("the identifier pattern is valid")
    });
    let mut found: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for captures in PATTERN.captures_iter(text) {
        let identifier: Option<String> = if let Some(url) = captures.name("url") {
            Some(
                url.as_str()
                    .trim_end_matches(['.', ',', ':', ';', '"', '\''])
                    .to_owned(),
            )
        } else if let Some(code) = captures.name("code") {
            Some(code.as_str().to_owned())
        } else if let Some(path) = captures.name("winpath") {
            // Paths quoted in JSON (tool-call arguments) have doubled backslashes.
            let path = path.as_str().replace("\\\\", "\\");
            Some(path.trim_end_matches(['\\', '.', ',']).to_owned())
        } else if let Some(path) = captures.name("path") {
            let path = path.as_str().trim_end_matches('.');
            let last = path.rsplit('/').next().unwrap_or_default();
            let rooted = path.starts_with(['/', '~', '.']);
            (rooted || last.contains('.')).then(|| path.to_owned())
        } else if let Some(hex) = captures.name("hex") {
            // A hash has both digits and letters; plain numbers and words are not ids.
            let hex = hex.as_str();
            (hex.bytes().any(|b| b.is_ascii_digit())
                && hex.bytes().any(|b| b.is_ascii_alphabetic()))
            .then(|| hex.to_owned())
        } else {
            captures
                .name("uuid")
                .or_else(|| captures.name("ip"))
                .map(|m| m.as_str().trim_end_matches(['.', ',']).to_owned())
        };
        let meaningful =
            |id: &String| id.chars().count() >= 2 && id.chars().any(char::is_alphanumeric);
        if let Some(identifier) = identifier.filter(meaningful) {
            let identifier = clip(&identifier, ITEM_CHARS);
            if seen.insert(identifier.clone()) {
                found.push(identifier);
            }
        }
    }
    found
}

/// What the user asked: the message without fenced blocks (clients wrap
/// metadata in them), whitespace collapsed.
fn ask_text(block: &str) -> String {
    let mut prose = String::new();
    for (index, part) in block.split("```").enumerate() {
        // Odd parts are inside a fence.
        if index % 2 == 0 {
            prose.push_str(part);
            prose.push(' ');
        }
    }
    let ask = collapse(&prose);
    if ask.is_empty() { collapse(block) } else { ask }
}

/// Table rows, tree drawings, headings, quotes and code comments: layout,
/// not statements.
fn is_layout(line: &str) -> bool {
    ["|", "├", "│", "└", "#", ">", "//", "```"]
        .iter()
        .any(|prefix| line.starts_with(prefix))
}

fn matches_any(lower: &str, markers: &[&str]) -> bool {
    markers.iter().any(|marker| lower.contains(marker))
}

fn is_question(line: &str) -> bool {
    line.ends_with(['?', '？', '؟'])
}

/// Whitespace runs collapsed to single spaces.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Lines that record a choice (lower-cased matching).
const DECISION_MARKERS: &[&str] = &[
    "decided",
    "decision",
    "we chose",
    "i chose",
    "chosen",
    "going with",
    "will use",
    "we'll use",
    "i'll use",
    "switch to",
    "switched to",
    "instead of",
    "settled on",
    "opted",
    "approach:",
    "决定",
    "改用",
    "采用",
    "选择了",
    "方案",
    "entschieden",
    "entscheidung",
    "stattdessen",
    "wir nehmen",
    "ich nehme",
    "verwenden wir",
    "قررت",
    "قررنا",
    "سأستخدم",
    "سنستخدم",
    "بدلاً",
];

/// Lines that record open work.
const TODO_MARKERS: &[&str] = &[
    "todo",
    "to do:",
    "next step",
    "next:",
    "remaining",
    "still need",
    "needs to",
    "need to",
    "not yet",
    "follow up",
    "follow-up",
    "- [ ]",
    "pending",
    "下一步",
    "待办",
    "还需要",
    "尚未",
    "未完成",
    "接下来",
    "nächste",
    "noch offen",
    "muss noch",
    "fehlt noch",
    "als nächstes",
    "الخطوة التالية",
    "لم يتم",
    "متبقي",
    "لاحقاً",
];

/// Lines that state rules and constraints.
const CONSTRAINT_MARKERS: &[&str] = &[
    "must ",
    "must not",
    "never ",
    "always ",
    "do not ",
    "don't ",
    "should not",
    "shouldn't",
    "required",
    "requirement",
    "only use",
    "make sure",
    "not allowed",
    "forbidden",
    "rule:",
    "不要",
    "必须",
    "禁止",
    "务必",
    "只能",
    "一定要",
    "niemals",
    "darf nicht",
    "nicht erlaubt",
    "auf keinen fall",
    "verboten",
    "يجب",
    "لا تستخدم",
    "ممنوع",
    "دائماً",
    "أبداً",
];

/// Lines that report a failure.
const ERROR_MARKERS: &[&str] = &[
    "error",
    "failed",
    "failure",
    "exception",
    "panic",
    "traceback",
    "fatal",
    "denied",
    "not found",
    "cannot ",
    "can't ",
    "unable to",
    "错误",
    "失败",
    "异常",
    "报错",
    "拒绝",
    "fehler",
    "fehlgeschlagen",
    "nicht gefunden",
    "خطأ",
    "فشل",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::summarize::sections::REQUIRED_SECTIONS;

    const CONVERSATION: &str = "[User]: Please deploy to staging. Never touch prod.\n\n\
        [Assistant]: I decided to use the blue-green approach for `deploy.sh`.\n\
        TODO: rotate the keys afterwards.\n\n\
        [Assistant tool calls]: exec(command=\"ls /srv/app/releases\")\n\n\
        [Tool result]: error: permission denied on /srv/app/releases/current\n\n\
        [User]: 部署完成后告诉我，不要重启数据库。\n\n\
        [Assistant]: See https://example.com/runbook and commit 3f2a9c1d.";

    #[test]
    fn files_lines_under_the_required_sections() {
        let doc = extract(CONVERSATION);
        let has =
            |section: &str, needle: &str| doc.lines(section).iter().any(|l| l.contains(needle));
        assert!(has("Decisions", "blue-green"));
        assert!(has("Open TODOs", "rotate the keys"));
        assert!(has("Constraints/Rules", "Never touch prod"));
        assert!(has("Constraints/Rules", "不要重启数据库"));
        assert!(has("Pending user asks", "deploy to staging"));
        assert!(has("Pending user asks", "部署完成后告诉我"));
        assert!(has(ERRORS_SECTION, "permission denied"));
        for id in [
            "deploy.sh",
            "/srv/app/releases/current",
            "https://example.com/runbook",
            "3f2a9c1d",
        ] {
            assert!(
                has("Exact identifiers", id),
                "{id} missing: {:?}",
                doc.lines("Exact identifiers")
            );
        }
    }

    #[test]
    fn is_deterministic_and_within_budget() {
        let request = || SummaryRequest {
            text: CONVERSATION.repeat(50),
            instructions: String::new(),
            max_tokens: 300,
            deadline: std::time::Instant::now() + std::time::Duration::from_secs(5),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let first = runtime
            .block_on(ExtractiveSummarizer.summarize(request()))
            .expect("summary");
        let second = runtime
            .block_on(ExtractiveSummarizer.summarize(request()))
            .expect("summary");
        assert_eq!(first, second);
        assert!(crate::contract::tokens::estimate_text(&first) <= 300);
        for title in REQUIRED_SECTIONS {
            assert!(first.contains(&format!("## {title}")), "{first}");
        }
    }

    #[test]
    fn asks_lose_client_envelopes_and_tables_are_not_statements() {
        let doc = extract(
            "[User]: Sender (untrusted metadata): ```json\n{\"id\": \"tui\"}\n``` [Thu 09:53] hast du es getestet?\n\n\
             [Assistant]: | never | a table cell |\n## Decision heading\nWe decided to ship.",
        );
        assert_eq!(
            doc.lines("Pending user asks"),
            ["- Sender (untrusted metadata): [Thu 09:53] hast du es getestet?"]
        );
        assert!(
            doc.lines("Constraints/Rules").is_empty(),
            "{:?}",
            doc.lines("Constraints/Rules")
        );
        assert_eq!(doc.lines("Decisions"), ["- We decided to ship."]);
    }

    #[test]
    fn unescapes_windows_paths_quoted_in_json() {
        let ids = identifiers(
            r#"[Assistant tool calls]: read(path="C:\\Users\\WH\\.openclaw\\workspace\\")"#,
        );
        assert_eq!(ids, [r"C:\Users\WH\.openclaw\workspace"]);
    }

    #[test]
    fn finds_identifiers_but_not_words() {
        let ids = identifiers(
            "see C:\\Users\\andre\\x.rs, 10.0.0.2:8080, a1b2c3d4-0000-4000-8000-123456789abc, and/or plain words 1234567 `\\\\`",
        );
        assert_eq!(
            ids,
            [
                "C:\\Users\\andre\\x.rs",
                "10.0.0.2:8080",
                "a1b2c3d4-0000-4000-8000-123456789abc"
            ]
        );
    }

    #[test]
    fn finds_identifiers_inside_cjk_text() {
        let ids = identifiers(
            "已提交3f9a2c1b，服务在10.0.0.7:9000运行，编号a1b2c3d4-0000-4000-8000-123456789abc。",
        );
        assert_eq!(
            ids,
            [
                "3f9a2c1b",
                "10.0.0.7:9000",
                "a1b2c3d4-0000-4000-8000-123456789abc"
            ]
        );
    }
}

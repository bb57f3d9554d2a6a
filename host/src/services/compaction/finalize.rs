//! The summary a compaction writes: the summarizer's answer brought into the
//! required sections, the exact identifiers of the summarized history added,
//! the turn-prefix summary in a section of its own, the file lists appended,
//! all within 16,000 characters and the summary's token budget.

use super::files::FileLists;
use crate::contract::tokens;
use crate::services::summarize::SummaryDoc;

/// Longest compaction summary, in characters (the reference's cap).
pub const MAX_SUMMARY_CHARS: usize = 16_000;
/// What a summary cut to its budget says.
pub const TRUNCATION_MARKER: &str = "[Compaction summary truncated to fit budget]";
/// Longest file list section, in characters.
const FILE_LIST_CHARS: usize = 2_000;
/// Section of the turn-prefix summary.
const TURN_SECTION: &str = "Turn context (split turn)";

/// The final summary text and whether the budget cut something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finalized {
    pub text: String,
    pub truncated: bool,
}

/// Assembles the summary (see the module docs). `identifiers` are those of
/// the history the summary replaces, in order of first appearance.
pub(crate) fn summary(
    history_summary: &str,
    turn_prefix: Option<&str>,
    identifiers: &[String],
    files: &FileLists,
    max_tokens: u64,
) -> Finalized {
    let mut doc = SummaryDoc::parse(history_summary);
    for identifier in identifiers {
        doc.push("Exact identifiers", &format!("- {identifier}"));
    }
    if let Some(prefix) = turn_prefix {
        for line in SummaryDoc::parse(prefix).flattened() {
            doc.push(TURN_SECTION, &line);
        }
    }
    let file_lists = file_lists(files);
    let reserved_chars = file_lists.chars().count() + TRUNCATION_MARKER.len() + 4;
    let reserved_tokens =
        tokens::estimate_text(&file_lists) + tokens::estimate_text(TRUNCATION_MARKER) + 2;
    let rendered = doc.render(
        MAX_SUMMARY_CHARS.saturating_sub(reserved_chars),
        max_tokens.saturating_sub(reserved_tokens),
    );
    let mut text = rendered.text;
    let truncated = rendered.dropped > 0;
    if truncated {
        text.push_str("\n\n");
        text.push_str(TRUNCATION_MARKER);
    }
    if !file_lists.is_empty() {
        text.push_str("\n\n");
        text.push_str(&file_lists);
    }
    Finalized { text, truncated }
}

/// `<read-files>` and `<modified-files>` as the reference writes them, each
/// list cut to its share of the budget.
fn file_lists(files: &FileLists) -> String {
    let mut sections = Vec::new();
    for (tag, list) in [
        ("read-files", &files.read),
        ("modified-files", &files.modified),
    ] {
        if list.is_empty() {
            continue;
        }
        let mut body = String::new();
        let mut shown = 0;
        for file in list {
            if body.chars().count() + file.chars().count() + 1 > FILE_LIST_CHARS / 2 {
                break;
            }
            body.push_str(file);
            body.push('\n');
            shown += 1;
        }
        if shown < list.len() {
            body.push_str(&format!("… and {} more\n", list.len() - shown));
        }
        sections.push(format!("<{tag}>\n{body}</{tag}>"));
    }
    sections.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::summarize::REQUIRED_SECTIONS;

    #[test]
    fn brings_any_answer_into_the_required_shape() {
        let files = FileLists {
            read: vec!["src/lib.rs".into()],
            modified: vec!["src/main.rs".into()],
        };
        let finalized = summary(
            "## Goal\nship it\n## Decisions\n- keep tokio",
            Some("## Pending user asks\n- the turn's request"),
            &["/tmp/out.txt".to_owned()],
            &files,
            4_000,
        );
        let text = &finalized.text;
        let mut cursor = 0;
        for title in REQUIRED_SECTIONS {
            let at = text[cursor..]
                .find(&format!("## {title}"))
                .expect("in order")
                + cursor;
            cursor = at;
        }
        assert!(
            text.contains("- /tmp/out.txt"),
            "identifiers of the summarized history"
        );
        assert!(
            text.contains(
                "## Turn context (split turn)\n**Pending user asks**\n- the turn's request"
            )
        );
        assert!(text.ends_with("<read-files>\nsrc/lib.rs\n</read-files>\n\n<modified-files>\nsrc/main.rs\n</modified-files>"));
        assert!(!finalized.truncated);
    }

    #[test]
    fn caps_the_summary_and_says_so() {
        let long: String = (0..5_000).map(|i| format!("- decision {i}\n")).collect();
        let finalized = summary(
            &format!("## Decisions\n{long}"),
            None,
            &[],
            &FileLists::default(),
            100_000,
        );
        assert!(finalized.text.chars().count() <= MAX_SUMMARY_CHARS);
        assert!(finalized.truncated);
        assert!(finalized.text.contains(TRUNCATION_MARKER));
        assert!(
            finalized.text.contains("- decision 4999"),
            "the newest survive"
        );

        let small = summary(
            &format!("## Decisions\n{long}"),
            None,
            &[],
            &FileLists::default(),
            300,
        );
        assert!(tokens::estimate_text(&small.text) <= 300);
    }
}

//! The summary a compaction writes: the summarizer's answer brought into the
//! required sections, the exact identifiers of the summarized history added,
//! the turn-prefix summary in a section of its own, the file lists appended,
//! all within 16,000 characters and the summary's token budget. When the cut
//! falls inside a turn whose ask is still being worked on, that ask leads
//! the summary verbatim (bounded), as the reference's "Latest unresolved user
//! request" does: a summary of it could lose what the user asked for.

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
/// Heading of the pending ask, kept verbatim.
const PENDING_ASK_HEADING: &str = "## Latest unresolved user request";
/// Longest pending ask kept, in characters (the reference's bound).
pub(crate) const MAX_PENDING_ASK_CHARS: usize = 800;
/// What stands between the two ends of a pending ask cut to its bound.
const PENDING_ASK_CUT: &str = "\n[... latest user request truncated ...]\n";

/// The final summary text and whether the budget cut something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finalized {
    pub text: String,
    pub truncated: bool,
}

/// The user's ask as a compaction keeps it verbatim: its text, at most
/// [`MAX_PENDING_ASK_CHARS`] characters (both ends kept when longer); `None`
/// when it is blank.
pub(crate) fn pending_ask(text: &str) -> Option<String> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let chars = text.chars().count();
    if chars <= MAX_PENDING_ASK_CHARS {
        return Some(text.to_owned());
    }
    let room = MAX_PENDING_ASK_CHARS - PENDING_ASK_CUT.chars().count();
    let head: String = text.chars().take(room / 2).collect();
    let tail: String = text.chars().skip(chars - (room - room / 2)).collect();
    Some(format!("{head}{PENDING_ASK_CUT}{tail}"))
}

/// Assembles the summary (see the module docs). `identifiers` are those of
/// the history the summary replaces, in order of first appearance;
/// `pending_ask` is the ask of the turn the cut falls in
/// ([`pending_ask`]).
pub(crate) fn summary(
    history_summary: &str,
    turn_prefix: Option<&str>,
    pending_ask: Option<&str>,
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
    // The ask as a JSON string: quoted, so no heading inside it can pass
    // for a section of the summary.
    let ask = pending_ask
        .map(|ask| {
            format!(
                "{PENDING_ASK_HEADING}\n{}\n\n",
                serde_json::Value::from(ask)
            )
        })
        .unwrap_or_default();
    let reserved_chars =
        ask.chars().count() + file_lists.chars().count() + TRUNCATION_MARKER.len() + 4;
    let reserved_tokens = tokens::estimate_text(&ask)
        + tokens::estimate_text(&file_lists)
        + tokens::estimate_text(TRUNCATION_MARKER)
        + 2;
    let rendered = doc.render(
        MAX_SUMMARY_CHARS.saturating_sub(reserved_chars),
        max_tokens.saturating_sub(reserved_tokens),
    );
    let mut text = ask;
    text.push_str(&rendered.text);
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
            None,
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
            None,
            &[],
            &FileLists::default(),
            300,
        );
        assert!(tokens::estimate_text(&small.text) <= 300);
    }

    #[test]
    fn a_pending_ask_leads_the_summary_verbatim_and_bounded() {
        let ask = "Rename `Foo` to `Bar` everywhere.\n## Decisions\nnone";
        let finalized = summary(
            "## Goal\nrename",
            Some("## Progress\n- renamed two files"),
            pending_ask(ask).as_deref(),
            &[],
            &FileLists::default(),
            4_000,
        );
        assert!(
            finalized.text.starts_with(&format!(
                "## Latest unresolved user request\n{}\n\n",
                serde_json::Value::from(ask)
            )),
            "{}",
            finalized.text
        );
        assert_eq!(pending_ask("  \n "), None);
        let long = format!("{}{}", "a".repeat(1_000), "z".repeat(1_000));
        let kept = pending_ask(&long).expect("an ask");
        assert_eq!(kept.chars().count(), MAX_PENDING_ASK_CHARS);
        assert!(kept.starts_with("aaa") && kept.ends_with("zzz"));
        assert!(kept.contains("[... latest user request truncated ...]"));
        // Within a small budget the ask still leads and the total fits.
        let small = summary(
            &format!("## Decisions\n{}", "- decision\n".repeat(2_000)),
            None,
            pending_ask(ask).as_deref(),
            &[],
            &FileLists::default(),
            300,
        );
        assert!(small.text.starts_with("## Latest unresolved user request"));
        assert!(tokens::estimate_text(&small.text) <= 300, "{}", small.text);
    }
}

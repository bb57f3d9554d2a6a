//! What a model-backed summarizer is asked to write (the extractive one
//! ignores instructions and always writes the required sections).

use crate::services::summarize::REQUIRED_SECTIONS;

/// The shared part of every summary instruction.
fn format_rules() -> String {
    let sections: Vec<String> = REQUIRED_SECTIONS
        .iter()
        .map(|title| format!("## {title}"))
        .collect();
    format!(
        "Use exactly these Markdown sections, in this order, writing \"- (none)\" under an empty one:\n{}\n\n\
         Under Decisions: what was decided and why. Under Open TODOs: work started or promised and not done. \
         Under Constraints/Rules: requirements and preferences the user stated. Under Pending user asks: \
         the user's requests not yet fulfilled, newest last. Under Exact identifiers: file paths, URLs, \
         UUIDs, hashes, IDs, hostnames, IPs and ports, copied exactly (no shortening or reconstruction). \
         You may add a section ## Errors for failures that still matter. Prefer recent context over older \
         history: the reader must know what it was doing, not only what was discussed.",
        sections.join("\n")
    )
}

fn with_custom(base: String, custom: Option<&str>) -> String {
    match custom.map(str::trim).filter(|custom| !custom.is_empty()) {
        Some(custom) => format!("{base}\n\nAdditional focus:\n{custom}"),
        None => base,
    }
}

/// For one chunk of the history.
pub(crate) fn chunk(custom: Option<&str>) -> String {
    with_custom(
        format!(
            "The content above is part of a conversation between a user and an AI assistant. Write a \
             structured context checkpoint of it for another model that will continue the work.\n\n{}",
            format_rules()
        ),
        custom,
    )
}

/// For the beginning of a turn whose end is kept verbatim.
pub(crate) fn turn_prefix() -> String {
    "The content above is the BEGINNING of the current turn, too large to keep; its end is kept \
     verbatim after this summary. Summarize what the user asked in this turn, the decisions and work \
     done so far in it, and what is needed to understand the kept end. Be concise; keep exact \
     identifiers exactly."
        .to_owned()
}

/// For merging partial summaries (and the previous compaction's summary).
pub(crate) fn merge(custom: Option<&str>) -> String {
    with_custom(
        format!(
            "The content above holds partial summaries of consecutive parts of one conversation, oldest \
             first, and possibly the summary of everything before them (<previous-summary>). Merge them \
             into one summary that preserves active tasks and their status, the last thing the user \
             asked and what was being done about it, decisions and their rationale, TODOs, open questions, \
             constraints and commitments.\n\n{}",
            format_rules()
        ),
        custom,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_name_every_required_section_and_the_focus() {
        let text = merge(Some("keep the API keys out"));
        for title in REQUIRED_SECTIONS {
            assert!(text.contains(&format!("## {title}")));
        }
        assert!(text.ends_with("Additional focus:\nkeep the API keys out"));
        assert!(!chunk(Some("  ")).contains("Additional focus"));
    }
}

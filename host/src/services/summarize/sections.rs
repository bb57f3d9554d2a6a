//! The structured summary every summarizer's output is brought into: the
//! required sections in their order, then any others, each a list of lines,
//! rendered within a character and a token budget that keeps the newest lines
//! of every section.

use std::collections::HashSet;

use crate::contract::text::clip;
use crate::contract::tokens;

/// The sections a compaction summary must have, in this order.
pub const REQUIRED_SECTIONS: [&str; 5] = [
    "Decisions",
    "Open TODOs",
    "Constraints/Rules",
    "Pending user asks",
    "Exact identifiers",
];

/// Where errors met in the history go (after the required sections).
pub const ERRORS_SECTION: &str = "Errors";

/// Where text before any heading of a parsed summary goes.
const PREAMBLE_SECTION: &str = "Earlier summary";

/// Longest line kept; longer ones are cut with an ellipsis.
const MAX_LINE_CHARS: usize = 1_000;

/// What an empty section shows.
const EMPTY_SECTION: &str = "- (none)";

/// Relative share of the budget of each required section (by position),
/// and of all other sections together (split evenly among them).
const REQUIRED_WEIGHTS: [usize; 5] = [36, 24, 24, 24, 24];
const OTHERS_WEIGHT: usize = 36;

/// Headings other summarizers (the reference's prompts among them) use for
/// what a required section holds, normalized (see `normalize`).
const ALIASES: [(&str, &str); 12] = [
    ("keydecisions", "Decisions"),
    ("nextsteps", "Open TODOs"),
    ("todos", "Open TODOs"),
    ("todo", "Open TODOs"),
    ("remainingwork", "Open TODOs"),
    ("inprogress", "Open TODOs"),
    ("constraints&preferences", "Constraints/Rules"),
    ("constraints/preferences", "Constraints/Rules"),
    ("constraints", "Constraints/Rules"),
    ("openquestions", "Pending user asks"),
    ("pendingasks", "Pending user asks"),
    ("identifiers", "Exact identifiers"),
];

/// A summary as sections of lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryDoc {
    sections: Vec<Section>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Section {
    title: String,
    lines: Vec<String>,
    /// The lines, for constant-time duplicate checks.
    seen: HashSet<String>,
}

impl Section {
    fn new(title: &str) -> Self {
        Self {
            title: title.trim().to_owned(),
            lines: Vec::new(),
            seen: HashSet::new(),
        }
    }
}

/// A rendered summary and how many lines the budget left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The text.
    pub text: String,
    /// Lines left out for the budget.
    pub dropped: usize,
}

impl Default for SummaryDoc {
    fn default() -> Self {
        Self {
            sections: REQUIRED_SECTIONS
                .iter()
                .map(|title| Section::new(title))
                .collect(),
        }
    }
}

impl SummaryDoc {
    /// Adds `line` to section `title` (created after the others if new),
    /// unless the section already has it.
    pub fn push(&mut self, title: &str, line: &str) {
        let line = clip(line.trim_end(), MAX_LINE_CHARS);
        if line.trim().is_empty() {
            return;
        }
        let section = match self.position(title) {
            Some(index) => &mut self.sections[index],
            None => {
                self.sections.push(Section::new(title));
                let last = self.sections.len() - 1;
                &mut self.sections[last]
            }
        };
        if section.seen.insert(line.clone()) {
            section.lines.push(line);
        }
    }

    /// The lines of section `title` (empty if there is none).
    pub fn lines(&self, title: &str) -> &[String] {
        self.position(title)
            .map_or(&[], |index| self.sections[index].lines.as_slice())
    }

    /// Reads a Markdown summary: `##` headings open sections (the headings
    /// other summarizers use for the required ones map to them), other
    /// non-blank lines belong to the current one (text before any heading to
    /// "Earlier summary"). File lists (`<read-files>`, `<modified-files>`),
    /// separators, empty-section placeholders and truncation notes are left
    /// out: they are regenerated.
    pub fn parse(text: &str) -> Self {
        let mut doc = Self::default();
        let mut title = PREAMBLE_SECTION.to_owned();
        let mut in_file_list = false;
        for line in text.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with("<read-files>") || trimmed.starts_with("<modified-files>") {
                in_file_list = true;
            }
            if in_file_list {
                in_file_list =
                    !(trimmed.ends_with("</read-files>") || trimmed.ends_with("</modified-files>"));
                continue;
            }
            if let Some(heading) = heading(trimmed) {
                title = heading.to_owned();
                continue;
            }
            let noise = trimmed.is_empty()
                || trimmed == "---"
                || is_placeholder(trimmed)
                || trimmed.starts_with("[Compaction summary truncated");
            if !noise {
                doc.push(&title, line);
            }
        }
        doc
    }

    /// Appends `other`'s lines after this document's, section by section.
    pub fn absorb(&mut self, other: &SummaryDoc) {
        for section in &other.sections {
            for line in &section.lines {
                self.push(&section.title, line);
            }
        }
    }

    /// Every line, section titles as bold lines, for nesting this document
    /// inside a section of another.
    pub fn flattened(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for section in self.sections.iter().filter(|s| !s.lines.is_empty()) {
            lines.push(format!("**{}**", section.title));
            lines.extend(section.lines.iter().cloned());
        }
        lines
    }

    /// The summary as Markdown in at most `max_chars` characters and about
    /// `max_tokens` estimated tokens: every section keeps its newest lines
    /// within its share of the budget, and unused shares go to sections with
    /// more to say.
    pub fn render(&self, max_chars: usize, max_tokens: u64) -> Rendered {
        let mut limit = max_chars;
        loop {
            let rendered = self.render_within(limit);
            let estimate = tokens::estimate_text(&rendered.text);
            if estimate <= max_tokens || limit == 0 {
                return rendered;
            }
            // Shrink in proportion (CJK text costs more tokens per char).
            let scaled =
                (limit as u128 * max_tokens as u128 * 9 / (estimate as u128 * 10)) as usize;
            limit = scaled.min(limit.saturating_sub(1));
        }
    }

    fn render_within(&self, max_chars: usize) -> Rendered {
        let header_cost: usize = self
            .sections
            .iter()
            .map(|section| {
                let placeholder = if section.lines.is_empty() {
                    EMPTY_SECTION.len() + 1
                } else {
                    0
                };
                section.title.chars().count() + 5 + placeholder
            })
            .sum();
        let available = max_chars.saturating_sub(header_cost);
        let others = self
            .sections
            .iter()
            .skip(REQUIRED_WEIGHTS.len())
            .filter(|section| !section.lines.is_empty())
            .count()
            .max(1);
        let weights: Vec<usize> = self
            .sections
            .iter()
            .enumerate()
            .map(|(index, section)| {
                if section.lines.is_empty() {
                    0
                } else {
                    REQUIRED_WEIGHTS
                        .get(index)
                        .copied()
                        .unwrap_or((OTHERS_WEIGHT / others).max(1))
                }
            })
            .collect();
        let total_weight: usize = weights.iter().sum::<usize>().max(1);

        // Pass 1: each section's newest lines within its share.
        let mut kept: Vec<Vec<bool>> = self
            .sections
            .iter()
            .map(|s| vec![false; s.lines.len()])
            .collect();
        let mut used = 0usize;
        for (index, section) in self.sections.iter().enumerate() {
            let share = available * weights[index] / total_weight;
            let mut spent = 0usize;
            for (line_index, line) in section.lines.iter().enumerate().rev() {
                let cost = line.chars().count() + 1;
                if spent + cost > share {
                    break;
                }
                spent += cost;
                kept[index][line_index] = true;
            }
            used += spent;
        }
        // Pass 2: what is left goes to the next-newest lines, sections in order.
        for (index, section) in self.sections.iter().enumerate() {
            for (line_index, line) in section.lines.iter().enumerate().rev() {
                if kept[index][line_index] {
                    continue;
                }
                let cost = line.chars().count() + 1;
                if used + cost > available {
                    break;
                }
                used += cost;
                kept[index][line_index] = true;
            }
        }

        let mut text = String::new();
        let mut dropped = 0;
        for (index, section) in self.sections.iter().enumerate() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str("## ");
            text.push_str(&section.title);
            text.push('\n');
            let mut any = false;
            for (line_index, line) in section.lines.iter().enumerate() {
                if kept[index][line_index] {
                    text.push_str(line);
                    text.push('\n');
                    any = true;
                } else {
                    dropped += 1;
                }
            }
            if !any {
                text.push_str(EMPTY_SECTION);
                text.push('\n');
            }
        }
        let text = clip(text.trim_end(), max_chars);
        Rendered { text, dropped }
    }

    fn position(&self, title: &str) -> Option<usize> {
        let normalized = normalize(title);
        let wanted = ALIASES
            .iter()
            .find(|(alias, _)| *alias == normalized)
            .map_or(normalized, |(_, required)| normalize(required));
        self.sections
            .iter()
            .position(|section| normalize(&section.title) == wanted)
    }
}

/// The title of a `##` heading line (`#` lines are often comments of quoted
/// files, `###` and deeper are content),
/// or of the reference's `**Turn Context (split turn):**` label.
fn heading(line: &str) -> Option<&str> {
    let title = line.strip_prefix("## ").or_else(|| {
        line.strip_prefix("**")
            .and_then(|rest| rest.strip_suffix(":**"))
            .filter(|label| label.to_lowercase().starts_with("turn context"))
    })?;
    let title = title.trim().trim_end_matches(':').trim();
    (!title.is_empty()).then_some(title)
}

fn is_placeholder(line: &str) -> bool {
    let bare = line
        .trim_start_matches(['-', '*', ' '])
        .trim()
        .to_lowercase();
    matches!(bare.as_str(), "(none)" | "none" | "none." | "n/a")
}

fn normalize(title: &str) -> String {
    title
        .trim()
        .trim_end_matches(':')
        .chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_required_sections_in_order_even_when_empty() {
        let mut doc = SummaryDoc::default();
        doc.push("pending user asks", "- ship it");
        doc.push(ERRORS_SECTION, "- E1");
        let text = doc.render(10_000, 10_000).text;
        let positions: Vec<usize> = REQUIRED_SECTIONS
            .iter()
            .chain([&ERRORS_SECTION])
            .map(|title| text.find(&format!("## {title}")).expect("section present"))
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(text.contains("## Pending user asks\n- ship it"));
        assert!(text.contains("## Decisions\n- (none)"));
    }

    #[test]
    fn keeps_the_newest_lines_within_the_budget() {
        let mut doc = SummaryDoc::default();
        for i in 0..200 {
            doc.push("Decisions", &format!("- decision number {i:03}"));
        }
        let rendered = doc.render(600, 10_000);
        assert!(rendered.text.chars().count() <= 600);
        assert!(rendered.dropped > 0);
        assert!(rendered.text.contains("decision number 199"));
        assert!(!rendered.text.contains("decision number 000"));
    }

    #[test]
    fn respects_the_token_budget_for_cjk_text() {
        let mut doc = SummaryDoc::default();
        for i in 0..100 {
            doc.push(
                "Decisions",
                &format!("- 决定使用方案{i}并且保留所有的文件路径和标识符"),
            );
        }
        let rendered = doc.render(16_000, 500);
        assert!(tokens::estimate_text(&rendered.text) <= 500);
    }

    #[test]
    fn parses_foreign_summaries_into_sections() {
        let doc = SummaryDoc::parse(
            "HEARTBEAT_OK\n\n---\n\n**Turn Context (split turn):**\n\n## Decisions\n- use rust\n### sub\n\n## Goal\nship\n\n<read-files>\na.rs\n</read-files>\n- (none)",
        );
        assert_eq!(doc.lines("Decisions"), ["- use rust", "### sub"]);
        assert_eq!(doc.lines("Goal"), ["ship"]);
        assert_eq!(doc.lines("Earlier summary"), ["HEARTBEAT_OK"]);
        assert!(doc.lines("Turn Context (split turn)").is_empty());
        assert!(
            !format!("{doc:?}").contains("a.rs"),
            "file lists are regenerated"
        );
    }

    #[test]
    fn folds_the_references_headings_into_the_required_sections() {
        let doc = SummaryDoc::parse(
            "## Goal\nship\n## Constraints & Preferences\n- no prod\n## Key Decisions\n- **tokio**: async\n## Next Steps\n1. test\n# comment of a quoted file",
        );
        assert_eq!(doc.lines("Constraints/Rules"), ["- no prod"]);
        assert_eq!(doc.lines("Decisions"), ["- **tokio**: async"]);
        assert_eq!(
            doc.lines("Open TODOs"),
            ["1. test", "# comment of a quoted file"]
        );
        assert_eq!(doc.lines("Goal"), ["ship"]);
    }

    #[test]
    fn other_sections_share_a_bounded_part_of_the_budget() {
        let mut doc = SummaryDoc::default();
        for section in 0..30 {
            for line in 0..50 {
                doc.push(
                    &format!("Extra {section}"),
                    &format!("- filler line {line} of extra {section}"),
                );
            }
        }
        for line in 0..200 {
            doc.push("Decisions", &format!("- decision {line}"));
        }
        let text = doc.render(8_000, 100_000).text;
        let decisions = text
            .lines()
            .filter(|line| line.starts_with("- decision"))
            .count();
        assert!(
            decisions >= 100,
            "the required sections keep their share: {decisions}"
        );
    }
}

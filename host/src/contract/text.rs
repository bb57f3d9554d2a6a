//! Text helpers every layer shares, and the one way text an engine wrote is
//! made safe to keep and show: control characters made visible (so no escape
//! sequence, carriage return or forged line reaches a terminal or a log) and
//! the length capped (so no engine makes the host keep or print megabytes).
//! Both are idempotent, so text may pass through them at every boundary.

use std::fmt::Write as _;

/// The most bytes of an engine's error message, reason or name the host
/// keeps (quarantine records, reports, logs).
pub const MAX_ENGINE_TEXT_BYTES: usize = 4 * 1024;

/// The most bytes of a guest's stderr tail the host keeps.
pub const MAX_STDERR_TAIL_BYTES: usize = 4 * 1024;

/// `text` cut to at most `max_chars` characters, ending in `…` when cut.
pub fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some(_) if max_chars == 0 => String::new(),
        Some(_) => {
            let end = text
                .char_indices()
                .nth(max_chars - 1)
                .map_or(text.len(), |(index, _)| index);
            format!("{}…", &text[..end])
        }
    }
}

/// Engine-written `text` as one safe line of at most `max_bytes` bytes:
/// every control character (newlines included) and every Unicode
/// bidirectional or line-separator control is shown as an escape (`\n`,
/// `\u{1b}`), and a longer text is cut on a character boundary and ends in a
/// note saying how long it was.
pub fn untrusted_line(text: &str, max_bytes: usize) -> String {
    cap_head(&escape(text, false), max_bytes)
}

/// Like [`untrusted_line`], but newlines stay (each later shown as its own
/// line) and a longer text keeps its **end**: for stderr tails, whose last
/// lines say what went wrong.
pub fn untrusted_tail(text: &str, max_bytes: usize) -> String {
    cap_tail(&escape(text, true), max_bytes)
}

/// Whether `c` must never reach a terminal or a log as it is.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200e}' | '\u{200f}'              // left-to-right / right-to-left marks
            | '\u{2028}' | '\u{2029}'            // line and paragraph separators
            | '\u{202a}'..='\u{202e}'            // bidirectional embeddings and overrides
            | '\u{2066}'..='\u{2069}'            // bidirectional isolates
            | '\u{feff}') // byte-order mark
}

fn escape(text: &str, keep_newlines: bool) -> String {
    if !text.chars().any(is_unsafe) {
        return text.to_owned();
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' if keep_newlines => escaped.push('\n'),
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            c if is_unsafe(c) => {
                let _ = write!(escaped, "\\u{{{:x}}}", c as u32);
            }
            c => escaped.push(c),
        }
    }
    escaped
}

/// The note a cut text ends (or, for tails, starts) with.
fn cut_note(total: usize) -> String {
    format!(" … [truncated: {total} bytes in all]")
}

/// The longest prefix of `text` that, with the note, fits in `max_bytes`.
fn cap_head(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let note = cut_note(text.len());
    let mut end = max_bytes.saturating_sub(note.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{note}", &text[..end])
}

/// The longest suffix of `text` that, after the note, fits in `max_bytes`.
fn cap_tail(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let note = format!("[truncated: {} bytes in all] … ", text.len());
    let mut start = text.len() - max_bytes.saturating_sub(note.len()).min(text.len());
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("{note}{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible() {
        let forged = "ok\r\x1b[2J\x1b]52;c;ZXZpbA==\x07\nINFO healthy\u{202e}";
        let line = untrusted_line(forged, 1024);
        assert!(!line.chars().any(is_unsafe), "{line:?}");
        assert_eq!(
            line,
            "ok\\r\\u{1b}[2J\\u{1b}]52;c;ZXZpbA==\\u{7}\\nINFO healthy\\u{202e}"
        );
        let tail = untrusted_tail(forged, 1024);
        assert_eq!(tail.lines().count(), 2, "newlines kept in tails: {tail:?}");
        assert!(!tail.chars().any(|c| c != '\n' && is_unsafe(c)));
    }

    #[test]
    fn long_text_is_capped_and_says_so() {
        let long = "é".repeat(10_000);
        let line = untrusted_line(&long, 100);
        assert!(line.len() <= 100, "{}", line.len());
        assert!(line.ends_with("[truncated: 20000 bytes in all]"), "{line}");
        let tail = untrusted_tail(&format!("{long}the end"), 100);
        assert!(tail.len() <= 100);
        assert!(tail.starts_with("[truncated: 20007 bytes in all]"));
        assert!(tail.ends_with("the end"));
    }

    #[test]
    fn making_text_safe_twice_changes_nothing() {
        for text in [
            "plain",
            "a\x1bb\nc",
            &"x".repeat(5_000),
            &"\n\r".repeat(3_000),
        ] {
            let line = untrusted_line(text, 4_096);
            assert_eq!(untrusted_line(&line, 4_096), line);
            let tail = untrusted_tail(text, 4_096);
            assert_eq!(untrusted_tail(&tail, 4_096), tail);
        }
    }

    #[test]
    fn clips_on_character_boundaries() {
        assert_eq!(clip("héllo", 3), "hé…");
        assert_eq!(clip("héllo", 5), "héllo");
        assert_eq!(clip("abc", 0), "");
    }
}

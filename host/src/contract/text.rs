//! Text helpers every layer shares.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clips_on_character_boundaries() {
        assert_eq!(clip("héllo", 3), "hé…");
        assert_eq!(clip("héllo", 5), "héllo");
        assert_eq!(clip("abc", 0), "");
    }
}

//! An error and its causes as the one line the command line prints.

/// `error` and each of its causes, joined with ": ", each once: a cause
/// whose text the line already holds (an error type that shows its source in
/// its own message, and returns it as its source too) is not repeated.
pub(crate) fn error_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("not a session transcript: {0}")]
    struct ShowsItsSource(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("`a.jsonl` line 1: not a session header")]
    struct Inner;

    #[test]
    fn each_cause_is_printed_once() {
        let error = anyhow::Error::new(ShowsItsSource(Inner)).context("cannot read `a.jsonl`");
        assert_eq!(
            error_line(&error),
            "cannot read `a.jsonl`: not a session transcript: `a.jsonl` line 1: not a session header"
        );
        let plain = anyhow::anyhow!("outer").context("top");
        assert_eq!(error_line(&plain), "top: outer");
    }
}

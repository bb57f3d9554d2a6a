//! The engine's powers under check: its tools (`wit/tools.wit`) — the
//! definitions against the contract's rules, each tool called on a session
//! it knows, an unknown tool refused with an error rather than a trap — and
//! the completions it asked the checker's model for (an offline model: the
//! extractive summarizer answers) against the budgets.

use super::judge::Finding;
use super::{Checker, failure_text};
use crate::contract::engine::{CallOptions, ContextEngine};
use crate::contract::failure::{FailureKind, Operation};
use crate::contract::text::untrusted_line;
use crate::contract::tools::check_result;
use crate::contract::types::SessionRef;
use crate::contract::validate;
use crate::sandbox::WasmEngine;
use crate::services::sql::database_path;

/// What a tool call's answer is expected to be.
const TOOL_ANSWER: &str =
    "an answer within the limits, or an engine-error for arguments it cannot use (never a trap)";

impl Checker {
    pub(super) async fn tools(&mut self, engine: &WasmEngine, session: &SessionRef) {
        let call = CallOptions::default();
        let tools = match self
            .timed("tools", Operation::ListTools, engine.tools(&call))
            .await
        {
            Ok(tools) => tools,
            Err(failure) => {
                return self.record(
                    "tools",
                    "a list of valid tool definitions",
                    Finding::fail(failure_text(failure)),
                );
            }
        };
        if let Err(violation) = validate::check_tools(&tools) {
            return self.record(
                "tools",
                "a list of valid tool definitions",
                Finding::fail(violation.to_string()),
            );
        }
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
        self.record(
            "tools",
            "a list of valid tool definitions",
            Finding::pass(if names.is_empty() {
                "no tools".to_owned()
            } else {
                format!("{} tools: {}", names.len(), names.join(", "))
            }),
        );
        for tool in &tools {
            let name = format!("tools: call {}", tool.name);
            let answer = self
                .timed(
                    &name,
                    Operation::CallTool,
                    engine.call_tool(&call, session, &tool.name, "{}"),
                )
                .await;
            let finding = match answer {
                Ok(result) => match check_result(&result) {
                    Ok(()) => Finding::pass(format!(
                        "answered {} bytes: {}",
                        result.len(),
                        untrusted_line(&result, 80)
                    )),
                    Err(problem) => Finding::fail(problem),
                },
                Err(failure) if failure.kind == FailureKind::EngineError => Finding::pass(format!(
                    "refused `{{}}`: {}",
                    untrusted_line(&failure.message, 120)
                )),
                Err(failure) => Finding::fail(failure_text(failure)),
            };
            self.record(&name, TOOL_ANSWER, finding);
        }
        let unknown = self
            .timed(
                "tools: unknown tool",
                Operation::CallTool,
                engine.call_tool(&call, session, "no-such-tool", "{}"),
            )
            .await;
        let finding = match unknown {
            Err(failure) if failure.kind == FailureKind::EngineError => {
                Finding::pass("refused with an engine-error")
            }
            Ok(answer) => Finding::warn(format!(
                "answered a tool it does not offer: {}",
                untrusted_line(&answer, 80)
            )),
            Err(failure) => Finding::fail(failure_text(failure)),
        };
        self.record(
            "tools: unknown tool",
            "an engine-error (the model is told), not a trap",
            finding,
        );
    }

    /// The engine's SQL database after every check (it imports `sql`):
    /// whole (SQLite's integrity check), with what it holds named. Calls
    /// that failed during the checks left nothing in it (their transactions
    /// were rolled back), so what is there is what answered calls wrote.
    pub(super) fn sql(&mut self, engine_id: &str) {
        const EXPECTED: &str = "a whole SQL database (integrity ok), if the engine made one";
        let finding = match database_path(self.scratch.path(), engine_id, None) {
            Ok(path) if !path.exists() => {
                Finding::pass("imports sql; made no database during the checks")
            }
            Ok(path) => match inspect_database(&path) {
                Ok((tables, bytes)) => Finding::pass(format!(
                    "integrity ok; {bytes} bytes; tables: {}",
                    untrusted_line(&tables.join(", "), 200)
                )),
                Err(error) => Finding::fail(format!("the database is not whole: {error}")),
            },
            Err(error) => Finding::fail(error),
        };
        self.record("sql", EXPECTED, finding);
    }

    /// What the engine asked the checker's model for, across every check.
    pub(super) fn completions(&mut self) {
        let totals = self.completions.total();
        let finding = match (totals.completions, totals.refused) {
            (0, 0) => Finding::pass("none asked"),
            (asked, 0) => Finding::pass(format!(
                "{asked} answered ({} tokens in, {} out)",
                totals.input_tokens, totals.output_tokens
            )),
            (asked, refused) => Finding::warn(format!(
                "{asked} answered, {refused} refused by a budget or failed: the engine must cope with `quota-exceeded` and `unavailable` (it did: no check failed on it)"
            )),
        };
        self.record(
            "completions",
            "completions within the host's budgets (completions.*)",
            finding,
        );
    }
}

/// The tables of the database at `path` and its size, once SQLite's
/// integrity check passed.
fn inspect_database(path: &std::path::Path) -> Result<(Vec<String>, u64), String> {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection =
        rusqlite::Connection::open_with_flags(path, flags).map_err(|e| e.to_string())?;
    let integrity: String = connection
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .map_err(|error| error.to_string())?;
    if integrity != "ok" {
        return Err(integrity);
    }
    let tables = connection
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .map_err(|error| error.to_string())?;
    let bytes = std::fs::metadata(path).map_or(0, |meta| meta.len());
    Ok((tables, bytes))
}

//! What an engine's statements may do (`wit/sql.wit`): SQLite's authorizer
//! runs as each statement is compiled and refuses `ATTACH`/`DETACH`,
//! `load_extension`, `VACUUM INTO` (an `ATTACH` underneath), savepoints
//! named like the host's own, and every PRAGMA outside [`PRAGMAS`] (or a
//! read-only one given a value), `writable_schema` among them. Writes to the
//! schema table are SQLite's own refusal then (its DDL writes the table
//! itself, so the authorizer cannot tell them apart); `database` reports
//! that refusal as the host's. The engine's own
//! `BEGIN`/`COMMIT`/`ROLLBACK` are not run as they are: the authorizer notes
//! them ([`Gate::take_transaction`]) for the call's transaction to map onto
//! a savepoint (`transaction`).
//!
//! The host's own statements (its transaction, its pragmas) run with the
//! gate open ([`Gate::host`]).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::ffi;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization, TransactionOperation};

/// PRAGMAs an engine may run, and whether it may set them (`false`: read
/// only).
pub const PRAGMAS: &[(&str, bool)] = &[
    ("user_version", true),
    ("foreign_keys", true),
    ("defer_foreign_keys", true),
    ("recursive_triggers", true),
    ("case_sensitive_like", true),
    ("table_info", true),
    ("table_xinfo", true),
    ("table_list", true),
    ("index_list", true),
    ("index_info", true),
    ("index_xinfo", true),
    ("foreign_key_list", true),
    ("foreign_key_check", true),
    ("integrity_check", true),
    ("quick_check", true),
    ("page_count", false),
    ("page_size", false),
    ("freelist_count", false),
    ("data_version", false),
    ("schema_version", false),
    ("busy_timeout", false),
    ("journal_mode", false),
    ("synchronous", false),
];

/// Names of the host's own savepoints; an engine's may not start so.
pub(super) const HOST_SAVEPOINT_PREFIX: &str = "ctxbox_";

/// An engine's `BEGIN`, `COMMIT`/`END` or `ROLLBACK`, noted at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EngineTransaction {
    Begin,
    Commit,
    Rollback,
}

/// The authorizer's state, shared with the connection it is installed on.
#[derive(Debug, Default)]
pub(super) struct Gate {
    /// The host's own statements run: everything is allowed.
    host: AtomicBool,
    /// The transaction statement last compiled (0: none).
    transaction: AtomicU8,
    /// Why the last statement compiled was refused.
    refusal: Mutex<Option<String>>,
    /// The running statement was stopped for the host's SQLite memory.
    heap_stop: AtomicBool,
}

impl Gate {
    /// Runs `work` (the host's own statements) with the gate open.
    pub(super) fn host<T>(&self, work: impl FnOnce() -> T) -> T {
        self.host.store(true, Ordering::Relaxed);
        let result = work();
        self.host.store(false, Ordering::Relaxed);
        result
    }

    /// The engine transaction statement compiled since the last look.
    pub(super) fn take_transaction(&self) -> Option<EngineTransaction> {
        match self.transaction.swap(0, Ordering::Relaxed) {
            1 => Some(EngineTransaction::Begin),
            2 => Some(EngineTransaction::Commit),
            3 => Some(EngineTransaction::Rollback),
            _ => None,
        }
    }

    /// Notes that the running statement is stopped for the host's memory.
    pub(super) fn note_heap_stop(&self) {
        self.heap_stop.store(true, Ordering::Relaxed);
    }

    /// Whether the last statement stopped was stopped for the host's memory.
    pub(super) fn take_heap_stop(&self) -> bool {
        self.heap_stop.swap(false, Ordering::Relaxed)
    }

    /// Why the host refused the statement last compiled, if it did.
    pub(super) fn take_refusal(&self) -> Option<String> {
        self.refusal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn refuse(&self, why: String) -> Authorization {
        *self.refusal.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
        Authorization::Deny
    }

    /// The authorizer's answer to `context`.
    pub(super) fn authorize(&self, context: &AuthContext<'_>) -> Authorization {
        if self.host.load(Ordering::Relaxed) {
            return Authorization::Allow;
        }
        match &context.action {
            AuthAction::Attach { .. } => self.refuse(
                "ATTACH (and VACUUM INTO) are refused: an engine reaches only its own databases"
                    .into(),
            ),
            AuthAction::Detach { .. } => self.refuse("DETACH is refused".into()),
            // An ATTACH or DETACH whose name is a parameter reaches rusqlite
            // without its argument, as an unknown action.
            AuthAction::Unknown { code, .. }
                if matches!(*code, ffi::SQLITE_ATTACH | ffi::SQLITE_DETACH) =>
            {
                self.refuse(
                    "ATTACH and DETACH are refused: an engine reaches only its own databases"
                        .into(),
                )
            }
            AuthAction::Unknown { code, .. } if *code == ffi::SQLITE_PRAGMA => {
                self.refuse("this PRAGMA is refused".into())
            }
            AuthAction::Function { function_name }
                if function_name.eq_ignore_ascii_case("load_extension") =>
            {
                self.refuse("load_extension is refused: extensions are disabled".into())
            }
            AuthAction::Pragma {
                pragma_name,
                pragma_value,
            } => self.pragma(pragma_name, pragma_value.is_some()),
            AuthAction::Transaction { operation } => {
                // SQLite names them BEGIN, COMMIT (also for END) and
                // ROLLBACK; rusqlite knows COMMIT only as unknown.
                let noted = match operation {
                    TransactionOperation::Begin => 1,
                    TransactionOperation::Rollback => 3,
                    _ => 2,
                };
                self.transaction.store(noted, Ordering::Relaxed);
                Authorization::Allow
            }
            AuthAction::Savepoint { savepoint_name, .. }
                if savepoint_name
                    .to_ascii_lowercase()
                    .starts_with(HOST_SAVEPOINT_PREFIX) =>
            {
                self.refuse(format!(
                    "savepoint names starting `{HOST_SAVEPOINT_PREFIX}` are the host's"
                ))
            }
            _ => Authorization::Allow,
        }
    }

    fn pragma(&self, name: &str, sets: bool) -> Authorization {
        let allowed = PRAGMAS
            .iter()
            .find(|(allowed, _)| allowed.eq_ignore_ascii_case(name));
        match allowed {
            Some((_, true)) => Authorization::Allow,
            Some((_, false)) if !sets => Authorization::Allow,
            Some(_) => self.refuse(format!("PRAGMA {name} may only be read")),
            None => self.refuse(format!(
                "PRAGMA {} is refused (allowed: {})",
                crate::contract::text::untrusted_line(name, 64),
                PRAGMAS
                    .iter()
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// Installs `gate` as `connection`'s authorizer.
pub(super) fn install(
    connection: &mut rusqlite::Connection,
    gate: Arc<Gate>,
) -> rusqlite::Result<()> {
    connection.authorizer(Some(move |context: AuthContext<'_>| {
        gate.authorize(&context)
    }))
}

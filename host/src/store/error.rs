//! How the shared store fails.

/// Why the shared store could not be used. Messages name the server (never
/// the password) and what was being done.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// `[store]` or `--store` is unusable.
    #[error("store configuration: {0}")]
    Config(String),
    /// The URL is not a PostgreSQL connection string.
    #[error("store URL `{url}` is not a PostgreSQL URL: {reason}")]
    BadUrl {
        /// The URL, password masked.
        url: String,
        /// What the parser said.
        reason: String,
    },
    /// No connection could be made.
    #[error("cannot reach PostgreSQL at {server}: {reason}")]
    Unreachable {
        /// Host and port (or socket), database and user.
        server: String,
        /// Why (refused, timed out, authentication failed, …).
        reason: String,
    },
    /// A statement failed.
    #[error("PostgreSQL at {server}: {what}: {reason}")]
    Query {
        /// Host and port, database and user.
        server: String,
        /// What the statement was for.
        what: &'static str,
        /// The server's message.
        reason: String,
    },
    /// The database was migrated by a newer ctxbox.
    #[error(
        "PostgreSQL at {server}: the ctxbox schema is at version {found}, newer than this build's {supported}; upgrade ctxbox"
    )]
    SchemaTooNew {
        /// Host and port, database and user.
        server: String,
        /// The version in the database.
        found: i32,
        /// The newest this build knows.
        supported: i32,
    },
}

/// The full text of a driver error: its own message and its cause's (the
/// driver's `Display` alone says only "db error" or "error connecting").
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!("{} ({})", db.message(), db.code().code());
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

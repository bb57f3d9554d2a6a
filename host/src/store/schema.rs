//! The ctxbox schema in PostgreSQL, created and migrated by ctxbox itself:
//! `ctxbox_schema` records each applied version; migrations run in one
//! transaction under an advisory lock, so hosts starting together migrate
//! once, and a database of a newer version is refused.

use deadpool_postgres::Object;

use super::error::{StoreError, describe};

/// The newest schema version this build knows.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// The size classes documents are indexed in, by bytes of text: each has
/// a trigram index of its own (partial, schema version 7), so that a
/// search reads the texts of one class only while the shorter classes
/// have not given it the matches it needs. Must name the predicates of
/// migration 7's indexes word for word (the planner proves a partial
/// index serves a query from them).
pub const SIZE_CLASSES: [&str; 4] = [
    "octet_length(text) <= 512",
    "octet_length(text) > 512 AND octet_length(text) <= 2048",
    "octet_length(text) > 2048 AND octet_length(text) <= 8192",
    "octet_length(text) > 8192",
];

/// Key of the advisory lock migrations hold ("ctxbox" in ASCII).
const MIGRATION_LOCK: i64 = 0x63_74_78_62_6f_78;

/// Each version's statements; version N is `MIGRATIONS[N - 1]`. Never edit
/// one that has shipped: add the next.
const MIGRATIONS: &[&str] = &[
    // 1: transcripts, engine state, quarantine, turn commits, session leases.
    r#"
    CREATE TABLE ctxbox_transcripts (
        id            BIGSERIAL PRIMARY KEY,
        name          TEXT NOT NULL UNIQUE,
        created_at_ms BIGINT NOT NULL
    );
    CREATE TABLE ctxbox_transcript_lines (
        transcript BIGINT NOT NULL REFERENCES ctxbox_transcripts (id),
        seq        BIGINT NOT NULL,
        line       TEXT NOT NULL,
        PRIMARY KEY (transcript, seq)
    );
    CREATE TABLE ctxbox_state_engines (
        id    TEXT PRIMARY KEY,
        bytes BIGINT NOT NULL DEFAULT 0,
        keys  BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE ctxbox_state_entries (
        engine TEXT NOT NULL REFERENCES ctxbox_state_engines (id),
        key    TEXT COLLATE "C" NOT NULL,
        value  BYTEA NOT NULL,
        PRIMARY KEY (engine, key)
    );
    CREATE TABLE ctxbox_quarantine (
        engine_id      TEXT PRIMARY KEY,
        owner          TEXT NOT NULL,
        fingerprint    TEXT,
        operation      TEXT NOT NULL,
        classification TEXT NOT NULL,
        reason         TEXT NOT NULL,
        stderr_tail    TEXT NOT NULL,
        at_ms          BIGINT NOT NULL,
        failures       BIGINT NOT NULL,
        retry_at_ms    BIGINT
    );
    CREATE TABLE ctxbox_turn_commits (
        advancement_key TEXT PRIMARY KEY,
        seq             BIGSERIAL NOT NULL UNIQUE,
        session_id      TEXT NOT NULL,
        message_count   BIGINT NOT NULL,
        messages_json   TEXT NOT NULL,
        committed_at_ms BIGINT NOT NULL
    );
    CREATE INDEX ctxbox_turn_commits_session ON ctxbox_turn_commits (session_id, seq);
    CREATE TABLE ctxbox_session_leases (
        session_id TEXT PRIMARY KEY,
        holder     TEXT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    );
    "#,
    // 2: engines' searchable memory, counted in their state usage rows;
    // session '' holds the engine's own documents. `pg_trgm` is a trusted
    // extension (PostgreSQL 13 and later): a user who may create objects
    // in the database may create it.
    r#"
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE TABLE ctxbox_index_documents (
        engine   TEXT NOT NULL REFERENCES ctxbox_state_engines (id),
        session  TEXT COLLATE "C" NOT NULL,
        id       TEXT COLLATE "C" NOT NULL,
        text     TEXT NOT NULL,
        metadata TEXT,
        cost     BIGINT NOT NULL,
        PRIMARY KEY (engine, session, id)
    );
    CREATE INDEX ctxbox_index_documents_text
        ON ctxbox_index_documents USING gin (text gin_trgm_ops);
    "#,
    // 3: turn commits keyed by session and advancement key (a key is unique
    // within its session only); existing rows keep their keys and order.
    r#"
    ALTER TABLE ctxbox_turn_commits DROP CONSTRAINT ctxbox_turn_commits_pkey;
    ALTER TABLE ctxbox_turn_commits ADD PRIMARY KEY (session_id, advancement_key);
    "#,
    // 4: fencing tokens: every lease granted takes the next value, and
    // writes for the session carry their lease's.
    r#"
    CREATE SEQUENCE ctxbox_lease_tokens;
    ALTER TABLE ctxbox_session_leases
        ADD COLUMN token BIGINT NOT NULL DEFAULT nextval('ctxbox_lease_tokens');
    "#,
    // 5: the sidecar's session histories, so a session that moves to
    // another host is loaded instead of resent.
    r#"
    CREATE TABLE ctxbox_session_messages (
        session_id TEXT NOT NULL,
        position   BIGINT NOT NULL,
        message    TEXT NOT NULL,
        digest     TEXT,
        PRIMARY KEY (session_id, position)
    );
    "#,
    // 6: the documents' trigram index with a small pending list. At the
    // default 4 MB, writes piled up in a list that VACUUM merges into the
    // index and leaves behind as free pages, so a small engine's documents
    // took 15-22x their text on disk; 64 kB (the least) keeps the batched
    // merge (twice as fast a put as none) at a few pages. What is pending
    // now is merged.
    r#"
    ALTER INDEX ctxbox_index_documents_text SET (gin_pending_list_limit = 64);
    SELECT gin_clean_pending_list('ctxbox_index_documents_text'::regclass);
    "#,
    // 7: the trigram index split by the documents' size, one partial index
    // per class ([`SIZE_CLASSES`], predicates word for word).
    // A search reads a longer class's texts only when the shorter ones
    // held too few matches; with one index every candidate's whole text
    // was read, and a common word's candidates held megabytes. Without a
    // pending list: four lists of 64 kB, merged by VACUUM, left a small
    // engine's documents 1.5x the bytes of one index (BENCHMARKS.md), and
    // writing straight into the index costs puts less than that. The rows
    // are untouched: the indexes are built from them.
    r#"
    DROP INDEX ctxbox_index_documents_text;
    CREATE INDEX ctxbox_index_documents_text_upto512 ON ctxbox_index_documents
        USING gin (text gin_trgm_ops) WITH (fastupdate = off)
        WHERE octet_length(text) <= 512;
    CREATE INDEX ctxbox_index_documents_text_upto2k ON ctxbox_index_documents
        USING gin (text gin_trgm_ops) WITH (fastupdate = off)
        WHERE octet_length(text) > 512 AND octet_length(text) <= 2048;
    CREATE INDEX ctxbox_index_documents_text_upto8k ON ctxbox_index_documents
        USING gin (text gin_trgm_ops) WITH (fastupdate = off)
        WHERE octet_length(text) > 2048 AND octet_length(text) <= 8192;
    CREATE INDEX ctxbox_index_documents_text_over8k ON ctxbox_index_documents
        USING gin (text gin_trgm_ops) WITH (fastupdate = off)
        WHERE octet_length(text) > 8192;
    "#,
];

/// Brings the database to [`SCHEMA_VERSION`].
pub(super) async fn migrate(client: &Object, server: &str) -> Result<(), StoreError> {
    let fail = |what: &'static str| {
        let server = server.to_owned();
        move |error: tokio_postgres::Error| StoreError::Query {
            server,
            what,
            reason: describe(&error),
        }
    };
    client
        .batch_execute("BEGIN")
        .await
        .map_err(fail("begin the migration"))?;
    let result = async {
        client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(fail("lock the schema"))?;
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS ctxbox_schema (
                     version    INTEGER PRIMARY KEY,
                     applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                 )",
            )
            .await
            .map_err(fail("create ctxbox_schema"))?;
        let found: i32 = client
            .query_one("SELECT coalesce(max(version), 0) FROM ctxbox_schema", &[])
            .await
            .map_err(fail("read the schema version"))?
            .get(0);
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                server: server.to_owned(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        for (index, statements) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            let version = index as i32 + 1;
            client
                .batch_execute(statements)
                .await
                .map_err(fail("migrate the schema"))?;
            client
                .execute(
                    "INSERT INTO ctxbox_schema (version) VALUES ($1)",
                    &[&version],
                )
                .await
                .map_err(fail("record the schema version"))?;
        }
        Ok(())
    }
    .await;
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = client
        .batch_execute(end)
        .await
        .map_err(fail("end the migration"));
    result.and(ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_class_indexes_name_the_searches_predicates() {
        let migration = MIGRATIONS[6];
        for class in SIZE_CLASSES {
            assert!(migration.contains(&format!("WHERE {class};")), "{class}");
        }
        assert_eq!(
            migration.matches("CREATE INDEX").count(),
            SIZE_CLASSES.len()
        );
    }
}

//! Engines' searchable memory in the shared PostgreSQL database:
//! `ctxbox_index_documents` with `pg_trgm` GIN indexes (`gin_trgm_ops`) on
//! the text, one per size class of documents ([`SIZE_CLASSES`]). Writes run inside `PostgresState`'s transaction, after it has
//! locked the engine's usage row, so documents and state entries share one
//! quota across hosts; a call's index writes take three statements however
//! many documents they name.
//!
//! A search matches every word as a case-insensitive literal (`~*`; the
//! trigram index narrows the rows for words of 3 or more characters) and
//! ranks a bounded set of the matches, the shortest, by term density
//! ([`search`]). The indexes have no pending list (schema version 7), so
//! that merging one does not leave free pages in them between vacuums. Case folding and which
//! characters the trigram index sees follow the database's `LC_CTYPE`: with
//! a UTF-8 locale (`C.UTF-8`, `en_US.UTF-8`, …) every script folds and is
//! indexed; under `C` only ASCII letters fold and non-ASCII text (CJK
//! included) is found by scanning the engine's documents rather than
//! through the index.

use std::collections::HashMap;

use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::types::ToSql;

use super::index::{self, Found, Words, scope_key};
use super::state::{Footprint, StateUsage};
use crate::contract::index::{IndexOp, IndexPage, IndexQuery, SNIPPET_CHARS};
use crate::store::SIZE_CLASSES;

/// Characters kept before a hit's first match, so that the snippet cut
/// from the passage is the one the whole text gives (one more than the
/// snippet keeps, so it still shows where it was cut).
const PASSAGE_BEFORE: usize = SNIPPET_CHARS / 3 + 1;
/// Characters of the passage, beyond the longest word.
const PASSAGE_CHARS: usize = SNIPPET_CHARS + 2;
/// Matches ranked together: a search takes its matches shortest first in
/// groups of this many and ranks each group by [`score`], so that a page
/// scores a bounded number of texts however many contain the words.
const CANDIDATE_GROUP: i64 = 100;
/// The first of [`SIZE_CLASSES`] searched only on demand (texts over
/// 2 KB): it and each longer class is searched only when the shorter
/// classes hold fewer matches than the page needs, and its matches rank
/// after theirs. Reading long texts that the trigram index names but that
/// do not hold the words (it ignores punctuation and order) was most of a
/// search's time, and a match of a long text seldom outranks a short one.
const GATED_FROM: usize = 2;
/// Characters of a candidate's text its score counts occurrences in: a
/// text longer than this scores low for its length anyway.
const SCORED_CHARS: usize = 4_000;

/// Applies `ops` for `engine` within `transaction` (which holds the
/// engine's usage row); answers the engine's usage after them, given
/// `usage` before.
pub(super) async fn apply(
    transaction: &Transaction<'_>,
    engine: &str,
    ops: &[IndexOp],
    usage: StateUsage,
) -> Result<StateUsage, tokio_postgres::Error> {
    if ops.is_empty() {
        return Ok(usage);
    }
    let (sessions, ids): (Vec<&str>, Vec<&str>) = ops
        .iter()
        .map(|op| match op {
            IndexOp::Put {
                session_id,
                document,
            } => (scope_key(session_id.as_deref()), document.id.as_str()),
            IndexOp::Delete { session_id, id } => (scope_key(session_id.as_deref()), id.as_str()),
        })
        .unzip();
    let stored: HashMap<(String, String), u64> = transaction
        .query(
            "SELECT d.session, d.id, d.cost FROM ctxbox_index_documents d
             JOIN unnest($2::text[], $3::text[]) AS named (session, id)
               ON d.session = named.session AND d.id = named.id
             WHERE d.engine = $1",
            &[&engine, &sessions, &ids],
        )
        .await?
        .iter()
        .map(|row| ((row.get(0), row.get(1)), row.get::<_, i64>(2).max(0) as u64))
        .collect();
    let net = index::net_writes(ops, usage, |scope, id| {
        Ok::<_, std::convert::Infallible>(stored.get(&(scope.to_owned(), id.to_owned())).copied())
    })
    .unwrap_or_else(|never| match never {});
    if !net.deletes.is_empty() {
        let (sessions, ids): (Vec<&str>, Vec<&str>) = net.deletes.iter().copied().unzip();
        transaction
            .execute(
                "DELETE FROM ctxbox_index_documents d
                 USING unnest($2::text[], $3::text[]) AS gone (session, id)
                 WHERE d.engine = $1 AND d.session = gone.session AND d.id = gone.id",
                &[&engine, &sessions, &ids],
            )
            .await?;
    }
    if !net.puts.is_empty() {
        let sessions: Vec<&str> = net.puts.iter().map(|(scope, ..)| *scope).collect();
        let ids: Vec<&str> = net
            .puts
            .iter()
            .map(|(_, document, _)| document.id.as_str())
            .collect();
        let texts: Vec<&str> = net
            .puts
            .iter()
            .map(|(_, document, _)| document.text.as_str())
            .collect();
        let metadata: Vec<Option<&str>> = net
            .puts
            .iter()
            .map(|(_, document, _)| document.metadata.as_deref())
            .collect();
        let costs: Vec<i64> = net
            .puts
            .iter()
            .map(|(.., cost)| i64::try_from(*cost).unwrap_or(i64::MAX))
            .collect();
        transaction
            .execute(
                "INSERT INTO ctxbox_index_documents (engine, session, id, text, metadata, cost)
                 SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int8[])
                 ON CONFLICT (engine, session, id) DO UPDATE SET
                     text = excluded.text, metadata = excluded.metadata, cost = excluded.cost",
                &[&engine, &sessions, &ids, &texts, &metadata, &costs],
            )
            .await?;
    }
    Ok(net.usage)
}

/// What `engine` stores now, and what its document `id` in `session`'s
/// scope counts for.
pub(super) async fn footprint(
    client: &tokio_postgres::Client,
    engine: &str,
    session: Option<&str>,
    id: &str,
) -> Result<Footprint, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "SELECT bytes, keys,
                    (SELECT cost FROM ctxbox_index_documents
                     WHERE engine = $1 AND session = $2 AND id = $3)
             FROM ctxbox_state_engines WHERE id = $1",
            &[&engine, &scope_key(session), &id],
        )
        .await?;
    Ok(row.map_or_else(Footprint::default, |row| Footprint {
        usage: StateUsage {
            bytes: row.get::<_, i64>(0).max(0) as u64,
            keys: row.get::<_, i64>(1).max(0) as u64,
        },
        entry: row.get::<_, Option<i64>>(2).map(|cost| cost.max(0) as u64),
    }))
}

/// One page of `engine`'s documents matching `words`, in `session`'s scope
/// or all of them, best first; each hit carries the passage of its text
/// around the first match that its snippet is cut from. `client` is a
/// connection or a transaction.
///
/// The work is bounded by the page asked for, not by how common the words
/// are: every word is matched as cheaply as its case allows ([`Matcher`];
/// the trigram index serves words of 3 or more characters), and the
/// matches are taken shortest first (their length is read from the row,
/// not the text), at most [`candidates`] of them from each level of
/// [`SIZE_CLASSES`]: the texts up to 2 KB are one level, and each longer
/// class ([`GATED_FROM`]) a level of its own, searched only when the
/// shorter levels hold fewer matches than the page needs, so that a long
/// text is read only when the short ones cannot fill the page. Each level's
/// matches are ranked in groups of [`CANDIDATE_GROUP`] by [`score`], the
/// groups one after the other, level by level: a hit's score is lowered
/// by its group's number times the words' count, so that scores fall down
/// the pages. A page deeper in the results scores more groups; pages never
/// overlap or skip a hit (a level searched for a deeper page ranks after
/// every group a shallower page saw). (`OFFSET 0` keeps the planner from
/// inlining each use of a candidate's head, which would read its text back
/// once per use.) The statement is prepared once per connection for each
/// shape of query.
pub(super) async fn search(
    client: &impl GenericClient,
    engine: &str,
    session: Option<&str>,
    words: &Words,
    query: &IndexQuery,
) -> Result<IndexPage, tokio_postgres::Error> {
    let rows = i64::from(query.limit) + 1;
    let offset = i64::from(query.offset);
    let candidates = candidates(offset, rows);
    let needed = offset.saturating_add(rows);
    let matchers: Vec<Matcher> = words.all.iter().map(|word| Matcher::of(word)).collect();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&engine, &rows, &offset, &candidates, &needed];
    let mut filters = String::new();
    if let Some(session) = &session {
        params.push(session);
        filters.push_str(&format!(" AND session = ${}", params.len()));
    }
    let mut bound = Vec::new();
    for matcher in &matchers {
        params.push(&matcher.pattern);
        let pattern = format!("${}", params.len());
        filters.push_str(&format!(" AND {}", matcher.filter(&pattern)));
        bound.push(pattern);
    }
    let mut word_params = Vec::new();
    let mut firsts = Vec::new();
    for ((word, matcher), pattern) in words.all.iter().zip(&matchers).zip(&bound) {
        params.push(word);
        let word = format!("${}", params.len());
        firsts.push(format!("nullif({}, 0)", matcher.first(pattern, &word)));
        word_params.push(word);
    }
    let longest = words
        .all
        .iter()
        .map(|word| word.chars().count())
        .max()
        .unwrap_or(0);
    let first = firsts.join(", ");
    let class = |class: usize, size: &str, gate: &str| {
        format!(
            "(SELECT {class} AS class, session, id, metadata, text, octet_length(text) AS bytes
              FROM ctxbox_index_documents
              WHERE engine = $1 AND {size}{filters}{gate}
              ORDER BY bytes, session, id LIMIT $4)"
        )
    };
    let (together, gated) = SIZE_CLASSES.split_at(GATED_FROM);
    let mut levels = vec![format!(
        "level0 AS MATERIALIZED (SELECT * FROM ({} LIMIT $4) AS matches)",
        together
            .iter()
            .enumerate()
            .map(|(number, size)| class(number, size, ""))
            .collect::<Vec<_>>()
            .join(" UNION ALL ")
    )];
    for (number, size) in gated.iter().enumerate() {
        let shorter = (0..levels.len())
            .map(|level| format!("(SELECT count(*) FROM level{level})"))
            .collect::<Vec<_>>()
            .join(" + ");
        let gate = format!(" AND {shorter} < $5");
        levels.push(format!(
            "level{} AS MATERIALIZED {}",
            levels.len(),
            class(GATED_FROM + number, size, &gate)
        ));
    }
    let matches = (0..levels.len())
        .map(|level| format!("SELECT {level} AS level, * FROM level{level}"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let sql = format!(
        "WITH {levels}
         SELECT session, id, metadata, score,
                substr(text, greatest(coalesce(least({first}), 1) - {PASSAGE_BEFORE}, 1),
                       {passage})
         FROM (SELECT session, id, metadata, text,
                      {score} - (dense_rank() OVER (ORDER BY level, slot) - 1)
                          * {groups_apart} AS score
               FROM (SELECT session, id, metadata, text, bytes, level,
                            (row_number() OVER (PARTITION BY level
                                                ORDER BY class, bytes, session, id) - 1)
                                / {CANDIDATE_GROUP} AS slot,
                            lower(substr(text, 1, {SCORED_CHARS})) AS head
                     FROM ({matches}) AS matches
                     OFFSET 0) AS candidates
               ORDER BY score DESC, session, id LIMIT $2 OFFSET $3) AS hits
         ORDER BY score DESC, session, id",
        levels = levels.join(", "),
        passage = PASSAGE_CHARS + longest,
        score = score(&word_params),
        // Each word's density is below 1: a group's scores are all above
        // the next one's.
        groups_apart = words.all.len(),
    );
    let statement = client.prepare_cached(&sql).await?;
    let found = client
        .query(&statement, &params)
        .await?
        .into_iter()
        .map(|row| Found {
            scope: row.get(0),
            id: row.get(1),
            metadata: row.get(2),
            score: row.get(3),
            text: row.get(4),
        })
        .collect();
    Ok(index::page(found, words, query.limit))
}

/// Matches taken (shortest first) from each level for a page of `rows`
/// hits from `offset`: every group of [`CANDIDATE_GROUP`] the page reaches.
fn candidates(offset: i64, rows: i64) -> i64 {
    let last = offset.saturating_add(rows).saturating_sub(1).max(0);
    (last / CANDIDATE_GROUP + 1).saturating_mul(CANDIDATE_GROUP)
}

/// How one word is matched.
struct Matcher {
    /// Bound as a parameter: a `LIKE` pattern or the word itself, or a
    /// regular expression.
    pattern: String,
    /// Whether the word has letters of two cases.
    cased: bool,
    /// Whether the word is long enough for the trigram index
    /// ([`index::MIN_INDEXED_WORD_CHARS`]).
    indexed: bool,
}

impl Matcher {
    /// A word without case (CJK, digits, punctuation) is an escaped `LIKE`,
    /// which compares bytes; one with case a case-insensitive literal
    /// regular expression (`***=` makes the rest literal), which folds
    /// case as it goes where `ILIKE` would lowercase a copy of each text.
    /// A word too short for the trigram index is matched by a function
    /// the index does not serve (`strpos`, `regexp_like`): the index
    /// would have to hand over every document of a size class, where
    /// reading the class's rows in order stops at the matches it needs.
    fn of(word: &str) -> Self {
        let cased = word.to_uppercase() != word || word.to_lowercase() != word;
        let indexed = word.chars().count() >= index::MIN_INDEXED_WORD_CHARS;
        let pattern = if cased {
            format!("***={word}")
        } else if indexed {
            index::like_pattern(word)
        } else {
            word.to_owned()
        };
        Self {
            pattern,
            cased,
            indexed,
        }
    }

    /// SQL matching `text` against the pattern bound at `pattern`.
    fn filter(&self, pattern: &str) -> String {
        match (self.cased, self.indexed) {
            (true, true) => format!("text ~* {pattern}"),
            (false, true) => format!("text LIKE {pattern} ESCAPE '\\'"),
            (true, false) => format!("regexp_like(text, {pattern}, 'i')"),
            (false, false) => format!("strpos(text, {pattern}) > 0"),
        }
    }

    /// SQL for where in `text` the first match of the word bound at `word`
    /// (its pattern at `pattern`) starts, in characters from 1; 0 for none.
    fn first(&self, pattern: &str, word: &str) -> String {
        if self.cased {
            format!("regexp_instr(text, {pattern}, 1, 1, 0, 'i')")
        } else {
            format!("strpos(text, {word})")
        }
    }
}

/// How well a candidate matches the words bound at `words`: how densely
/// it holds each ([`index::density_sql`], the term-frequency part of the
/// embedded store's `bm25`), summed. Occurrences are counted in its
/// `head`, the first [`SCORED_CHARS`] characters lowercased once for
/// every word; its length is the head's characters and the bytes after
/// it, so that no text is read past the head.
fn score(words: &[String]) -> String {
    words
        .iter()
        .map(|word| {
            index::density_sql(
                "head",
                "head",
                "char_length(head) + greatest(bytes - octet_length(head), 0)",
                word,
                "char_length",
            )
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::index::snippet;

    /// The passage the search cuts: `PASSAGE_BEFORE` characters before the
    /// first match (1-based `first`, 0 for none), as the SQL computes it.
    fn passage(text: &str, first: usize, longest: usize) -> String {
        let start = (first.max(1) as i64 - PASSAGE_BEFORE as i64).max(1) as usize;
        text.chars()
            .skip(start - 1)
            .take(PASSAGE_CHARS + longest)
            .collect()
    }

    #[test]
    fn a_page_takes_every_group_of_matches_it_reaches() {
        assert_eq!(candidates(0, 11), CANDIDATE_GROUP);
        assert_eq!(candidates(89, 11), CANDIDATE_GROUP);
        assert_eq!(candidates(90, 11), 2 * CANDIDATE_GROUP);
        assert_eq!(candidates(0, 101), 2 * CANDIDATE_GROUP);
        assert_eq!(candidates(i64::MAX, 101), i64::MAX);
    }

    #[test]
    fn words_without_case_match_bytes_the_others_fold_and_short_ones_skip_the_index() {
        for (word, cased, pattern, filter) in [
            ("缓存层", false, "%缓存层%", "text LIKE $1 ESCAPE '\\'"),
            ("1_%", false, r"%1\_\%%", "text LIKE $1 ESCAPE '\\'"),
            ("cache", true, "***=cache", "text ~* $1"),
            ("кэш", true, "***=кэш", "text ~* $1"),
            ("a.*(", true, "***=a.*(", "text ~* $1"),
            ("缓存", false, "缓存", "strpos(text, $1) > 0"),
            ("_%", false, "_%", "strpos(text, $1) > 0"),
            ("ab", true, "***=ab", "regexp_like(text, $1, 'i')"),
        ] {
            let matcher = Matcher::of(word);
            assert_eq!(
                (
                    matcher.cased,
                    matcher.pattern.as_str(),
                    matcher.filter("$1").as_str()
                ),
                (cased, pattern, filter),
                "{word}"
            );
        }
    }

    #[test]
    fn the_passage_gives_the_snippet_of_the_whole_text() {
        let words = vec!["needle".to_owned(), "缓存".to_owned()];
        for before in [0, 5, 99, 100, 101, 102, 150, 1_000] {
            for after in [0, 3, 197, 198, 199, 200, 201, 500] {
                let text = format!(
                    "{}Needle x 缓存{}needl",
                    "a".repeat(before),
                    "b".repeat(after)
                );
                let first = before + 1;
                assert_eq!(
                    snippet(&passage(&text, first, 6), &words),
                    snippet(&text, &words),
                    "{before} before, {after} after"
                );
            }
        }
        let none = "z".repeat(1_000);
        assert_eq!(
            snippet(&passage(&none, 0, 6), &words),
            snippet(&none, &words)
        );
    }
}

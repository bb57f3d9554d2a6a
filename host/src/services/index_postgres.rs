//! Engines' searchable memory in the shared PostgreSQL database:
//! `ctxbox_index_documents` with `pg_trgm` GIN indexes (`gin_trgm_ops`) on
//! the text, one per size class of documents ([`SIZE_CLASSES`]). Writes run inside `PostgresState`'s transaction, after it has
//! locked the engine's usage row, so documents and state entries share one
//! quota across hosts; a call's index writes take three statements however
//! many documents they name.
//!
//! A search matches every word as a case-insensitive literal (`~*`; the
//! trigram index narrows the rows for words of 3 or more characters), and
//! the host ranks a bounded set of the matches, the shortest, by term
//! density ([`search`]). The indexes have no pending list (schema version 7), so
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
/// that its snippet is cut from. `client` is a connection or a
/// transaction.
///
/// The work is bounded by the page asked for, not by how common the words
/// are. The database finds the candidates ([`candidates_sql`]): every word
/// is matched as cheaply as its case allows ([`Matcher`]; the trigram index
/// serves words of 3 or more characters), and the matches are taken
/// shortest first (their length is read from the row, not the text), at
/// most [`candidates`] of them from each level of [`SIZE_CLASSES`]: the
/// texts up to 2 KB are one level, and each longer class ([`GATED_FROM`])
/// a level of its own, searched only when the shorter levels hold fewer
/// matches than the page shows, so that a long text is read only when the
/// short ones cannot fill the page. (When they fill it exactly, one match
/// of a skipped level is looked for, to tell whether another page
/// follows.) The host ranks them ([`rank`]) from the head of each text,
/// and cuts the page; a hit's passage is read back from the database only
/// when its head does not hold it ([`passages`]). The statements are prepared once per connection for
/// each shape of query.
pub(super) async fn search(
    client: &impl GenericClient,
    engine: &str,
    session: Option<&str>,
    words: &Words,
    query: &IndexQuery,
) -> Result<IndexPage, tokio_postgres::Error> {
    let limit = i64::from(query.limit);
    let offset = i64::from(query.offset);
    let rows = limit + 1;
    let candidates = candidates(offset, rows);
    let shown = offset.saturating_add(limit);
    let matchers: Vec<Matcher> = words.all.iter().map(|word| Matcher::of(word)).collect();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&engine, &candidates, &shown];
    if let Some(session) = &session {
        params.push(session);
    }
    for matcher in &matchers {
        params.push(&matcher.pattern);
    }
    let statement = client
        .prepare_cached(&candidates_sql(session.is_some(), &matchers))
        .await?;
    let found: Vec<Candidate> = client
        .query(&statement, &params)
        .await?
        .into_iter()
        .map(|row| {
            let head: String = row.get(6);
            Candidate {
                level: row.get(0),
                class: row.get(1),
                bytes: row.get(2),
                session: row.get(3),
                id: row.get(4),
                metadata: row.get(5),
                lower: head.to_lowercase(),
                head,
            }
        })
        .collect();
    let page: Vec<(Candidate, f64)> = rank(found, &words.all)
        .into_iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(usize::try_from(rows).unwrap_or(usize::MAX))
        .collect();
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let found = passages(client, engine, words, &matchers, page, limit).await?;
    Ok(index::page(found, words, query.limit))
}

/// One match the database found: where it ranks before scoring, and the
/// first [`SCORED_CHARS`] characters of its text.
struct Candidate {
    /// Its level: 0 for the texts up to 2 KB, then one per gated class,
    /// then the probe of the levels a full page skipped.
    level: i32,
    /// Its size class, an index into [`SIZE_CLASSES`].
    class: i32,
    /// Its text's length in bytes.
    bytes: i32,
    session: String,
    id: String,
    metadata: Option<String>,
    /// Its text's first [`SCORED_CHARS`] characters.
    head: String,
    /// The head lowercased, as the words are ([`IndexQuery::words`]).
    lower: String,
}

/// The statement finding a page's candidates: `$1` the engine, `$2` the
/// matches each level takes, `$3` the hits the page shows counted from the
/// first, `$4` the session when `scoped`, then the patterns of `matchers`.
/// Each level is a materialized CTE, so that the gates count it once; a
/// candidate's head is cut only from the rows the levels keep.
fn candidates_sql(scoped: bool, matchers: &[Matcher]) -> String {
    let mut filters = String::new();
    let mut next = 4;
    if scoped {
        filters.push_str(" AND session = $4");
        next += 1;
    }
    for (number, matcher) in matchers.iter().enumerate() {
        filters.push_str(&format!(
            " AND {}",
            matcher.filter(&format!("${}", next + number))
        ));
    }
    // The matches of a size class, `then` ordering or limiting them.
    let class = |class: usize, size: &str, gate: &str, then: &str| {
        format!(
            "(SELECT {class} AS class, session, id, metadata, text, octet_length(text) AS bytes
              FROM ctxbox_index_documents
              WHERE engine = $1 AND {size}{filters}{gate}
              {then})"
        )
    };
    let shortest = "ORDER BY bytes, session, id LIMIT $2";
    let count = |level: usize| format!("(SELECT count(*) FROM level{level})");
    let (together, gated) = SIZE_CLASSES.split_at(GATED_FROM);
    let mut levels = vec![format!(
        "level0 AS MATERIALIZED (SELECT * FROM ({} LIMIT $2) AS matches)",
        together
            .iter()
            .enumerate()
            .map(|(number, size)| class(number, size, "", shortest))
            .collect::<Vec<_>>()
            .join(" UNION ALL ")
    )];
    for (number, size) in gated.iter().enumerate() {
        let shorter = (0..levels.len()).map(count).collect::<Vec<_>>().join(" + ");
        levels.push(format!(
            "level{} AS MATERIALIZED {}",
            levels.len(),
            class(
                GATED_FROM + number,
                size,
                &format!(" AND {shorter} < $3"),
                shortest
            )
        ));
    }
    // A gated level was skipped when the levels before it fill the page;
    // any one match of it (the first skipped level that has one, unsorted:
    // the scan stops at it) tells whether another page follows, when the
    // levels searched hold exactly the page.
    let all = (0..levels.len()).map(count).collect::<Vec<_>>().join(" + ");
    let probes = gated
        .iter()
        .enumerate()
        .map(|(number, size)| {
            let shorter = (0..=number).map(count).collect::<Vec<_>>().join(" + ");
            class(
                GATED_FROM + number,
                size,
                &format!(" AND {shorter} >= $3 AND {all} = $3"),
                "LIMIT 1",
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let probe = levels.len();
    let matches = (0..levels.len())
        .map(|level| format!("SELECT {level} AS level, * FROM level{level}"))
        .chain([format!(
            "SELECT {probe} AS level, * FROM (SELECT * FROM ({probes}) AS skipped LIMIT 1) AS probe"
        )])
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    format!(
        "WITH {levels}
         SELECT level, class, bytes, session, id, metadata, substr(text, 1, {SCORED_CHARS})
         FROM ({matches}) AS matches",
        levels = levels.join(", "),
    )
}

/// `found` ranked, best first: in groups of [`CANDIDATE_GROUP`], shortest
/// first within each level and level by level, each group's matches by
/// how densely their heads hold the words ([`index::density`], summed),
/// and a hit's score lowered by its group's number times the words'
/// count, so that scores fall down the pages; ties by session and id.
/// A page deeper in the results scores more groups; pages never overlap
/// or skip a hit (a level searched for a deeper page ranks after every
/// group a shallower page saw).
fn rank(mut found: Vec<Candidate>, words: &[String]) -> Vec<(Candidate, f64)> {
    found.sort_by(|a, b| {
        (a.level, a.class, a.bytes, &a.session, &a.id)
            .cmp(&(b.level, b.class, b.bytes, &b.session, &b.id))
    });
    let mut group = 0_usize;
    let mut last: Option<(i32, usize)> = None;
    let mut in_level = 0_usize;
    let mut ranked: Vec<(Candidate, f64)> = found
        .into_iter()
        .map(|candidate| {
            if last.is_some_and(|(level, _)| level != candidate.level) {
                in_level = 0;
            }
            let slot = (candidate.level, in_level / CANDIDATE_GROUP as usize);
            if last.is_some_and(|last| last != slot) {
                group += 1;
            }
            last = Some(slot);
            in_level += 1;
            let score = density(&candidate, words) - (group * words.len()) as f64;
            (candidate, score)
        })
        .collect();
    ranked.sort_by(|(a, a_score), (b, b_score)| {
        b_score
            .total_cmp(a_score)
            .then_with(|| (&a.session, &a.id).cmp(&(&b.session, &b.id)))
    });
    ranked
}

/// How densely `candidate`'s head holds `words`, summed: occurrences are
/// counted in the head lowercased, its length is the head's characters
/// and the bytes after it, so that no text is read past the head. Each
/// word's density is below 1: a group's scores are all above the next
/// one's.
fn density(candidate: &Candidate, words: &[String]) -> f64 {
    let after = usize::try_from(candidate.bytes)
        .unwrap_or(0)
        .saturating_sub(candidate.head.len());
    let chars = candidate.head.chars().count() + after;
    words
        .iter()
        .map(|word| index::density(candidate.lower.matches(word.as_str()).count(), chars))
        .sum()
}

/// The page's hits as found, each with the passage of its text around its
/// first match, cut from its head ([`passage_in_head`]) or, when the head
/// cannot give it, read back in one statement; only the first `limit` are
/// shown (the row after them only tells that another page follows).
async fn passages(
    client: &impl GenericClient,
    engine: &str,
    words: &Words,
    matchers: &[Matcher],
    page: Vec<(Candidate, f64)>,
    limit: usize,
) -> Result<Vec<Found>, tokio_postgres::Error> {
    let longest = words
        .all
        .iter()
        .map(|word| word.chars().count())
        .max()
        .unwrap_or(0);
    let cut: Vec<Option<String>> = page
        .iter()
        .map(|(candidate, _)| passage_in_head(candidate, &words.all, longest))
        .collect();
    let (sessions, ids): (Vec<&str>, Vec<&str>) = page
        .iter()
        .zip(&cut)
        .take(limit)
        .filter(|(_, cut)| cut.is_none())
        .map(|((candidate, _), _)| (candidate.session.as_str(), candidate.id.as_str()))
        .unzip();
    let mut read: HashMap<(String, String), String> = HashMap::new();
    if !sessions.is_empty() {
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&engine, &sessions, &ids];
        let mut firsts = Vec::new();
        for (word, matcher) in words.all.iter().zip(matchers) {
            params.push(matcher.first_bound(word));
            firsts.push(format!(
                "nullif({}, 0)",
                matcher.first(&format!("${}", params.len()))
            ));
        }
        let sql = format!(
            "SELECT d.session, d.id,
                    substr(text, greatest(coalesce(least({first}), 1) - {PASSAGE_BEFORE}, 1),
                           {passage})
             FROM ctxbox_index_documents d
             JOIN unnest($2::text[], $3::text[]) AS hit (session, id)
               ON d.session = hit.session AND d.id = hit.id
             WHERE d.engine = $1",
            first = firsts.join(", "),
            passage = PASSAGE_CHARS + longest,
        );
        let statement = client.prepare_cached(&sql).await?;
        for row in client.query(&statement, &params).await? {
            read.insert((row.get(0), row.get(1)), row.get(2));
        }
    }
    Ok(page
        .into_iter()
        .zip(cut)
        .map(|((candidate, score), cut)| {
            let text = cut
                .or_else(|| read.remove(&(candidate.session.clone(), candidate.id.clone())))
                .unwrap_or(candidate.head);
            Found {
                scope: candidate.session,
                id: candidate.id,
                metadata: candidate.metadata,
                score,
                text,
            }
        })
        .collect())
}

/// The passage of `candidate`'s text that its snippet for `words` (the
/// longest `longest` characters) is cut from, [`PASSAGE_BEFORE`]
/// characters before its first match and [`PASSAGE_CHARS`] after, as the
/// database cuts it, when the head holds it: the head is the whole text,
/// or holds the first match and the passage's end. `None` when it does
/// not, or when lowercasing changed the head's length in characters (the
/// first match's place is then the database's to find).
fn passage_in_head(candidate: &Candidate, words: &[String], longest: usize) -> Option<String> {
    let whole = usize::try_from(candidate.bytes).is_ok_and(|bytes| bytes <= candidate.head.len());
    let chars = candidate.head.chars().count();
    if candidate.lower.chars().count() != chars {
        return None;
    }
    let first = words
        .iter()
        .filter_map(|word| candidate.lower.find(word.as_str()))
        .min()
        .map(|at| candidate.lower[..at].chars().count());
    let start = first.map_or(0, |first| first.saturating_sub(PASSAGE_BEFORE));
    let length = PASSAGE_CHARS + longest;
    let held = first.is_some() && start + length <= chars;
    (whole || held).then(|| candidate.head.chars().skip(start).take(length).collect())
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

    /// What [`first`](Self::first) is given bound: the pattern for a word
    /// with case, else `word` itself.
    fn first_bound<'a>(&'a self, word: &'a String) -> &'a String {
        if self.cased { &self.pattern } else { word }
    }

    /// SQL for where in `text` the first match of the word starts, in
    /// characters from 1, 0 for none, given what [`first_bound`](Self::first_bound)
    /// names bound at `bound`.
    fn first(&self, bound: &str) -> String {
        if self.cased {
            format!("regexp_instr(text, {bound}, 1, 1, 0, 'i')")
        } else {
            format!("strpos(text, {bound})")
        }
    }
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

    fn candidate(level: i32, bytes: i32, id: &str, head: &str) -> Candidate {
        Candidate {
            level,
            class: 0,
            bytes,
            session: "s".to_owned(),
            id: id.to_owned(),
            metadata: None,
            head: head.to_owned(),
            lower: head.to_lowercase(),
        }
    }

    #[test]
    fn matches_rank_by_density_within_their_group_and_groups_in_order() {
        let words = vec!["needle".to_owned()];
        let mut found = vec![
            // A level searched later ranks after the first, however dense.
            candidate(1, 6, "later", "Needle"),
            candidate(0, 30, "sparse", "one needle among many other words"),
            candidate(0, 13, "dense", "needle NEEDLE"),
            candidate(0, 13, "dense-twin", "needle NEEDLE"),
        ];
        // Past the first group of a level, its matches rank after the group.
        for n in 0..CANDIDATE_GROUP {
            let id = format!("g{n:03}");
            found.push(candidate(
                0,
                40 + n as i32,
                &id,
                "a needle, at some length here",
            ));
        }
        let ranked = rank(found, &words);
        let order: Vec<&str> = ranked.iter().map(|(hit, _)| hit.id.as_str()).collect();
        assert_eq!(order[..2], ["dense", "dense-twin"], "ties by id");
        assert!(
            ranked.windows(2).all(|pair| pair[0].1 >= pair[1].1),
            "scores fall"
        );
        let at = |id: &str| order.iter().position(|&found| found == id).unwrap();
        assert!(
            at("sparse") < at("g096"),
            "the first group holds the shortest hundred"
        );
        assert!(at("g097") > at("g000"), "{order:?}");
        assert_eq!(order.last(), Some(&"later"));
        let (dense, score) = &ranked[0];
        let expected = index::density(2, dense.head.chars().count());
        assert!(
            (score - expected).abs() < 1e-12,
            "{score} against {expected}"
        );
    }

    #[test]
    fn the_head_gives_the_passage_the_database_would_cut_when_it_holds_it() {
        let words = vec!["needle".to_owned(), "缓存".to_owned()];
        for before in [0, 5, 100, 101, 102, 1_000, 3_600] {
            let text = format!("{}Needle x 缓存{}", "a".repeat(before), "b".repeat(200));
            let whole = candidate(0, text.len() as i32, "whole", &text);
            let cut = passage_in_head(&whole, &words, 6);
            assert_eq!(cut, Some(passage(&text, before + 1, 6)), "{before} before");
            assert_eq!(
                snippet(&cut.unwrap(), &words),
                snippet(&text, &words),
                "{before} before"
            );
            // The same head of a longer text: the passage must end inside it.
            let longer = candidate(3, text.len() as i32 + 10_000, "longer", &text);
            let fits =
                before.saturating_sub(PASSAGE_BEFORE) + PASSAGE_CHARS + 6 <= text.chars().count();
            assert_eq!(
                passage_in_head(&longer, &words, 6).is_some(),
                fits,
                "{before} before"
            );
        }
        let none = candidate(3, 20_000, "none", &"z".repeat(4_000));
        assert_eq!(
            passage_in_head(&none, &words, 6),
            None,
            "no match in the head"
        );
        let short = candidate(0, 3, "short", "zzz");
        assert_eq!(passage_in_head(&short, &words, 6).as_deref(), Some("zzz"));
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

//! The engines' searchable memory, on both backends through
//! `EngineState`: documents put, replaced and deleted; scopes and the
//! privacy of engines and sessions; substring matching of CJK, mixed and
//! short words and of hostile query text, checked against a plain
//! reference matcher; paging; snippets; one quota and key limit for
//! documents and state entries, with a refused batch leaving nothing; and
//! recall on the real fixtures.

use std::collections::{BTreeSet, HashMap};

use ctxbox_host::contract::guest_view::guest_message;
use ctxbox_host::contract::index::{
    IndexDocument, IndexOp, IndexPage, IndexQuery, IndexScope, snippet,
};
use ctxbox_host::services::PostgresState;
use ctxbox_host::services::index::document_cost;
use ctxbox_host::services::state::{CallWrites, EngineState, StateConfig, StateError};
use ctxbox_host::transcript::TranscriptStore;
use ctxbox_tests::{FIXTURE_SESSIONS, fixture};

use super::{Backend, backends};
use crate::pg_cluster;

fn config() -> StateConfig {
    StateConfig {
        quota_bytes: 1 << 20,
        max_keys: 1_000,
    }
}

fn document(id: &str, text: &str) -> IndexDocument {
    IndexDocument {
        id: id.to_owned(),
        text: text.to_owned(),
        metadata: None,
    }
}

fn put(session: Option<&str>, document: IndexDocument) -> IndexOp {
    IndexOp::Put {
        session_id: session.map(str::to_owned),
        document,
    }
}

fn delete(session: Option<&str>, id: &str) -> IndexOp {
    IndexOp::Delete {
        session_id: session.map(str::to_owned),
        id: id.to_owned(),
    }
}

fn index(ops: Vec<IndexOp>) -> CallWrites {
    CallWrites {
        state: Vec::new(),
        index: ops,
    }
}

fn query(text: &str, limit: u32, offset: u32) -> IndexQuery {
    IndexQuery {
        text: text.to_owned(),
        scope: IndexScope::Engine,
        limit,
        offset,
    }
}

/// Every hit of `text` (up to 100), checked to be best first.
fn search(state: &dyn EngineState, engine: &str, session: Option<&str>, text: &str) -> IndexPage {
    let page = state
        .search(engine, session, &query(text, 100, 0), None)
        .unwrap_or_else(|error| panic!("searching {text:?}: {error}"));
    assert!(
        page.hits
            .windows(2)
            .all(|pair| pair[0].score >= pair[1].score),
        "{text:?}: best first"
    );
    page
}

fn ids(page: &IndexPage) -> BTreeSet<String> {
    page.hits.iter().map(|hit| hit.id.clone()).collect()
}

/// The documents of `corpus` a search of `text` must find: those whose
/// lowercased text contains every lowercased word.
fn reference(corpus: &[(&str, &str)], text: &str) -> BTreeSet<String> {
    let words: Vec<String> = text.split_whitespace().map(str::to_lowercase).collect();
    corpus
        .iter()
        .filter(|(_, text)| {
            let lower = text.to_lowercase();
            words.iter().all(|word| lower.contains(word.as_str()))
        })
        .map(|(id, _)| (*id).to_owned())
        .collect()
}

/// Documents in Chinese, Japanese, English, Russian, mixed, and with every
/// character a query language would treat specially.
const CORPUS: &[(&str, &str)] = &[
    ("en", "The Cache layer keeps hot rows; caching is hard."),
    ("zh", "这个缓存服务器很快，缓存命中率高"),
    ("ja", "東京のキャッシュサーバーは速い"),
    ("mixed", "Redis缓存 and 東京 cache-aside pattern: 50%_off"),
    ("ru", "ПРИВЕТ мир, кэш"),
    ("short", "a b c 猫"),
    ("quoted", "a \"quoted\" word and 'single' ones"),
    ("near", "NEAR(x y) and x OR y, NOT z AND w"),
    (
        "column",
        "text: colon {text}: rank: bm25( -minus ^caret +plus",
    ),
    ("star", "star* and back\\slash and (parens)"),
    ("control", "control\u{1}char and a \u{7}bell\ttab"),
];

#[test]
fn documents_are_found_by_every_word_as_a_substring() {
    for backend in backends("documents_are_found_by_every_word_as_a_substring") {
        let name = backend.name();
        let state = backend.state(&config());
        let ops = CORPUS
            .iter()
            .map(|(id, text)| put(Some("s1"), document(id, text)))
            .collect();
        state
            .commit("alpha", index(ops), None, None)
            .expect("indexes");
        let other_host = backend.state(&config());
        for text in [
            // Long words (the trigram index), short ones (patterns), both.
            "cache",
            "CACHE-ASIDE",
            "缓存服务",
            "缓存",
            "キャッシュ",
            "東京",
            "东京",
            "redis 缓存",
            "cache 缓存服务",
            "猫",
            "a",
            "hot rows",
            "Привет",
            "кэш",
            // Query syntax is plain text.
            "\"",
            "\"quoted\"",
            "'single'",
            "NEAR(",
            "NEAR(x",
            "OR",
            "x OR y",
            "AND",
            "NOT z",
            "text:",
            "{text}:",
            "rank:",
            "bm25(",
            "star*",
            "*",
            "-minus",
            "^caret",
            "+plus",
            "(parens)",
            ")",
            "%",
            "%_",
            "_",
            "\\",
            "back\\slash",
            "l\u{1}c",
            "\u{1}",
            "\u{7}bell",
            "'; DROP TABLE index_documents; --",
        ] {
            let page = search(other_host.as_ref(), "alpha", None, text);
            assert_eq!(ids(&page), reference(CORPUS, text), "{name}: {text:?}");
        }
        let hit = &search(state.as_ref(), "alpha", Some("s1"), "缓存服务").hits[0];
        assert_eq!(hit.snippet, "这个[缓存服务]器很快，缓存命中率高", "{name}");
        assert_eq!(hit.session_id.as_deref(), Some("s1"), "{name}");
        let hit = &search(state.as_ref(), "alpha", Some("s1"), "cache layer").hits[0];
        assert_eq!(
            hit.snippet, "The [Cache] [layer] keeps hot rows; caching is hard.",
            "{name}"
        );
        assert!(matches!(
            state.search("alpha", None, &query("a\0b", 10, 0), None),
            Err(StateError::BadQuery { .. })
        ));
        assert!(matches!(
            state.search("alpha", None, &query("ok", 0, 0), None),
            Err(StateError::BadQuery { .. })
        ));
    }
}

#[test]
fn documents_are_replaced_and_deleted_with_their_index() {
    for backend in backends("documents_are_replaced_and_deleted_with_their_index") {
        let name = backend.name();
        let state = backend.state(&config());
        let with_metadata = IndexDocument {
            metadata: Some(r#"{"role":"user","turn":3}"#.to_owned()),
            ..document("a", "the first version talks about queues")
        };
        state
            .commit(
                "e",
                index(vec![
                    put(None, with_metadata.clone()),
                    put(None, document("b", "another text about queues")),
                ]),
                None,
                None,
            )
            .expect("indexes");
        let page = search(state.as_ref(), "e", None, "first version");
        assert_eq!(page.hits.len(), 1, "{name}");
        assert_eq!(page.hits[0].metadata, with_metadata.metadata, "{name}");
        assert_eq!(page.hits[0].session_id, None, "{name}: an engine document");
        let footprint = state.index_footprint("e", None, "a").expect("footprint");
        assert_eq!(
            footprint.entry,
            Some(document_cost(&with_metadata)),
            "{name}"
        );

        // A put replaces: the old text is no longer found, the new one is.
        let replacement = document("a", "now it is about streams");
        state
            .commit("e", index(vec![put(None, replacement.clone())]), None, None)
            .expect("replaces");
        assert!(
            search(state.as_ref(), "e", None, "first version")
                .hits
                .is_empty(),
            "{name}"
        );
        let page = search(state.as_ref(), "e", None, "streams");
        assert_eq!(ids(&page), BTreeSet::from(["a".to_owned()]), "{name}");
        assert_eq!(page.hits[0].metadata, None, "{name}: replaced whole");
        assert_eq!(
            ids(&search(state.as_ref(), "e", None, "queues")).len(),
            1,
            "{name}"
        );
        assert_eq!(
            state
                .index_footprint("e", None, "a")
                .expect("footprint")
                .entry,
            Some(document_cost(&replacement)),
            "{name}"
        );

        // Within one batch the last write wins; deleting a missing one is
        // nothing.
        state
            .commit(
                "e",
                index(vec![
                    delete(None, "b"),
                    put(None, document("b", "back again, briefly")),
                    delete(None, "b"),
                    delete(None, "never-stored"),
                ]),
                None,
                None,
            )
            .expect("commits");
        assert!(
            search(state.as_ref(), "e", None, "queues").hits.is_empty(),
            "{name}"
        );
        assert!(
            search(state.as_ref(), "e", None, "briefly").hits.is_empty(),
            "{name}"
        );
        let footprint = state.index_footprint("e", None, "b").expect("footprint");
        assert_eq!(footprint.entry, None, "{name}");
        assert_eq!(
            (footprint.usage.bytes, footprint.usage.keys),
            (document_cost(&replacement), 1),
            "{name}: usage follows the documents"
        );
        state
            .commit("e", index(vec![delete(None, "a")]), None, None)
            .expect("deletes");
        assert_eq!(state.usage("e").expect("usage"), 0, "{name}");
        assert!(
            matches!(
                state.commit(
                    "e",
                    index(vec![put(Some(""), document("x", "y"))]),
                    None,
                    None
                ),
                Err(StateError::BadDocument { .. })
            ),
            "{name}: an empty session id"
        );
    }
}

#[test]
fn documents_are_private_to_their_engine_and_scope() {
    for backend in backends("documents_are_private_to_their_engine_and_scope") {
        let name = backend.name();
        let state = backend.state(&config());
        state
            .commit(
                "alpha",
                index(vec![
                    put(None, document("own", "shared word, the engine's own")),
                    put(Some("s1"), document("d", "shared word in session one")),
                    put(Some("s2"), document("d", "shared word in session two")),
                ]),
                None,
                None,
            )
            .expect("indexes");
        state
            .commit(
                "beta",
                index(vec![put(Some("s1"), document("d", "shared word of beta"))]),
                None,
                None,
            )
            .expect("indexes");
        let scopes = |engine: &str, session: Option<&str>| -> BTreeSet<(Option<String>, String)> {
            search(state.as_ref(), engine, session, "shared word")
                .hits
                .into_iter()
                .map(|hit| (hit.session_id, hit.id))
                .collect()
        };
        let scoped = |session: Option<&str>, id: &str| (session.map(str::to_owned), id.to_owned());
        assert_eq!(
            scopes("alpha", None),
            BTreeSet::from([
                scoped(None, "own"),
                scoped(Some("s1"), "d"),
                scoped(Some("s2"), "d")
            ]),
            "{name}: the engine's scope finds every session's documents"
        );
        assert_eq!(
            scopes("alpha", Some("s1")),
            BTreeSet::from([scoped(Some("s1"), "d")]),
            "{name}"
        );
        assert_eq!(
            scopes("beta", None),
            BTreeSet::from([scoped(Some("s1"), "d")]),
            "{name}"
        );
        assert!(
            scopes("gamma", None).is_empty(),
            "{name}: an engine with nothing"
        );
        assert!(scopes("alpha", Some("s3")).is_empty(), "{name}");

        // Same ids in other scopes and engines are other documents.
        let other_host = backend.state(&config());
        other_host
            .commit(
                "beta",
                index(vec![delete(None, "own"), delete(Some("s1"), "d")]),
                None,
                None,
            )
            .expect("beta deletes its own");
        other_host
            .commit("alpha", index(vec![delete(Some("s1"), "d")]), None, None)
            .expect("deletes");
        assert_eq!(
            scopes("alpha", None),
            BTreeSet::from([scoped(None, "own"), scoped(Some("s2"), "d")]),
            "{name}"
        );
        assert!(scopes("beta", None).is_empty(), "{name}");
    }
}

#[test]
fn searches_page_through_every_hit_once() {
    for backend in backends("searches_page_through_every_hit_once") {
        let name = backend.name();
        let state = backend.state(&config());
        let ops = (0..25)
            .map(|n| {
                // Texts of every size class the shared store indexes apart
                // (up to about 10 KB).
                let text = format!("page item {n} {}", "filler ".repeat(n * 60));
                put(Some("s"), document(&format!("d{n:02}"), &text))
            })
            .collect();
        state.commit("e", index(ops), None, None).expect("indexes");
        for text in ["page item", "pa"] {
            let mut seen = Vec::new();
            for (offset, expected, more) in [(0, 10, true), (10, 10, true), (20, 5, false)] {
                let page = state
                    .search("e", Some("s"), &query(text, 10, offset), None)
                    .expect("searches");
                assert_eq!(page.hits.len(), expected, "{name}: {text:?} at {offset}");
                assert_eq!(page.has_more, more, "{name}: {text:?} at {offset}");
                seen.extend(page.hits.into_iter().map(|hit| hit.id));
            }
            let unique: BTreeSet<&String> = seen.iter().collect();
            assert_eq!(unique.len(), 25, "{name}: {text:?}: each hit once");
            let past = state
                .search("e", Some("s"), &query(text, 10, 25), None)
                .expect("searches");
            assert_eq!(past, IndexPage::default(), "{name}");
        }
    }
}

#[test]
fn a_page_filled_by_short_texts_still_says_whether_a_long_one_follows() {
    for backend in backends("a_page_filled_by_short_texts_still_says_whether_a_long_one_follows") {
        let name = backend.name();
        let state = backend.state(&config());
        // Ten short texts fill a page of ten; a long one (over 8 KB, the
        // shared store's last size class) holds both words far past its
        // first 4,000 characters, and another long one only one of them.
        let mut ops: Vec<IndexOp> = (0..10)
            .map(|n| {
                let text = format!("a needle in a haystack, number {n}");
                put(Some("s"), document(&format!("short{n}"), &text))
            })
            .collect();
        let long = format!(
            "{}the Needle, then the HAYSTACK{}",
            "filler ".repeat(1_000),
            " tail".repeat(400)
        );
        ops.push(put(Some("s"), document("long", &long)));
        let other = format!("{}needle alone", "filler ".repeat(1_500));
        ops.push(put(Some("s"), document("other", &other)));
        state.commit("e", index(ops), None, None).expect("indexes");

        let first = state
            .search("e", Some("s"), &query("needle haystack", 10, 0), None)
            .expect("searches");
        assert_eq!(first.hits.len(), 10, "{name}");
        assert!(
            first.has_more,
            "{name}: the long text follows the full page"
        );
        assert!(
            first.hits.iter().all(|hit| hit.id.starts_with("short")),
            "{name}: {:?}",
            first.hits
        );
        let second = state
            .search("e", Some("s"), &query("needle haystack", 10, 10), None)
            .expect("searches");
        let ids: Vec<&str> = second.hits.iter().map(|hit| hit.id.as_str()).collect();
        assert_eq!(ids, ["long"], "{name}");
        assert!(!second.has_more, "{name}");
        let words = ["needle".to_owned(), "haystack".to_owned()];
        assert_eq!(second.hits[0].snippet, snippet(&long, &words), "{name}");
        assert!(second.hits[0].snippet.contains("[Needle]"), "{name}");

        // No long text holds both of these: the full page is the last.
        let only = state
            .search("e", Some("s"), &query("in haystack", 10, 0), None)
            .expect("searches");
        assert_eq!(only.hits.len(), 10, "{name}");
        assert!(!only.has_more, "{name}: nothing follows the full page");
    }
}

#[test]
fn documents_and_state_share_one_quota() {
    for backend in backends("documents_and_state_share_one_quota") {
        let name = backend.name();
        let small = document("d1", &"x".repeat(50));
        let cost = document_cost(&small);
        let entry = 1 + 100 + 64;
        let config = StateConfig {
            quota_bytes: entry + 3 * cost,
            max_keys: 100,
        };
        let state = backend.state(&config);
        state.set("e", "k", &[0; 100]).expect("sets");
        state
            .commit("e", index(vec![put(None, small.clone())]), None, None)
            .expect("indexes");
        assert_eq!(state.usage("e").expect("usage"), entry + cost, "{name}");

        // Over the quota: neither the state write nor the batch's document
        // writes land.
        let refused = state.commit(
            "e",
            CallWrites {
                state: vec![("k2".to_owned(), Some(vec![1; 10]))],
                index: vec![
                    put(None, document("big", &"y".repeat(200))),
                    delete(None, "d1"),
                ],
            },
            None,
            None,
        );
        assert!(
            matches!(refused, Err(StateError::QuotaExceeded { .. })),
            "{name}: {refused:?}"
        );
        assert_eq!(state.get("e", "k2").expect("gets"), None, "{name}");
        assert!(
            search(state.as_ref(), "e", None, "yyy").hits.is_empty(),
            "{name}"
        );
        assert_eq!(
            search(state.as_ref(), "e", None, "xxx").hits.len(),
            1,
            "{name}: kept"
        );
        assert_eq!(state.usage("e").expect("usage"), entry + cost, "{name}");

        // A document that fits only once the state entry is gone: judged
        // where the batch ends.
        let length = (1..)
            .find(|length| document_cost(&document("d2", &"z".repeat(*length))) > 2 * cost)
            .expect("a length");
        let d2 = document("d2", &"z".repeat(length));
        assert!(
            document_cost(&d2) <= 2 * cost + entry,
            "{name}: the test's sizes"
        );
        let refused = state.commit("e", index(vec![put(None, d2.clone())]), None, None);
        assert!(
            matches!(refused, Err(StateError::QuotaExceeded { .. })),
            "{name}: {refused:?}"
        );
        let other_host = backend.state(&config);
        other_host
            .commit(
                "e",
                CallWrites {
                    state: vec![("k".to_owned(), None)],
                    index: vec![put(None, d2.clone())],
                },
                None,
                None,
            )
            .expect("fits once the entry is gone");
        assert_eq!(
            state.usage("e").expect("usage"),
            cost + document_cost(&d2),
            "{name}"
        );

        // Shrinking is allowed past a lowered quota; growing is not.
        let lowered = backend.state(&StateConfig {
            quota_bytes: 10,
            max_keys: 100,
        });
        lowered
            .commit(
                "e",
                index(vec![put(None, document("d1", "tiny"))]),
                None,
                None,
            )
            .expect("shrinks");
        let refused = lowered.commit(
            "e",
            index(vec![put(None, document("d1", "tiny, but longer"))]),
            None,
            None,
        );
        assert!(
            matches!(refused, Err(StateError::QuotaExceeded { .. })),
            "{name}: {refused:?}"
        );
        let footprint = lowered.index_footprint("e", None, "d1").expect("footprint");
        assert_eq!(
            footprint.entry,
            Some(document_cost(&document("d1", "tiny"))),
            "{name}"
        );
        assert_eq!(
            (footprint.usage.bytes, footprint.usage.keys),
            (
                document_cost(&document("d1", "tiny")) + document_cost(&d2),
                2
            ),
            "{name}"
        );
    }
}

#[test]
fn a_document_is_a_key() {
    for backend in backends("a_document_is_a_key") {
        let name = backend.name();
        let config = StateConfig {
            quota_bytes: 1 << 20,
            max_keys: 4,
        };
        let state = backend.state(&config);
        let other_host = backend.state(&config);
        state.set("e", "k", b"v").expect("first key");
        state
            .commit(
                "e",
                index(vec![
                    put(None, document("d1", "one")),
                    put(Some("s"), document("d1", "one in a session")),
                    put(None, document("d3", "three")),
                ]),
                None,
                None,
            )
            .expect("three more keys");
        let refused = other_host.commit(
            "e",
            index(vec![put(None, document("d5", "five"))]),
            None,
            None,
        );
        assert!(
            matches!(refused, Err(StateError::TooManyKeys { keys: 4, .. })),
            "{name}: {refused:?}"
        );
        assert!(
            matches!(
                other_host.set("e", "k2", b"v"),
                Err(StateError::TooManyKeys { .. })
            ),
            "{name}: state entries count with documents"
        );
        other_host
            .commit(
                "e",
                index(vec![
                    put(None, document("d1", "replacing adds no key")),
                    delete(None, "d3"),
                    put(None, document("d5", "five")),
                ]),
                None,
                None,
            )
            .expect("replacing one key by another");
        assert_eq!(
            state
                .index_footprint("e", None, "d5")
                .expect("footprint")
                .usage
                .keys,
            4,
            "{name}"
        );
        state
            .set("other", "k", b"v")
            .expect("another engine has its own limit");
    }
}

/// Every message of every fixture, as (session, id, text).
fn fixture_messages() -> Vec<(String, String, String)> {
    let transcripts = TranscriptStore::new(Default::default());
    let mut messages = Vec::new();
    for name in FIXTURE_SESSIONS {
        let transcript = transcripts
            .open_read_only(&fixture(name))
            .expect("fixture opens");
        for entry in transcript.history().entries() {
            let text = guest_message(&entry.message).text();
            if !text.trim().is_empty() {
                messages.push((name.to_owned(), entry.id.clone(), text));
            }
        }
    }
    messages
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF)
}

/// Words an engine might remember a message by: ASCII words of 5 letters
/// or more, and 2 to 4 characters of each run of CJK text.
fn candidate_words(text: &str, rng: &mut fastrand::Rng) -> Vec<String> {
    let mut words = Vec::new();
    for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        if word.len() >= 5 {
            words.push(word.to_lowercase());
        }
    }
    let chars: Vec<char> = text.chars().collect();
    let mut at = 0;
    while at < chars.len() {
        let run = chars[at..].iter().take_while(|c| is_cjk(**c)).count();
        if run >= 2 {
            let length = rng.usize(2..=run.min(4));
            let start = at + rng.usize(0..=run - length);
            words.push(chars[start..start + length].iter().collect());
        }
        at += run.max(1);
    }
    words.sort();
    words.dedup();
    words
}

/// How many searches found the message their words came from.
#[derive(Default)]
struct Recall {
    asked: usize,
    found: usize,
    /// Searches with a CJK word.
    cjk: usize,
    missed: Vec<String>,
}

impl Recall {
    fn count(&mut self, query: &str, found: bool) {
        self.asked += 1;
        self.cjk += usize::from(query.chars().any(is_cjk));
        if found {
            self.found += 1;
        } else {
            self.missed.push(query.to_owned());
        }
    }

    fn share(&self) -> f64 {
        self.found as f64 / self.asked.max(1) as f64
    }
}

impl std::fmt::Display for Recall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} ({:.1}%), {} with CJK; missed {:?}",
            self.found,
            self.asked,
            self.share() * 100.0,
            self.cjk,
            self.missed
        )
    }
}

#[test]
fn recall_on_the_fixtures_is_high() {
    for backend in backends("recall_on_the_fixtures_is_high") {
        let name = backend.name();
        let state = backend.state(&StateConfig {
            quota_bytes: 1 << 30,
            max_keys: 1 << 20,
        });
        let messages = fixture_messages();
        for chunk in messages.chunks(100) {
            let ops = chunk
                .iter()
                .map(|(session, id, text)| put(Some(session), document(id, text)))
                .collect();
            state
                .commit("recall", index(ops), None, None)
                .expect("indexes");
        }
        let lowered: Vec<String> = messages
            .iter()
            .map(|(.., text)| text.to_lowercase())
            .collect();
        let positions: HashMap<(String, String), usize> = messages
            .iter()
            .enumerate()
            .map(|(at, (session, id, _))| ((session.clone(), id.clone()), at))
            .collect();
        let document_frequency =
            |word: &str| lowered.iter().filter(|text| text.contains(word)).count();
        let mut rng = fastrand::Rng::with_seed(29);
        let mut order: Vec<usize> = (0..messages.len()).collect();
        rng.shuffle(&mut order);
        // Distinctive words (in at most 2% of the messages), and commoner
        // ones (in up to 20%), where the ranking decides.
        let mut distinctive = Recall::default();
        let mut common = Recall::default();
        for target in order {
            if distinctive.asked == 200 {
                break;
            }
            let mut words = candidate_words(&messages[target].2, &mut rng);
            rng.shuffle(&mut words);
            words.truncate(6);
            let counted: Vec<(usize, String)> = words
                .into_iter()
                .map(|word| (document_frequency(&word) * 100 / messages.len(), word))
                .collect();
            let take = 2 + rng.usize(0..2);
            for (recall, percent) in [(&mut distinctive, 0..=2), (&mut common, 3..=20)] {
                let mut chosen: Vec<&String> = counted
                    .iter()
                    .filter(|(share, _)| percent.contains(share))
                    .map(|(_, word)| word)
                    .collect();
                if chosen.len() < 2 {
                    continue;
                }
                // CJK words first, when the message has any.
                chosen.sort_by_key(|word| !word.chars().any(is_cjk));
                chosen.truncate(take);
                let text = chosen
                    .iter()
                    .map(|word| word.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                let page = state
                    .search("recall", None, &query(&text, 10, 0), None)
                    .expect("searches");
                // Found: the target, or a message of the same text.
                let found = page.hits.iter().any(|hit| {
                    let key = (hit.session_id.clone().unwrap_or_default(), hit.id.clone());
                    positions
                        .get(&key)
                        .is_some_and(|at| lowered[*at] == lowered[target])
                });
                recall.count(&text, found);
            }
        }
        eprintln!("{name}: recall in the top 10 on the fixtures, distinctive words: {distinctive}");
        eprintln!("{name}: recall in the top 10 on the fixtures, common words: {common}");
        assert!(distinctive.asked >= 100, "{name}: {distinctive}");
        assert!(distinctive.cjk >= 20, "{name}: {distinctive}");
        assert!(distinctive.share() >= 0.95, "{name}: {distinctive}");
    }
}

#[test]
fn the_shared_index_migrates_from_schema_version_1() {
    let Some(url) = pg_cluster::database("the_shared_index_migrates_from_schema_1") else {
        return;
    };
    let state = PostgresState::new(Backend::connect(&url), &config());
    state.set("e", "k", b"kept").expect("sets");
    // Back to version 1: no index table, no extension, no fencing tokens
    // (migration 3, turn commits keyed by session, runs again: it is
    // repeatable).
    let postgres = Backend::connect(&url);
    let server = postgres.clone();
    postgres
        .run(move |client| async move {
            client
                .batch_execute(
                    "DROP TABLE ctxbox_index_documents;
                     DROP EXTENSION pg_trgm;
                     DROP TABLE ctxbox_session_messages;
                     ALTER TABLE ctxbox_session_leases DROP COLUMN token;
                     DROP SEQUENCE ctxbox_lease_tokens;
                     DELETE FROM ctxbox_schema WHERE version >= 2;",
                )
                .await
                .map_err(|error| server.query_error("downgrade", &error))
        })
        .expect("version 1");
    let state = PostgresState::new(Backend::connect(&url), &config());
    assert_eq!(state.get("e", "k").expect("gets"), Some(b"kept".to_vec()));
    state
        .commit(
            "e",
            index(vec![put(
                None,
                document("d", "indexed after the migration"),
            )]),
            None,
            None,
        )
        .expect("indexes");
    assert_eq!(search(&state, "e", None, "migration").hits.len(), 1);
}

#[test]
fn a_database_of_ctype_c_still_finds_every_script() {
    let Some(url) = pg_cluster::database_in_ctype("a_database_of_ctype_c", "C") else {
        return;
    };
    let state = PostgresState::new(Backend::connect(&url), &config());
    let ops = CORPUS
        .iter()
        .map(|(id, text)| put(None, document(id, text)))
        .collect();
    state.commit("e", index(ops), None, None).expect("indexes");
    // Under `C` ASCII letters fold and every script is found; other
    // letters do not fold, so upper-case Cyrillic is not found by the
    // (lowercased) query word.
    for (text, expected) in [
        ("CACHE-aside", &["mixed"][..]),
        ("缓存服务", &["zh"]),
        ("缓存", &["mixed", "zh"]),
        ("キャッシュ", &["ja"]),
        ("東京", &["ja", "mixed"]),
        ("кэш", &["ru"]),
        ("ПРИВЕТ", &[]),
        ("%_", &["mixed"]),
    ] {
        let expected: BTreeSet<String> = expected.iter().map(|id| (*id).to_owned()).collect();
        assert_eq!(ids(&search(&state, "e", None, text)), expected, "{text:?}");
    }
}

/// What `sql` (one row, one text column) answers in the database of
/// `postgres`, read on a connection it already has (a new one would
/// migrate).
fn read(postgres: &std::sync::Arc<ctxbox_host::store::Postgres>, sql: &'static str) -> String {
    let server = postgres.clone();
    postgres
        .run(move |client| async move {
            client
                .query_one(sql, &[])
                .await
                .map(|row| row.get::<_, String>(0))
                .map_err(|error| server.query_error("read", &error))
        })
        .expect("reads")
}

#[test]
fn the_shared_index_migrates_to_size_class_indexes() {
    let Some(url) = pg_cluster::database("the_shared_index_migrates_to_size_class_indexes") else {
        return;
    };
    let postgres = Backend::connect(&url);
    // Back to version 5: one trigram index with its default pending list
    // (4 MB), which holds the documents written then.
    pg_cluster::psql(
        &url,
        "DROP INDEX ctxbox_index_documents_text_upto512, ctxbox_index_documents_text_upto2k,
                    ctxbox_index_documents_text_upto8k, ctxbox_index_documents_text_over8k;
         CREATE INDEX ctxbox_index_documents_text
             ON ctxbox_index_documents USING gin (text gin_trgm_ops);
         DELETE FROM ctxbox_schema WHERE version >= 6;",
    );
    let indexes =
        "SELECT string_agg(relname || ' ' || coalesce(array_to_string(reloptions, ','), ''),
                                     '; ' ORDER BY relname)
                   FROM pg_class WHERE relname LIKE 'ctxbox_index_documents_text%'";
    // Documents of every size class: 200 of 50 words of their own (about
    // 450 bytes), and the corpus, and long ones.
    let texts: Vec<(String, String)> = (0..200u64)
        .map(|n| {
            let words: Vec<String> = (0..50u64)
                .map(|k| format!("{:x}", (n * 1_000 + k).wrapping_mul(2_654_435_761)))
                .collect();
            let filler = "long filler ".repeat(n as usize % 4 * 300);
            (
                format!("d{n}"),
                format!("document {n} {} {filler}", words.join(" ")),
            )
        })
        .collect();
    let write = |state: &PostgresState, texts: &[(String, String)]| {
        let ops = texts
            .iter()
            .map(|(id, text)| put(None, document(id, text)))
            .collect();
        state.commit("e", index(ops), None, None).expect("indexes");
    };
    let config = StateConfig {
        quota_bytes: 64 << 20,
        max_keys: 1_000,
    };
    let before = PostgresState::new(postgres.clone(), &config);
    write(&before, &texts[..100]);
    write(
        &before,
        &CORPUS
            .iter()
            .map(|(id, text)| ((*id).to_owned(), (*text).to_owned()))
            .collect::<Vec<_>>(),
    );
    assert_eq!(read(&postgres, indexes), "ctxbox_index_documents_text ");
    // A host of this build migrates (versions 6 and 7): one index per size
    // class, written without a pending list, and every document found.
    let state = PostgresState::new(Backend::connect(&url), &config);
    assert_eq!(
        read(&postgres, indexes),
        "ctxbox_index_documents_text_over8k fastupdate=off; \
         ctxbox_index_documents_text_upto2k fastupdate=off; \
         ctxbox_index_documents_text_upto512 fastupdate=off; \
         ctxbox_index_documents_text_upto8k fastupdate=off"
    );
    for text in ["缓存", "cache", "кэш", "%_"] {
        assert_eq!(
            ids(&search(&state, "e", None, text)),
            reference(CORPUS, text),
            "{text:?}"
        );
    }
    for n in [3, 42, 99] {
        let word = texts[n].1.split(' ').nth(2).expect("a word");
        let holding: BTreeSet<String> = texts[..100]
            .iter()
            .filter(|(_, text)| text.contains(word))
            .map(|(id, _)| id.clone())
            .collect();
        assert!(holding.contains(&format!("d{n}")), "{word}");
        assert_eq!(ids(&search(&state, "e", None, word)), holding, "{word}");
    }
    write(&state, &texts[100..]);
    assert!(ids(&search(&state, "e", None, "document 199")).contains("d199"));
    assert_eq!(search(&state, "e", None, "long filler").hits.len(), 100);
}

//! The packed bulk path (`history.packed-range`, the SDK's `scan`): the host
//! writes the SDK codec's layout exactly, and an engine reading in place sees
//! the same text as one copying every entry.

use ctxbox_guest::HistoryView;
use ctxbox_guest::codec::{Decoder, Encoder};
use ctxbox_guest::packed::pack;
use ctxbox_guest::testing::MemoryHistory;
use ctxbox_host::contract::CallOptions;
use ctxbox_host::contract::ContextEngine;
use ctxbox_host::contract::guest_view;
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::packed::{PackedWriter, encode_entry};
use ctxbox_host::contract::types::{AssembleParams, MessageEntry};
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_host::transcript::TranscriptStore;
use ctxbox_tests::{FIXTURE_SESSIONS, engine, fixture, guests, sandbox_with, session};

fn fixture_entries(name: &str) -> Vec<MessageEntry> {
    TranscriptStore::new(Default::default())
        .open_read_only(&fixture(name))
        .expect("fixture opens")
        .history()
        .entries()
        .to_vec()
}

/// Each entry's id and text, as `scan` reads them.
fn scanned_texts(history: &impl HistoryView) -> Vec<(String, String)> {
    let mut texts = Vec::new();
    history
        .scan(0..history.len(), |view| {
            texts.push((view.id.to_owned(), view.text().expect("text").into_owned()));
        })
        .expect("scan");
    texts
}

#[test]
fn the_host_writes_every_fixture_entry_as_the_sdk_encodes_it() {
    for name in FIXTURE_SESSIONS {
        let entries = fixture_entries(name);
        let mut sdk_entries = Vec::new();
        for entry in &entries {
            let bytes = encode_entry(entry);
            let mut decoder = Decoder::new(&bytes);
            let decoded = decoder
                .entry()
                .unwrap_or_else(|error| panic!("{name} {}: {error}", entry.id));
            decoder.finish().expect("nothing left over");
            // Re-encoded by the SDK, the entry is byte for byte what the host
            // wrote: the two encoders agree on every field.
            assert_eq!(
                Encoder::new().entry(&decoded).finish(),
                bytes,
                "{name} {}",
                entry.id
            );
            assert_eq!(
                decoded.message.text(),
                guest_view::guest_message(&entry.message).text(),
                "{name} {}",
                entry.id
            );
            sdk_entries.push(decoded);
        }
        // A whole page too: the SDK's `pack` of the same entries.
        let mut page = PackedWriter::with_capacity(0);
        for (index, entry) in entries.iter().enumerate() {
            // Either way of writing the length: by a size hint, or counted.
            page.push(entry, if index % 2 == 0 { 0 } else { usize::MAX });
        }
        assert_eq!(page.finish(), pack(&sdk_entries), "{name}");

        // Read in place, every entry gives the text and the owned copy of
        // the entry itself.
        let history = MemoryHistory::new(sdk_entries.clone());
        let mut seen = 0u32;
        history
            .scan(0..history.len(), |view| {
                let original = &sdk_entries[view.index as usize];
                assert_eq!(view.index, seen);
                assert_eq!(view.id, original.id);
                assert_eq!(view.parent_id, original.parent_id.as_deref());
                assert_eq!(view.timestamp_ms, original.timestamp_ms);
                assert_eq!(view.kind(), original.message.kind());
                assert_eq!(view.text().expect("text"), original.message.text());
                assert_eq!(
                    view.texts().expect("texts").join("\n"),
                    original.message.text()
                );
                assert_eq!(&view.to_entry().expect("entry"), original);
                seen += 1;
            })
            .expect("scan");
        assert_eq!(seen, history.len(), "{name}");

        // The host's history seen natively through the SDK's view (the
        // host's encoder behind `packed_range`) reads the same.
        let through_host = scanned_texts(&History::new(entries.clone()));
        let through_sdk = scanned_texts(&history);
        assert_eq!(through_host, through_sdk, "{name}");
    }
}

#[test]
fn a_corrupt_page_is_a_decode_error_not_a_panic() {
    struct Corrupt(MemoryHistory, Vec<u8>);
    impl HistoryView for Corrupt {
        fn len(&self) -> u32 {
            self.0.len()
        }
        fn entry(&self, index: u32) -> Option<ctxbox_guest::MessageEntry> {
            self.0.entry(index)
        }
        fn kind(&self, index: u32) -> Option<ctxbox_guest::MessageKind> {
            self.0.kind(index)
        }
        fn tool_pairing(&self, index: u32) -> Option<ctxbox_guest::ToolPairing> {
            self.0.tool_pairing(index)
        }
        fn tokens(&self, range: std::ops::Range<u32>) -> u64 {
            self.0.tokens(range)
        }
        fn packed_range(&self, _: std::ops::Range<u32>) -> Vec<u8> {
            self.1.clone()
        }
    }
    let history = MemoryHistory::new(ctxbox_guest::testing::conversation(1));
    let good = pack(history.entries());
    for corrupt in [
        good[..good.len() - 1].to_vec(), // truncated
        vec![200, 1, 0],                 // a length past the end
        vec![4, 1, b'x', 0, 9],          // an unknown message kind
    ] {
        let corrupt = Corrupt(MemoryHistory::new(history.entries().to_vec()), corrupt);
        assert!(corrupt.scan(0..corrupt.len(), |_| {}).is_err());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_and_to_vec_read_the_same_text_from_every_fixture_in_wasm() {
    // A small page cap, so the scan pages through each fixture.
    let sandbox = sandbox_with(SandboxConfig {
        max_range_kib: 64,
        ..SandboxConfig::default()
    });
    let scanner = engine(&sandbox, guests::HISTORY_SCANNER).await;
    let reader = engine(&sandbox, guests::HISTORY_READER).await;
    let call = CallOptions::default();
    for name in FIXTURE_SESSIONS {
        let history = History::new(fixture_entries(name));
        let text_bytes: usize = history
            .entries()
            .iter()
            .map(|entry| guest_view::guest_message(&entry.message).text().len())
            .sum();
        for (probe, engine) in [("scan", &scanner), ("to_vec", &reader)] {
            let answer = engine
                .assemble(&call, &session(name), &history, &AssembleParams::default())
                .await
                .unwrap_or_else(|failure| panic!("{probe} on {name}: {failure}"));
            assert_eq!(
                answer.estimated_tokens, text_bytes as u64,
                "{probe} on {name}"
            );
        }
    }
}

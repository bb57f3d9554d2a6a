//! Writes the fuzz targets' seed corpora (`fuzz/corpus/<target>/`) from the
//! repository's fixtures, so the checked-in seeds can be made again:
//!
//! ```sh
//! cargo run -p ctxbox-fuzz-checks --bin make-seeds -- fuzz/corpus COMPONENT.wasm…
//! ```
//!
//! Transcript seeds are windows of the real sessions and the odd shapes;
//! codec, sidecar and validator seeds are made of the same messages in each
//! parser's own format; config seeds are the README's `ctxbox.toml`; the
//! components given are component seeds, whole and cut short.

use std::fs;
use std::path::{Path, PathBuf};

use ctxbox_guest::HistoryView;
use ctxbox_host::TranscriptStore;
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::types::{AgentMessage, AssembleResult, AssembledItem, CompactResult};
use ctxbox_host::serve::message;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Largest seed written: libFuzzer mutates small inputs far faster.
const MAX_SEED: usize = 16 * 1024;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let out = args
        .next()
        .ok_or("usage: make-seeds OUT_DIR [COMPONENT.wasm…]")?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut fixtures = Vec::new();
    for dir in ["tests/fixtures/sessions", "tests/fixtures/shapes"] {
        for entry in fs::read_dir(root.join(dir))? {
            let path = entry?.path();
            if path.extension().is_some_and(|ext| ext == "jsonl") {
                fixtures.push(path);
            }
        }
    }
    fixtures.sort();

    let store = TranscriptStore::new(Default::default());
    let mut histories = Vec::new();
    for path in &fixtures {
        transcript_seeds(&out.join("transcript"), &fs::read_to_string(path)?)?;
        histories.push(store.open_read_only(path)?.history());
    }
    for history in &histories {
        codec_seeds(&out.join("guest_codec"), history)?;
        sidecar_seeds(&out.join("sidecar"), history)?;
        validator_seeds(&out.join("validators"), history)?;
    }
    config_seeds(
        &out.join("config"),
        &fs::read_to_string(root.join("README.md"))?,
    )?;
    for component in args {
        let bytes = fs::read(&component)?;
        write_any(&out.join("component"), &bytes)?;
        for cut in [4096, 64, 8] {
            write(&out.join("component"), &bytes[..cut.min(bytes.len())])?;
        }
    }
    Ok(())
}

/// Writes `bytes` under `dir`, named by their digest (so seeds never clash),
/// unless they are over [`MAX_SEED`].
fn write(dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if bytes.len() > MAX_SEED {
        return Ok(());
    }
    write_any(dir, bytes)
}

/// [`write`] whatever the size (whole components are seeds too).
fn write_any(dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let name = hex::encode(&Sha256::digest(bytes)[..8]);
    fs::write(dir.join(name), bytes)
}

/// The header with each run of a few consecutive lines, and the header with
/// the first line of each distinct shape (entry type and message role).
fn transcript_seeds(dir: &Path, text: &str) -> std::io::Result<()> {
    let lines: Vec<&str> = text.lines().collect();
    let Some((header, body)) = lines.split_first() else {
        return Ok(());
    };
    let mut shapes = std::collections::BTreeSet::new();
    for line in body {
        let value: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let shape = format!("{}/{}", value["type"], value["message"]["role"]);
        if shapes.insert(shape) {
            write(dir, format!("{header}\n{line}\n").as_bytes())?;
        }
    }
    for window in body.chunks(4).step_by(7) {
        write(dir, format!("{header}\n{}\n", window.join("\n")).as_bytes())?;
    }
    Ok(())
}

/// Entries of `history` in the guest SDK's state encoding.
fn codec_seeds(dir: &Path, history: &History) -> std::io::Result<()> {
    for index in (0..HistoryView::len(history)).step_by(25) {
        if let Some(entry) = HistoryView::entry(history, index) {
            write(dir, &ctxbox_guest::codec::encode_entry(&entry))?;
        }
    }
    Ok(())
}

/// Sidecar requests carrying `history`'s messages as OpenClaw has them.
fn sidecar_seeds(dir: &Path, history: &History) -> std::io::Result<()> {
    let messages: Vec<Value> = history
        .entries()
        .iter()
        .filter_map(|entry| {
            message::to_openclaw(&entry.message, std::time::SystemTime::UNIX_EPOCH).ok()
        })
        .collect();
    for (id, chunk) in messages.chunks(3).step_by(12).enumerate() {
        let sync = json!({"id": id, "method": "assemble", "params": {
            "sessionId": "s", "sync": {"base": 0, "messages": chunk}, "tokenBudget": 4000}});
        write(dir, sync.to_string().as_bytes())?;
        let commit = json!({"id": format!("c{id}"), "method": "commitTurn", "params": {
            "sessionId": "s", "advancementKey": "k", "messages": chunk}});
        write(dir, commit.to_string().as_bytes())?;
    }
    write(dir, br#"{"id":1,"method":"hello","params":{"protocol":1}}"#)?;
    Ok(())
}

/// A few entries of `history` with answers the validators accept and refuse.
fn validator_seeds(dir: &Path, history: &History) -> std::io::Result<()> {
    let entries = &history.entries()[..history.len().min(6)];
    let len = entries.len() as u32;
    for (start, end) in [(0, len), (len / 2, len), (1, len + 3)] {
        let assemble = AssembleResult {
            items: vec![
                AssembledItem::Keep { start, end },
                AssembledItem::Insert(AgentMessage::user_text("note")),
            ],
            estimated_tokens: 10,
            system_prompt_addition: Some("be brief".into()),
            context_projection: None,
        };
        let compact = CompactResult {
            ok: true,
            compacted: start == 0,
            summary: Some("the summary".into()),
            first_kept_entry_id: entries.get(end as usize / 2).map(|entry| entry.id.clone()),
            tokens_before: 100,
            tokens_after: Some(10),
            ..CompactResult::default()
        };
        let seed = json!({
            "history": entries,
            "assemble": assemble,
            "compact": compact,
            "budget": 50,
            "json": "{\"nested\": [[[1]]]}",
        });
        write(dir, seed.to_string().as_bytes())?;
    }
    Ok(())
}

/// The README's `ctxbox.toml` examples, whole and one table at a time.
fn config_seeds(dir: &Path, readme: &str) -> std::io::Result<()> {
    for block in readme.split("```toml\n").skip(1) {
        let block = block.split("```").next().unwrap_or_default();
        write(dir, block.as_bytes())?;
        for table in block.split("\n[") {
            write(
                dir,
                format!("[{}", table.trim_start_matches('[')).as_bytes(),
            )?;
        }
    }
    Ok(())
}

//! Text an engine writes never reaches an operator's terminal or log as it is:
//! escape sequences, carriage returns and forged lines are shown escaped, and
//! no engine can make the host keep or print more than a few KiB of it
//! (quarantine records, guard events, `health`, logs, `info` names).

use ctxbox_host::contract::engine::{CallOptions, ContextEngine};
use ctxbox_host::contract::failure::{FailureKind, Operation};
use ctxbox_host::contract::history::History;
use ctxbox_host::contract::text::{MAX_ENGINE_TEXT_BYTES, MAX_STDERR_TAIL_BYTES};
use ctxbox_host::contract::types::AssembleParams;
use ctxbox_host::engines::guard::GuardPolicy;
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_tests::traces::Capture;
use ctxbox_tests::{conversation, engine, guests, sandbox, session, zoo_host};

/// Whether `text` holds anything a terminal would act on (a newline only
/// where `newlines` allows it).
fn has_raw_controls(text: &str, newlines: bool) -> bool {
    text.chars().any(|c| {
        (c.is_control() && !(newlines && c == '\n')) || matches!(c, '\u{202a}'..='\u{202e}')
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injecting_engine_is_quarantined_with_its_text_escaped_and_capped() {
    let (_dir, host) = zoo_host(SandboxConfig::default(), GuardPolicy::default());
    let engine = host.select(Some("injector")).await;
    let history = History::new(conversation(3));
    let capture = Capture::default();
    let answer = capture
        .run(engine.assemble(
            &CallOptions::default(),
            &session("victim"),
            &history,
            &AssembleParams::default(),
        ))
        .await
        .expect("the turn goes on with legacy");
    assert_eq!(answer.items.len(), 1, "legacy passes the history through");

    let record = host.quarantine().get("injector").expect("quarantined");
    assert_eq!(record.classification, FailureKind::EngineError.as_str());
    assert!(
        !has_raw_controls(&record.reason, false),
        "{:?}",
        record.reason
    );
    assert!(
        record.reason.len() <= MAX_ENGINE_TEXT_BYTES,
        "{}",
        record.reason.len()
    );
    assert!(record.reason.contains("\\u{1b}[31m"), "{:?}", record.reason);
    assert!(
        record.reason.ends_with("bytes in all]"),
        "a cut message says so: {:?}",
        &record.reason[record.reason.len() - 60..]
    );
    assert!(
        !has_raw_controls(&record.stderr_tail, true),
        "{:?}",
        record.stderr_tail
    );
    assert!(record.stderr_tail.len() <= MAX_STDERR_TAIL_BYTES);
    assert!(
        record.stderr_tail.contains("\\u{1b}]52;c;"),
        "the clipboard write is visible, not performed: {:?}",
        record.stderr_tail
    );
    // What `ctxbox health --json` prints is the record serialized: read back
    // by a JSON consumer, no field holds a raw control character either.
    let json = serde_json::to_string(&record).expect("record serializes");
    let decoded: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    for (field, value) in decoded.as_object().expect("an object") {
        if let Some(text) = value.as_str() {
            assert!(
                !has_raw_controls(text, field == "stderrTail"),
                "{field}: {text:?}"
            );
        }
    }

    let events = engine.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].operation, Operation::Assemble);
    assert!(!has_raw_controls(&events[0].reason, false));
    assert!(events[0].reason.len() <= MAX_ENGINE_TEXT_BYTES + 256);

    for event in capture.events() {
        assert!(!has_raw_controls(&event.message, false), "{event:?}");
        for (field, value) in &event.fields {
            assert!(!has_raw_controls(value, false), "{field} = {value:?}");
            assert!(
                value.len() <= 2 * MAX_ENGINE_TEXT_BYTES,
                "{field}: {} bytes",
                value.len()
            );
        }
    }
    let logged: Vec<_> = capture
        .events()
        .into_iter()
        .filter(|event| event.target == "ctxbox::engine")
        .collect();
    assert_eq!(logged.len(), 1, "the engine's one log record: {logged:?}");
    assert!(
        logged[0].message.starts_with("first line\\u{1b}[2J"),
        "{logged:?}"
    );
    assert!(
        logged[0]
            .message
            .contains("\\r\\nINFO ctxbox: engine healthy")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_info_name_cannot_set_the_window_title() {
    let sandbox = sandbox();
    let engine = engine(&sandbox, guests::INJECTOR).await;
    let info = engine.info();
    assert_eq!(info.id, "injector");
    assert!(
        info.name.starts_with("Injector\\u{1b}[2J"),
        "{:?}",
        info.name
    );
    assert!(!has_raw_controls(&info.name, false));
}

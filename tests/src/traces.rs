//! Captures the `tracing` events a future emits, so tests can assert what the
//! host logged (the one event per guard decision, engine log records).
//!
//! `tracing` caches each callsite's interest process-wide, computed when the
//! callsite is first hit. While at most one dispatcher is registered, it is
//! computed from the hitting thread's own subscriber alone: a parallel test
//! hitting the guard's callsite on a thread without one would cache it as
//! "never", and this capture would then miss the event. An [`Anchor`]
//! dispatcher, registered for the whole process before any capture and
//! interested "sometimes" in everything, keeps the registered dispatchers at
//! two or more while a capture runs, so interest is always asked of all of
//! them and decided per event on the emitting thread.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tracing::field::{Field, Visit};
use tracing::instrument::WithSubscriber;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One captured event.
#[derive(Debug, Clone)]
pub struct Captured {
    /// Its target (module path, or e.g. `ctxbox::engine` for engine logs).
    pub target: String,
    /// Its level.
    pub level: Level,
    /// Its message.
    pub message: String,
    /// Every other field, formatted.
    pub fields: BTreeMap<String, String>,
}

impl Captured {
    /// The field `name`, or `""` when the event has none.
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }
}

/// Collects events from the futures it runs (and only those: other tests in
/// the same process are not seen).
#[derive(Clone, Default)]
pub struct Capture {
    events: Arc<Mutex<Vec<Captured>>>,
}

impl Capture {
    /// Runs `future`, capturing every event emitted while it is polled.
    pub async fn run<F: Future>(&self, future: F) -> F::Output {
        anchor();
        let subscriber = tracing_subscriber::registry().with(self.clone());
        future.with_subscriber(subscriber).await
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<Captured> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The events whose message is `message`.
    pub fn with_message(&self, message: &str) -> Vec<Captured> {
        self.events()
            .into_iter()
            .filter(|event| event.message == message)
            .collect()
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let metadata = event.metadata();
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Captured {
                target: metadata.target().to_owned(),
                level: *metadata.level(),
                message: fields.message,
                fields: fields.others,
            });
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    others: BTreeMap<String, String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.insert(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.insert(field, format!("{value:?}"));
    }
}

impl Fields {
    fn insert(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.others.insert(field.name().to_owned(), value);
        }
    }
}

/// A subscriber that records nothing and is interested in every callsite
/// "sometimes" (see the module's documentation).
struct Anchor;

/// Registers the process's [`Anchor`] dispatcher, once; it lives as long as
/// the process.
fn anchor() {
    static ANCHOR: OnceLock<Dispatch> = OnceLock::new();
    ANCHOR.get_or_init(|| Dispatch::new(Anchor));
}

impl Subscriber for Anchor {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

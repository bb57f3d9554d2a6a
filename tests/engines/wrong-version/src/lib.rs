//! Hostile engine: built against `ctxbox:engine@0.2.0`. The host supports only
//! 0.1.0 and must refuse it at load, naming both versions.

wit_bindgen::generate!({ path: "wit", world: "context-engine" });

struct FutureEngine;

impl exports::ctxbox::engine::engine::Guest for FutureEngine {
    fn info() -> String {
        "from-the-future".to_owned()
    }
}

export!(FutureEngine);

//! `ctxbox serve` over months: sessions it gives up (over `serve.maxSessions`
//! or idle) come back unchanged, a client that stops reading stops the
//! server reading instead of growing its memory, and requests beyond
//! `serve.maxInFlight` are refused by name.

use std::time::Duration;

use ctxbox_host::runtime::config::{Config, ServeConfig};
use ctxbox_host::sandbox::SandboxConfig;
use ctxbox_tests::guests;
use serde_json::{Value, json};

use super::serve::{Client, conversation, full_sync, load, reverse_request};

fn config(dir: &std::path::Path, serve: ServeConfig) -> Config {
    Config {
        data_dir: Some(dir.to_owned()),
        sandbox: SandboxConfig {
            call_timeout_ms: 20_000,
            max_instances: 8,
            ..SandboxConfig::default()
        },
        serve,
        ..Config::default()
    }
}

/// Polls `health` until `done` holds of it (a minute at most: the
/// background work it waits for takes milliseconds).
async fn health_until(client: &mut Client, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..600 {
        let health = client.result("health", json!({})).await;
        if done(&health) {
            return health;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: never happened");
}

/// The prompt without the times engine-made messages are stamped with.
fn untimed(prompt: &Value) -> Value {
    let mut prompt = prompt.clone();
    for message in prompt.as_array_mut().expect("messages") {
        if message["role"] == "custom" {
            message["timestamp"] = Value::Null;
        }
    }
    prompt
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_given_up_over_the_bound_comes_back_with_the_same_prompt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bounds = ServeConfig {
        max_sessions: 2,
        idle_session_seconds: 0,
        ..ServeConfig::default()
    };
    let mut client = Client::with_config(config(dir.path(), bounds), Some("keep-recent"), 1 << 20);
    client.call("hello", json!({"protocol": 2})).await;
    let messages = conversation(20);
    let ask = |sync: Value| json!({"sessionId": "a", "tokenBudget": 600, "sync": sync});
    let before = client.result("assemble", ask(full_sync(&messages))).await;
    let mut warm = 0;
    for other in ["b", "c"] {
        client
            .result(
                "assemble",
                json!({"sessionId": other, "sync": full_sync(&conversation(2))}),
            )
            .await;
        if other == "b" {
            warm = client.result("health", json!({})).await["warmInstances"]
                .as_u64()
                .expect("a count");
        }
    }
    // c's instance came, a's went.
    let health = health_until(&mut client, "a's instance closed", |health| {
        health["warmInstances"]
            .as_u64()
            .is_some_and(|now| now <= warm)
    })
    .await;
    assert_eq!(health["sessions"], 2, "{health}");
    assert_eq!(health["releasedSessions"], 1, "{health}");

    // The client believes the server has all 40; it has none of `a` now.
    let stale = client
        .call("assemble", ask(json!({"base": 40, "messages": []})))
        .await;
    assert_eq!(stale["error"]["code"], "history-mismatch", "{stale}");
    assert_eq!(stale["error"]["data"]["length"], 0);
    let after = client.result("assemble", ask(full_sync(&messages))).await;
    assert_eq!(
        untimed(&after["messages"]),
        untimed(&before["messages"]),
        "the same prompt"
    );
    assert_eq!(after["servedBy"], "keep-recent");
    let health = client.result("health", json!({})).await;
    assert_eq!(health["quarantined"], json!([]), "nobody was blamed");
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_given_up_with_its_instance() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bounds = ServeConfig {
        idle_session_seconds: 1,
        ..ServeConfig::default()
    };
    let mut client = Client::with_config(config(dir.path(), bounds), Some("keep-recent"), 1 << 20);
    client.call("hello", json!({"protocol": 2})).await;
    client
        .result(
            "assemble",
            json!({"sessionId": "s", "sync": full_sync(&conversation(3))}),
        )
        .await;
    let warm = client.result("health", json!({})).await["warmInstances"]
        .as_u64()
        .expect("a count");
    assert!(warm >= 1, "the session's instance is warm");
    let health = health_until(&mut client, "the idle session released", |health| {
        health["sessions"] == 0 && health["warmInstances"].as_u64() < Some(warm)
    })
    .await;
    assert_eq!(health["releasedSessions"], 1, "{health}");
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_stops_the_server_reading() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A small pipe, so the server's side fills after a few hundred answers.
    let mut client = Client::with_config(
        config(dir.path(), ServeConfig::default()),
        Some("keep-recent"),
        16 * 1024,
    );
    client.call("hello", json!({"protocol": 2})).await;
    const REQUESTS: u64 = 5_000;
    let line = json!({"id": 0, "method": "health", "params": {}}).to_string();
    let mut sent = 0u64;
    // Nothing is read while writing: with answers queued without bound the
    // server would read everything; bounded, it stops reading and the
    // client's writes stall.
    let stalled = tokio::time::timeout(Duration::from_secs(5), async {
        while sent < REQUESTS {
            let with_id = line.replacen("\"id\":0", &format!("\"id\":{}", 1_000 + sent), 1);
            client.send_line(&with_id).await;
            sent += 1;
        }
    })
    .await
    .is_err();
    assert!(
        stalled,
        "the server read all {REQUESTS} requests of a client that reads nothing"
    );
    assert!(sent < REQUESTS, "{sent}");
    // Once the client reads again every request it wrote is answered:
    // served, or refused by name while maxInFlight answers waited.
    let (mut served, mut refused) = (0u64, 0u64);
    while served + refused < sent {
        let answer = client.next_answer().await;
        match answer["error"]["code"].as_str() {
            None => served += 1,
            Some("overloaded") => refused += 1,
            Some(other) => panic!("{other}: {answer}"),
        }
    }
    assert!(served >= 64, "served {served}, refused {refused}");
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_max_in_flight_are_refused_and_reverse_answers_still_land() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bounds = ServeConfig {
        max_in_flight: 1,
        ..ServeConfig::default()
    };
    let mut client = Client::with_config(
        config(dir.path(), bounds),
        Some(guests::POWERS_PROBE),
        1 << 20,
    );
    client
        .call(
            "hello",
            json!({"protocol": 2, "capabilities": ["complete"]}),
        )
        .await;
    load(&mut client, guests::POWERS_PROBE).await;
    let waiting = client
        .send(
            "assemble",
            json!({"sessionId": "s", "prompt": "complete 1", "sync": full_sync(&conversation(1))}),
        )
        .await;
    let asked = reverse_request(&mut client).await;
    let refused = client.call("health", json!({})).await;
    assert_eq!(refused["error"]["code"], "overloaded", "{refused}");
    client
        .send_line(&json!({"id": asked["id"], "result": {"text": "ok"}}).to_string())
        .await;
    let answer = client.answer(waiting).await;
    assert!(
        answer["result"]["messages"][0]
            .to_string()
            .contains("powers: completed=1"),
        "{answer}"
    );
    assert!(client.result("health", json!({})).await["uptimeMs"].is_u64());
    client.stop().await;
}

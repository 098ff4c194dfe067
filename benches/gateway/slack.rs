//! Slack Socket Mode detection latency (issue 31): how many ping intervals the adapter takes
//! to drop a half-open connection, and one whose pongs stopped while envelopes still arrive.
//! Both must be dropped within the ping interval plus the pong deadline (a fifth of the
//! interval by default). Same trials as the Feishu section, against the mock Slack and the
//! independent server (benches/independent/slack_server.py).

use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::{MockConfig, SlackConfig, SlackFault};
use serde_json::json;

use crate::detection::{trial, Detection, Running};
use crate::independent::Independent;
use crate::scratch;
use crate::wing::{
    self, all_stored, detection_table, settle, Chatter, Fault, Server, Side, Tally, Words,
};

/// The adapter's ping interval; its pong deadline is a fifth of it.
const PING_S: u64 = 1;
/// benches/independent/slack_server.py's default app-level token.
const INDEPENDENT_APP_TOKEN: &str = "xapp-1-A0INDEP-1-independent";

/// A mock of its own (for a mock run), and the adapter's `gateway.toml` and app-level token
/// against the server.
async fn adapter(server: &Server) -> (Side, String, String) {
    let side = server.side(MockConfig::default()).await;
    let (base, token) = match &side {
        Side::Mock(m) => (m.http_base(), SlackConfig::default().app_token),
        Side::Independent(i) => (i.base(), INDEPENDENT_APP_TOKEN.to_owned()),
    };
    let toml = format!(
        "[[adapter]]\nname = \"s\"\nkind = \"slack\"\napp-token-env = \"A\"\n\
         bot-token-env = \"B\"\napi-base = \"{base}\"\nping-interval = \"{PING_S}s\"\n\
         backoff-min = \"100ms\"\nbackoff-max = \"1s\"\n"
    );
    (side, toml, token)
}

/// Envelopes said on the server: their event ids.
async fn emit(side: &Side, n: usize) -> Vec<String> {
    match side {
        Side::Mock(m) => m.slack_emit(n),
        Side::Independent(i) => i.emit_ids(json!({"count": n}), "event_ids").await,
    }
}

async fn slack_trial(server: Server, fault: Fault, dir: PathBuf) -> Detection {
    let (side, text, token) = adapter(&server).await;
    let _chatter = (fault == Fault::NoPong).then(|| {
        let side = side.clone();
        Chatter::start(move || {
            let side = side.clone();
            async move { emit(&side, 1).await }
        })
    });
    let ping = Duration::from_secs(PING_S);
    let inject = || match &side {
        Side::Mock(m) => m.slack_set_fault(match fault {
            Fault::HalfOpen => SlackFault::Silence,
            Fault::NoPong => SlackFault::Deaf,
        }),
        Side::Independent(i) => {
            let kind = match fault {
                Fault::HalfOpen => "silence",
                Fault::NoPong => "deaf",
            };
            let i = i.clone();
            tokio::spawn(async move { i.control("fault", json!({"kind": kind})).await });
        }
    };
    trial(&text, &token, &dir, ping, inject, wing::reconnected).await
}

pub(crate) async fn slack_detection() {
    let dir = scratch("slack");
    let independent = wing::independent(&dir, Independent::start_slack);
    let words = Words {
        reasons: ["half-open", "stopped answering pings"],
        verdict: "dropped for the right reason",
        ..Words::zombie("Slack Socket Mode", "envelopes")
    };
    let ping = Duration::from_secs(PING_S);
    detection_table(&words, ping, &independent, &dir, slack_trial).await;
    println!();
    let _ = std::fs::remove_dir_all(dir);
}

/// The faults a Slack flood cycles through.
const FLOOD_FAULTS: [&str; 5] = ["silence", "deaf", "close", "refresh_requested", "warning"];

/// 1,000 events in twenty batches of fifty, each batch said as the next fault of
/// [`FLOOD_FAULTS`] strikes every open connection; the adapter must reconnect, and what was
/// sent into a dead connection comes again (a redelivered envelope, under a new
/// `envelope_id` on the mock). Returns what was stored, the redeliveries and the seconds.
async fn flood(server: Server, dir: &Path) -> (Tally, u64, f64) {
    let (side, toml, token) = adapter(&server).await;
    let run = Running::start(&toml, &[&token], dir);
    run.until(|v| v.state == State::Connected).await;
    let started = std::time::Instant::now();
    let mut ids = vec![];
    for i in 0..20 {
        let fault = FLOOD_FAULTS[i % FLOOD_FAULTS.len()];
        let before = connections(&side).await;
        match &side {
            Side::Mock(m) => m.slack_set_fault(match fault {
                "silence" => SlackFault::Silence,
                "deaf" => SlackFault::Deaf,
                "close" => SlackFault::CloseAll,
                reason => SlackFault::Disconnect(reason.into()),
            }),
            Side::Independent(ind) => {
                let body = match fault {
                    "silence" | "deaf" | "close" => json!({"kind": fault}),
                    reason => json!({"kind": "disconnect", "reason": reason}),
                };
                ind.control("fault", body).await;
            }
        }
        ids.extend(emit(&side, 50).await);
        // The adapter finds the fault (or takes the refresh) and has a new connection; the
        // next fault is for that one.
        while connections(&side).await <= before {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        run.until(|v| v.state == State::Connected).await;
        match &side {
            Side::Mock(m) => m.slack_clear_faults(),
            Side::Independent(ind) => {
                ind.control("clear", json!({})).await;
            }
        }
        // The batch in before the next fault: what a dead connection lost comes again on
        // the next one within the redelivery time. (Faults back to back, each cycle of five
        // lasts about the 3 s an envelope waits for its ack, so every retry of the first
        // batch can meet the next cycle's half-open socket, and Slack gives it up.)
        let end = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < end && !all_stored(dir, &ids) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let stored = settle(dir, &ids, Duration::from_secs(120)).await;
    let took = started.elapsed().as_secs_f64();
    let redeliveries = match &side {
        Side::Mock(m) => m.slack_stats().redeliveries,
        Side::Independent(ind) => ind.stat("redeliveries").await,
    };
    run.stop().await;
    let unique: std::collections::HashSet<&String> = stored.iter().collect();
    for (i, batch) in ids.chunks(50).enumerate() {
        let missing = batch.iter().filter(|id| !unique.contains(id)).count();
        if missing > 0 {
            let fault = FLOOD_FAULTS[i % FLOOD_FAULTS.len()];
            eprintln!("batch {i} ({fault}): {missing} of 50 not stored");
        }
    }
    (Tally::of(&stored, &ids), redeliveries, took)
}

/// Connections the server has admitted.
async fn connections(side: &Side) -> u64 {
    match side {
        Side::Mock(m) => m.slack_stats().connections,
        Side::Independent(i) => i.stat("connections").await,
    }
}

pub(crate) async fn slack_flood() {
    let dir = scratch("slack-flood");
    let independent = wing::independent(&dir, Independent::start_slack);
    println!("### Slack Socket Mode: 1,000 events under 20 injected faults\n");
    println!("| server | stored | lost | duplicated | redelivered envelopes | took, s |");
    println!("|---|---|---|---|---|---|");
    for (name, server) in Server::both(&independent) {
        let d = dir.join(name.replace(' ', "-"));
        let (tally, redelivered, took) = flood(server, &d).await;
        println!("| {name} | {} | {redelivered} | {took:.1} |", tally.cells());
    }
    println!(
        "\nFaults, cycled four times each, on every open connection while 50 events are said: \
         half-open (nothing more read or written), deaf (no pongs, no acks read), a close \
         frame, `disconnect` `refresh_requested`, and `disconnect` `warning`. Ping interval \
         {PING_S} s; an envelope not acked within 3 s is delivered again.\n"
    );
    let _ = std::fs::remove_dir_all(dir);
}

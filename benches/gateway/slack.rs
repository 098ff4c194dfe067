//! Slack Socket Mode detection latency (issue 31): how many ping intervals the adapter takes
//! to drop a half-open connection, and one whose pongs stopped while envelopes still arrive.
//! Both must be dropped within the ping interval plus the pong deadline (a fifth of the
//! interval by default). Same trials as the Feishu section, against the mock Slack and the
//! independent server (benches/independent/slack_server.py).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::{MockConfig, MockPlatform, SlackConfig, SlackFault};
use serde_json::json;

use crate::detection::{row, trial, Detection};
use crate::independent::Independent;
use crate::scratch;

/// The adapter's ping interval; its pong deadline is a fifth of it.
const PING_S: u64 = 1;
const TRIALS: usize = 30;
const AT_ONCE: usize = 10;
/// benches/independent/slack_server.py's default app-level token.
const INDEPENDENT_APP_TOKEN: &str = "xapp-1-A0INDEP-1-independent";

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// Nothing more written or read.
    HalfOpen,
    /// Envelopes keep coming; nothing the client sends is read, so no pong.
    NoPong,
}

/// What the adapter connects to: a mock of its own per trial, or the one independent server
/// (every trial its own connection; faults apply to the server's open sockets).
#[derive(Clone)]
enum Server {
    Mock,
    Independent(Arc<Independent>),
}

/// A mock of its own (for a mock run), and the adapter's `gateway.toml` and app-level token
/// against the server.
async fn adapter(server: &Server) -> (Option<Arc<MockPlatform>>, String, String) {
    let mock = match server {
        Server::Mock => Some(Arc::new(
            MockPlatform::start(MockConfig::default()).await.unwrap(),
        )),
        Server::Independent(_) => None,
    };
    let (base, token) = match (&mock, server) {
        (Some(m), _) => (m.http_base(), SlackConfig::default().app_token),
        (None, Server::Independent(i)) => (i.base(), INDEPENDENT_APP_TOKEN.to_owned()),
        (None, Server::Mock) => unreachable!("a mock run has its mock"),
    };
    let toml = format!(
        "[[adapter]]\nname = \"s\"\nkind = \"slack\"\napp-token-env = \"A\"\n\
         bot-token-env = \"B\"\napi-base = \"{base}\"\nping-interval = \"{PING_S}s\"\n\
         backoff-min = \"100ms\"\nbackoff-max = \"1s\"\n"
    );
    (mock, toml, token)
}

async fn slack_trial(server: Server, fault: Fault, dir: &Path) -> Detection {
    let (mock, text, token) = adapter(&server).await;
    // With pongs stopped, envelopes keep coming (about 50 a second): the connection is not
    // silent, so only the pong deadline can tell.
    let chatter = (fault == Fault::NoPong).then(|| {
        let (mock, server) = (mock.clone(), server.clone());
        tokio::spawn(async move {
            loop {
                match (&mock, &server) {
                    (Some(m), _) => {
                        m.slack_emit(1);
                    }
                    (None, Server::Independent(i)) => {
                        i.control("emit", json!({"count": 1})).await;
                    }
                    (None, Server::Mock) => {}
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    });
    let ping = Duration::from_secs(PING_S);
    let inject = || match (&mock, &server) {
        (Some(m), _) => m.slack_set_fault(match fault {
            Fault::HalfOpen => SlackFault::Silence,
            Fault::NoPong => SlackFault::Deaf,
        }),
        (None, Server::Independent(i)) => {
            let kind = match fault {
                Fault::HalfOpen => "silence",
                Fault::NoPong => "deaf",
            };
            let i = i.clone();
            tokio::spawn(async move { i.control("fault", json!({"kind": kind})).await });
        }
        (None, Server::Mock) => {}
    };
    let d = trial(&text, &token, dir, ping, inject, |v, before| {
        v.attempts > before.attempts && v.state == State::Connected
    })
    .await;
    if let Some(c) = chatter {
        c.abort();
    }
    d
}

/// Detection latencies in ping intervals, reconnect times in ms, and how many trials gave
/// the expected reason. Against the independent server, trials run one at a time (a fault
/// there applies to every open socket).
async fn trials(
    server: Server,
    fault: Fault,
    reason: &str,
    dir: &Path,
) -> (Vec<f64>, Vec<f64>, usize) {
    let at_once = match server {
        Server::Mock => AT_ONCE,
        Server::Independent(_) => 1,
    };
    let (mut detect, mut back, mut right) = (vec![], vec![], 0);
    for round in 0..TRIALS / at_once {
        let runs: Vec<_> = (0..at_once)
            .map(|i| {
                let d = dir.join(format!("{round}-{i}"));
                let server = server.clone();
                tokio::spawn(async move { slack_trial(server, fault, &d).await })
            })
            .collect();
        for r in runs {
            let d = r.await.unwrap();
            detect.push(d.detected.as_secs_f64() / PING_S as f64);
            back.push(d.back.as_secs_f64() * 1e3);
            right += usize::from(d.error.contains(reason));
        }
        if let Server::Independent(i) = &server {
            i.control("clear", json!({})).await;
        }
    }
    (detect, back, right)
}

pub(crate) async fn slack_detection() {
    let dir = scratch("slack");
    let python = Independent::python();
    let independent = Arc::new(Independent::start_slack(
        &python,
        &dir.join("independent.log"),
    ));
    println!(
        "### Slack Socket Mode: detection in units of the ping interval ({TRIALS} trials each, \
         ping interval {PING_S} s, pong deadline 0.2 interval)\n"
    );
    println!("| server | figure | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|---|");
    let bound = "every trial ≤ 1.20";
    for (name, server) in [
        ("built-in mock", Server::Mock),
        (
            "independent server",
            Server::Independent(independent.clone()),
        ),
    ] {
        let half_open = trials(
            server.clone(),
            Fault::HalfOpen,
            "half-open",
            &dir.join("half-open"),
        )
        .await;
        let no_pong = trials(
            server,
            Fault::NoPong,
            "stopped answering pings",
            &dir.join("no-pong"),
        )
        .await;
        row(
            &format!("{name} | half-open: detection, in ping intervals"),
            &half_open.0,
            2,
            bound,
        );
        row(
            &format!("{name} | no pong (envelopes flowing): detection, in ping intervals"),
            &no_pong.0,
            2,
            bound,
        );
        row(
            &format!("{name} | half-open: drop to connected again, ms"),
            &half_open.1,
            1,
            "",
        );
        row(
            &format!("{name} | no pong: drop to connected again, ms"),
            &no_pong.1,
            1,
            "",
        );
        println!(
            "| {name} | dropped for the right reason | half-open {}/{TRIALS}, no pong {}/{TRIALS} | | | |",
            half_open.2, no_pong.2
        );
    }
    println!();
    let _ = std::fs::remove_dir_all(dir);
}

/// The faults a Slack flood cycles through.
const FLOOD_FAULTS: [&str; 5] = ["silence", "deaf", "close", "refresh_requested", "warning"];

/// 1,000 events in twenty batches of fifty, each batch said as the next fault of
/// [`FLOOD_FAULTS`] strikes every open connection; the adapter must reconnect, and what was
/// sent into a dead connection comes again (a redelivered envelope, under a new
/// `envelope_id` on the mock). Returns (stored, lost, duplicated, redeliveries, seconds).
async fn flood(server: Server, dir: &Path) -> (usize, usize, usize, u64, f64) {
    let (mock, toml, token) = adapter(&server).await;
    let run = crate::detection::Running::start(&toml, Some(&token), dir);
    run.until(|v| v.state == State::Connected).await;
    let started = std::time::Instant::now();
    let mut ids = vec![];
    for i in 0..20 {
        let fault = FLOOD_FAULTS[i % FLOOD_FAULTS.len()];
        let before = connections(&mock, &server).await;
        match (&mock, &server) {
            (Some(m), _) => {
                m.slack_set_fault(match fault {
                    "silence" => SlackFault::Silence,
                    "deaf" => SlackFault::Deaf,
                    "close" => SlackFault::CloseAll,
                    reason => SlackFault::Disconnect(reason.into()),
                });
                ids.extend(m.slack_emit(50));
            }
            (None, Server::Independent(ind)) => {
                let body = match fault {
                    "silence" | "deaf" | "close" => json!({"kind": fault}),
                    reason => json!({"kind": "disconnect", "reason": reason}),
                };
                ind.control("fault", body).await;
                let answer = ind.control("emit", json!({"count": 50})).await;
                ids.extend(
                    answer["event_ids"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap().to_owned()),
                );
            }
            (None, Server::Mock) => {}
        }
        // The adapter finds the fault (or takes the refresh) and has a new connection; the
        // next fault is for that one.
        while connections(&mock, &server).await <= before {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        run.until(|v| v.state == State::Connected).await;
        match (&mock, &server) {
            (Some(m), _) => m.slack_clear_faults(),
            (None, Server::Independent(ind)) => {
                ind.control("clear", json!({})).await;
            }
            (None, Server::Mock) => {}
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
    let end = std::time::Instant::now() + Duration::from_secs(120);
    let stored = loop {
        let s: Vec<String> = hermes_svc::gateway::spool::read(&dir.join("inbox"), None)
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.id)
            .collect();
        if ids.iter().all(|id| s.contains(id)) || std::time::Instant::now() > end {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let took = started.elapsed().as_secs_f64();
    let redeliveries = match (&mock, &server) {
        (Some(m), _) => m.slack_stats().redeliveries,
        (None, Server::Independent(ind)) => ind.stats().await["redeliveries"].as_u64().unwrap_or(0),
        (None, Server::Mock) => 0,
    };
    run.stop().await;
    let unique: std::collections::HashSet<&String> = stored.iter().collect();
    let lost = ids.iter().filter(|id| !unique.contains(id)).count();
    for (i, batch) in ids.chunks(50).enumerate() {
        let missing = batch.iter().filter(|id| !unique.contains(id)).count();
        if missing > 0 {
            let fault = FLOOD_FAULTS[i % FLOOD_FAULTS.len()];
            eprintln!("batch {i} ({fault}): {missing} of 50 not stored");
        }
    }
    (
        stored.len(),
        lost,
        stored.len() - unique.len(),
        redeliveries,
        took,
    )
}

fn all_stored(dir: &Path, ids: &[String]) -> bool {
    let s: std::collections::HashSet<String> =
        hermes_svc::gateway::spool::read(&dir.join("inbox"), None)
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.id)
            .collect();
    ids.iter().all(|id| s.contains(id))
}

/// Connections the server has admitted.
async fn connections(mock: &Option<Arc<MockPlatform>>, server: &Server) -> u64 {
    match (mock, server) {
        (Some(m), _) => m.slack_stats().connections,
        (None, Server::Independent(i)) => i.stats().await["connections"].as_u64().unwrap_or(0),
        (None, Server::Mock) => 0,
    }
}

pub(crate) async fn slack_flood() {
    let dir = scratch("slack-flood");
    let python = Independent::python();
    let independent = Arc::new(Independent::start_slack(
        &python,
        &dir.join("independent.log"),
    ));
    println!("### Slack Socket Mode: 1,000 events under 20 injected faults\n");
    println!("| server | stored | lost | duplicated | redelivered envelopes | took, s |");
    println!("|---|---|---|---|---|---|");
    for (name, server) in [
        ("built-in mock", Server::Mock),
        ("independent server", Server::Independent(independent)),
    ] {
        let d = dir.join(name.replace(' ', "-"));
        let (stored, lost, dup, redelivered, took) = flood(server, &d).await;
        println!("| {name} | {stored} | {lost} | {dup} | {redelivered} | {took:.1} |");
    }
    println!(
        "\nFaults, cycled four times each, on every open connection while 50 events are said: \
         half-open (nothing more read or written), deaf (no pongs, no acks read), a close \
         frame, `disconnect` `refresh_requested`, and `disconnect` `warning`. Ping interval \
         {PING_S} s; an envelope not acked within 3 s is delivered again.\n"
    );
    let _ = std::fs::remove_dir_all(dir);
}

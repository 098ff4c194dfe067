//! Mattermost (issue 50): how many ping intervals the adapter takes to drop a half-open
//! WebSocket, and one whose pongs stopped while `posted` events still arrive (both within
//! the interval plus the pong deadline, a fifth of it by default); and 1,000 posts under 20
//! faults, none lost (what a dead socket missed is read back by REST) and none stored twice.
//! Against the mock Mattermost and the independent server
//! (benches/independent/mattermost_server.py).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::mattermost::{MattermostConfig, MattermostFault};
use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use serde_json::json;

use crate::detection::{row, trial, Detection};
use crate::independent::Independent;
use crate::scratch;

const PING_S: u64 = 1;
const TRIALS: usize = 30;
const AT_ONCE: usize = 10;
/// benches/independent/mattermost_server.py's token.
const INDEPENDENT_TOKEN: &str = "independentmattermosttoken";

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    HalfOpen,
    NoPong,
}

#[derive(Clone)]
enum Server {
    Mock,
    Independent(Arc<Independent>),
}

async fn adapter(server: &Server) -> (Option<Arc<MockPlatform>>, String, String) {
    let mock = match server {
        Server::Mock => Some(Arc::new(
            MockPlatform::start(MockConfig::default()).await.unwrap(),
        )),
        Server::Independent(_) => None,
    };
    let (base, token) = match (&mock, server) {
        (Some(m), _) => (m.http_base(), MattermostConfig::default().token),
        (None, Server::Independent(i)) => (i.base(), INDEPENDENT_TOKEN.to_owned()),
        (None, Server::Mock) => unreachable!("a mock run has its mock"),
    };
    let toml = format!(
        "[[adapter]]\nname = \"m\"\nkind = \"mattermost\"\nserver-url = \"{base}\"\n\
         token-env = \"T\"\nping-interval = \"{PING_S}s\"\nbackoff-min = \"100ms\"\n\
         backoff-max = \"1s\"\n"
    );
    (mock, toml, token)
}

/// Posts said on the server, their ids.
async fn emit(mock: &Option<Arc<MockPlatform>>, server: &Server, n: usize) -> Vec<String> {
    match (mock, server) {
        (Some(m), _) => m.mattermost_emit(n),
        (None, Server::Independent(i)) => {
            let answer = i.control("emit", json!({"count": n})).await;
            (answer["post_ids"].as_array().into_iter().flatten())
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        }
        (None, Server::Mock) => vec![],
    }
}

async fn fault(mock: &Option<Arc<MockPlatform>>, server: &Server, kind: &str) {
    match (mock, server) {
        (Some(m), _) => m.mattermost_set_fault(match kind {
            "silence" => MattermostFault::Silence,
            "deaf" => MattermostFault::Deaf,
            "drop" => MattermostFault::Drop,
            _ => MattermostFault::Close(1001),
        }),
        (None, Server::Independent(i)) => {
            i.control("fault", json!({"kind": kind})).await;
        }
        (None, Server::Mock) => {}
    }
}

async fn mm_trial(server: Server, f: Fault, dir: &Path) -> Detection {
    let (mock, text, token) = adapter(&server).await;
    // With pongs stopped, posts keep coming (about 50 a second): only the pong deadline tells.
    let chatter = (f == Fault::NoPong).then(|| {
        let (mock, server) = (mock.clone(), server.clone());
        tokio::spawn(async move {
            loop {
                emit(&mock, &server, 1).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    });
    let kind = if f == Fault::HalfOpen {
        "silence"
    } else {
        "deaf"
    };
    let inject = || {
        let (mock, server) = (mock.clone(), server.clone());
        tokio::spawn(async move { fault(&mock, &server, kind).await });
    };
    let ping = Duration::from_secs(PING_S);
    let d = trial(&text, &token, dir, ping, inject, |v, before| {
        v.attempts > before.attempts && v.state == State::Connected
    })
    .await;
    if let Some(c) = chatter {
        c.abort();
    }
    d
}

async fn trials(server: Server, f: Fault, dir: &Path) -> (Vec<f64>, Vec<f64>, usize) {
    let at_once = if matches!(server, Server::Mock) {
        AT_ONCE
    } else {
        1
    };
    let (mut detect, mut back, mut right) = (vec![], vec![], 0);
    for round in 0..TRIALS / at_once {
        let runs: Vec<_> = (0..at_once)
            .map(|i| {
                let d = dir.join(format!("{round}-{i}"));
                let server = server.clone();
                tokio::spawn(async move { mm_trial(server, f, &d).await })
            })
            .collect();
        for r in runs {
            let d = r.await.unwrap();
            detect.push(d.detected.as_secs_f64() / PING_S as f64);
            back.push(d.back.as_secs_f64() * 1e3);
            right += usize::from(d.error.contains("zombie"));
        }
    }
    (detect, back, right)
}

/// The faults a flood cycles through: half-open, no pongs, the TCP connection dropped
/// without a close frame, and a close 1001 (the server's planned restart).
const FLOOD_FAULTS: [&str; 4] = ["silence", "deaf", "drop", "close"];

/// 1,000 posts in twenty batches of fifty, each said as the next fault strikes every open
/// connection, and the last batch replayed on the new one (a server resuming). Returns
/// (stored, lost, duplicated, seconds).
async fn flood(server: Server, dir: &Path) -> (usize, usize, usize, f64) {
    let (mock, toml, token) = adapter(&server).await;
    let run = crate::detection::Running::start(&toml, Some(&token), dir);
    run.until(|v| v.state == State::Connected).await;
    let started = std::time::Instant::now();
    let mut ids = vec![];
    for i in 0..20 {
        let attempts = run.view().attempts;
        fault(&mock, &server, FLOOD_FAULTS[i % FLOOD_FAULTS.len()]).await;
        ids.extend(emit(&mock, &server, 50).await);
        run.until(|v| v.attempts > attempts && v.state == State::Connected)
            .await;
        match (&mock, &server) {
            (Some(m), _) => m.mattermost_redeliver(50),
            (None, Server::Independent(ind)) => {
                ind.control("replay", json!({"count": 50})).await;
            }
            (None, Server::Mock) => {}
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
    run.stop().await;
    let unique: std::collections::HashSet<&String> = stored.iter().collect();
    let lost = ids.iter().filter(|id| !unique.contains(id)).count();
    (stored.len(), lost, stored.len() - unique.len(), took)
}

pub(crate) async fn mattermost_figures() {
    let dir = scratch("mattermost");
    let python = Independent::python();
    let independent = Arc::new(Independent::start_mattermost(
        &python,
        &dir.join("independent.log"),
    ));
    println!(
        "### Mattermost: detection in units of the ping interval ({TRIALS} trials each, ping \
         interval {PING_S} s, pong deadline 0.2 interval)\n"
    );
    println!("| server | figure | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|---|");
    let servers = [
        ("built-in mock", Server::Mock),
        (
            "independent server",
            Server::Independent(independent.clone()),
        ),
    ];
    for (name, server) in servers.clone() {
        let half = trials(server.clone(), Fault::HalfOpen, &dir.join("half-open")).await;
        if let Server::Independent(i) = &server {
            i.control("clear", json!({})).await;
        }
        let deaf = trials(server, Fault::NoPong, &dir.join("no-pong")).await;
        let bound = "every trial ≤ 1.20";
        row(
            &format!("{name} | half-open: detection, in ping intervals"),
            &half.0,
            2,
            bound,
        );
        row(
            &format!("{name} | no pong (posts flowing): detection, in ping intervals"),
            &deaf.0,
            2,
            bound,
        );
        row(
            &format!("{name} | half-open: drop to connected again, ms"),
            &half.1,
            1,
            "",
        );
        row(
            &format!("{name} | no pong: drop to connected again, ms"),
            &deaf.1,
            1,
            "",
        );
        println!(
            "| {name} | dropped as a zombie | half-open {}/{TRIALS}, no pong {}/{TRIALS} | | | |",
            half.2, deaf.2
        );
    }
    println!("\n### Mattermost: 1,000 posts under 20 injected faults\n");
    println!("| server | stored | lost | duplicated | took, s |");
    println!("|---|---|---|---|---|");
    for (name, server) in servers {
        let d = dir.join(name.replace(' ', "-"));
        let (stored, lost, dup, took) = flood(server, &d).await;
        println!("| {name} | {stored} | {lost} | {dup} | {took:.1} |");
    }
    println!(
        "\nFaults, cycled five times each, on every open connection while 50 posts are said: \
         half-open, deaf (no pongs), the TCP connection dropped without a close frame, and a \
         close 1001; after each, the batch is replayed on the new connection. What a dead \
         socket missed is read back by `posts?since=`.\n"
    );
    let _ = std::fs::remove_dir_all(dir);
}

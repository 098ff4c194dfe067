//! Mattermost (issue 50): how many ping intervals the adapter takes to drop a half-open
//! WebSocket, and one whose pongs stopped while `posted` events still arrive (both within
//! the interval plus the pong deadline, a fifth of it by default); and 1,000 posts under 20
//! faults, none lost (what a dead socket missed is read back by REST) and none stored twice.
//! Against the mock Mattermost and the independent server
//! (benches/independent/mattermost_server.py).

use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::mattermost::{MattermostConfig, MattermostFault};
use hermes_svc::mock_platform::MockConfig;
use serde_json::json;

use crate::detection::{trial, Detection, Running};
use crate::independent::Independent;
use crate::scratch;
use crate::wing::{self, detection_table, settle, Chatter, Fault, Server, Side, Tally, Words};

const PING_S: u64 = 1;
/// benches/independent/mattermost_server.py's token.
const INDEPENDENT_TOKEN: &str = "independentmattermosttoken";

async fn adapter(server: &Server) -> (Side, String, String) {
    let side = server.side(MockConfig::default()).await;
    let (base, token) = match &side {
        Side::Mock(m) => (m.http_base(), MattermostConfig::default().token),
        Side::Independent(i) => (i.base(), INDEPENDENT_TOKEN.to_owned()),
    };
    let toml = format!(
        "[[adapter]]\nname = \"m\"\nkind = \"mattermost\"\nserver-url = \"{base}\"\n\
         token-env = \"T\"\nping-interval = \"{PING_S}s\"\nbackoff-min = \"100ms\"\n\
         backoff-max = \"1s\"\n"
    );
    (side, toml, token)
}

/// Posts said on the server, their ids.
async fn emit(side: &Side, n: usize) -> Vec<String> {
    match side {
        Side::Mock(m) => m.mattermost_emit(n),
        Side::Independent(i) => i.emit_ids(json!({"count": n}), "post_ids").await,
    }
}

async fn fault(side: &Side, kind: &str) {
    match side {
        Side::Mock(m) => m.mattermost_set_fault(match kind {
            "silence" => MattermostFault::Silence,
            "deaf" => MattermostFault::Deaf,
            "drop" => MattermostFault::Drop,
            _ => MattermostFault::Close(1001),
        }),
        Side::Independent(i) => {
            i.control("fault", json!({"kind": kind})).await;
        }
    }
}

async fn mm_trial(server: Server, f: Fault, dir: PathBuf) -> Detection {
    let (side, text, token) = adapter(&server).await;
    // With pongs stopped, posts keep coming (about 50 a second): only the pong deadline tells.
    let _chatter = (f == Fault::NoPong).then(|| {
        let side = side.clone();
        Chatter::start(move || {
            let side = side.clone();
            async move { emit(&side, 1).await }
        })
    });
    let kind = if f == Fault::HalfOpen {
        "silence"
    } else {
        "deaf"
    };
    let inject = || {
        let side = side.clone();
        tokio::spawn(async move { fault(&side, kind).await });
    };
    let ping = Duration::from_secs(PING_S);
    trial(&text, &token, &dir, ping, inject, wing::reconnected).await
}

/// The faults a flood cycles through: half-open, no pongs, the TCP connection dropped
/// without a close frame, and a close 1001 (the server's planned restart).
const FLOOD_FAULTS: [&str; 4] = ["silence", "deaf", "drop", "close"];

/// 1,000 posts in twenty batches of fifty, each said as the next fault strikes every open
/// connection, and the last batch replayed on the new one (a server resuming). Returns what
/// was stored and the seconds.
async fn flood(server: Server, dir: &Path) -> (Tally, f64) {
    let (side, toml, token) = adapter(&server).await;
    let run = Running::start(&toml, &[&token], dir);
    run.until(|v| v.state == State::Connected).await;
    let started = std::time::Instant::now();
    let mut ids = vec![];
    for i in 0..20 {
        let attempts = run.view().attempts;
        fault(&side, FLOOD_FAULTS[i % FLOOD_FAULTS.len()]).await;
        ids.extend(emit(&side, 50).await);
        run.until(|v| v.attempts > attempts && v.state == State::Connected)
            .await;
        match &side {
            Side::Mock(m) => m.mattermost_redeliver(50),
            Side::Independent(ind) => {
                ind.control("replay", json!({"count": 50})).await;
            }
        }
    }
    let stored = settle(dir, &ids, Duration::from_secs(120)).await;
    let took = started.elapsed().as_secs_f64();
    run.stop().await;
    (Tally::of(&stored, &ids), took)
}

pub(crate) async fn mattermost_figures() {
    let dir = scratch("mattermost");
    let independent = wing::independent(&dir, Independent::start_mattermost);
    let words = Words::zombie("Mattermost", "posts");
    let ping = Duration::from_secs(PING_S);
    detection_table(&words, ping, &independent, &dir, mm_trial).await;
    println!("\n### Mattermost: 1,000 posts under 20 injected faults\n");
    println!("| server | stored | lost | duplicated | took, s |");
    println!("|---|---|---|---|---|");
    for (name, server) in Server::both(&independent) {
        let d = dir.join(name.replace(' ', "-"));
        let (tally, took) = flood(server, &d).await;
        println!("| {name} | {} | {took:.1} |", tally.cells());
    }
    println!(
        "\nFaults, cycled five times each, on every open connection while 50 posts are said: \
         half-open, deaf (no pongs), the TCP connection dropped without a close frame, and a \
         close 1001; after each, the batch is replayed on the new connection. What a dead \
         socket missed is read back by `posts?since=`.\n"
    );
    let _ = std::fs::remove_dir_all(dir);
}

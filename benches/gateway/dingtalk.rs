//! DingTalk Stream (issue 50): how many ping intervals the adapter takes to drop a half-open
//! connection, and one that stops answering its pings while robot messages still arrive;
//! then 1,000 robot messages under 20 injected faults, none lost and none stored twice.
//! Against the mock DingTalk and the independent server (benches/independent/dingtalk_server.py).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::dingtalk::{DingTalkConfig, DingTalkFault};
use hermes_svc::mock_platform::MockConfig;
use serde_json::json;

use crate::detection::{trial, Detection, Running};
use crate::independent::Independent;
use crate::scratch;
use crate::wing::{
    self, detection_table, settle, stored, Chatter, Fault, Server, Side, Tally, Words,
};

const PING_S: u64 = 1;
/// dingtalk_server.py's default app.
const INDEPENDENT_ID: &str = "dingindependent";
const INDEPENDENT_SECRET: &str = "independent-secret";
/// A message not acked is pushed again after this, up to `RETRIES` times, on both servers
/// (DingTalk's own: once, after about 60 s, which would make the flood take an hour).
const ACK_TIMEOUT_S: u64 = 3;
const RETRIES: u32 = 6;

/// dingtalk_server.py, pushing again as the mock does.
fn start_independent(dir: &Path) -> Arc<Independent> {
    let (ack, retries) = (ACK_TIMEOUT_S.to_string(), RETRIES.to_string());
    let args = [
        "--ack-timeout-s",
        &ack,
        "--max-retries",
        &retries,
        "--system-ping-s",
        "5",
    ];
    wing::independent(dir, |python, log| {
        Independent::start_dingtalk(python, &args, log)
    })
}

/// The server's side of one run (a mock of its own for a mock run), the adapter's
/// `gateway.toml`, and its secret.
async fn adapter(server: &Server) -> (Side, String, String) {
    let dingtalk = DingTalkConfig {
        ack_timeout: Duration::from_secs(ACK_TIMEOUT_S),
        max_retries: RETRIES,
        ..DingTalkConfig::default()
    };
    let config = MockConfig {
        dingtalk,
        ..MockConfig::default()
    };
    let side = server.side(config).await;
    let (base, id, secret) = match &side {
        Side::Mock(m) => {
            let c = DingTalkConfig::default();
            (m.http_base(), c.client_id, c.client_secret)
        }
        Side::Independent(i) => (i.base(), INDEPENDENT_ID.into(), INDEPENDENT_SECRET.into()),
    };
    let toml = format!(
        "[[adapter]]\nname = \"d\"\nkind = \"dingtalk\"\nclient-id = \"{id}\"\nsecret-env = \"S\"\n\
         api-base = \"{base}\"\nping-interval = \"{PING_S}s\"\nbackoff-min = \"100ms\"\nbackoff-max = \"1s\"\n"
    );
    (side, toml, secret)
}

async fn fault(side: &Side, kind: &str) {
    match side {
        Side::Mock(m) => m.dingtalk_set_fault(match kind {
            "silence" => DingTalkFault::Silence,
            "deaf" => DingTalkFault::Deaf,
            "drop" => DingTalkFault::Drop,
            _ => DingTalkFault::Disconnect,
        }),
        Side::Independent(i) => {
            i.control("fault", json!({"kind": kind})).await;
        }
    }
}

async fn emit(side: &Side, n: usize) -> Vec<String> {
    match side {
        Side::Mock(m) => m.dingtalk_emit(n),
        Side::Independent(i) => i.emit_ids(json!({"count": n}), "msg_ids").await,
    }
}

async fn connections(side: &Side) -> u64 {
    match side {
        Side::Mock(m) => m.dingtalk_stats().connections,
        Side::Independent(i) => i.stat("connections").await,
    }
}

async fn redeliveries(side: &Side) -> u64 {
    match side {
        Side::Mock(m) => m.dingtalk_stats().redeliveries,
        Side::Independent(i) => i.stat("redeliveries").await,
    }
}

/// One detection trial; with no pong, robot messages keep coming (about 50 a second), so
/// only the pong deadline can tell.
async fn one(server: Server, f: Fault, dir: PathBuf) -> Detection {
    let (side, toml, secret) = adapter(&server).await;
    let _chatter = (f == Fault::NoPong).then(|| {
        let side = side.clone();
        Chatter::start(move || {
            let side = side.clone();
            async move { emit(&side, 1).await }
        })
    });
    let kind = match f {
        Fault::HalfOpen => "silence",
        Fault::NoPong => "deaf",
    };
    let inject = || {
        let side = side.clone();
        tokio::spawn(async move { fault(&side, kind).await });
    };
    let ping = Duration::from_secs(PING_S);
    trial(&toml, &secret, &dir, ping, inject, wing::reconnected).await
}

const FLOOD_FAULTS: [&str; 4] = ["silence", "deaf", "drop", "disconnect"];

/// 1,000 robot messages in twenty batches of fifty, each said as the next fault strikes every
/// open connection. Returns what was stored, how many were pushed again and the seconds.
async fn flood(server: Server, dir: &Path) -> (Tally, u64, f64) {
    let (side, toml, secret) = adapter(&server).await;
    let run = Running::start(&toml, &[&secret], dir);
    run.until(|v| v.state == State::Connected).await;
    let started = Instant::now();
    let mut ids = vec![];
    for i in 0..20 {
        let before = connections(&side).await;
        fault(&side, FLOOD_FAULTS[i % FLOOD_FAULTS.len()]).await;
        ids.extend(emit(&side, 50).await);
        while connections(&side).await <= before {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        run.until(|v| v.state == State::Connected).await;
        let end = Instant::now() + Duration::from_secs(30);
        // As first measured: the spool read again for each id (the published `took`
        // includes it).
        while Instant::now() < end && !ids.iter().all(|id| stored(dir).contains(id)) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let stored = settle(dir, &ids, Duration::from_secs(120)).await;
    let took = started.elapsed().as_secs_f64();
    let again = redeliveries(&side).await;
    run.stop().await;
    (Tally::of(&stored, &ids), again, took)
}

pub(crate) async fn dingtalk_figures() {
    let dir = scratch("dingtalk");
    let independent = start_independent(&dir);
    let words = Words {
        back_rows: false,
        ..Words::zombie("DingTalk Stream", "messages")
    };
    let ping = Duration::from_secs(PING_S);
    detection_table(&words, ping, &independent, &dir, one).await;
    println!("\n### DingTalk Stream: 1,000 robot messages under 20 injected faults\n");
    println!("| server | stored | lost | duplicated | pushed again | took, s |");
    println!("|---|---|---|---|---|---|");
    for (name, server) in Server::both(&independent) {
        let d = dir.join(format!("flood-{}", name.replace(' ', "-")));
        let (tally, again, took) = flood(server, &d).await;
        println!("| {name} | {} | {again} | {took:.1} |", tally.cells());
    }
    println!(
        "\nFaults, cycled five times each, on every open connection while 50 messages are said: \
         half-open (nothing more read or written), deaf (no pongs, no acks read), a drop without \
         a close frame, and SYSTEM `disconnect` (the server closes 10 s later). Ping interval \
         {PING_S} s; a message not acked within {ACK_TIMEOUT_S} s is pushed again.\n"
    );
    let _ = std::fs::remove_dir_all(dir);
}

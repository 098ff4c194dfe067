//! DingTalk Stream (issue 50): how many ping intervals the adapter takes to drop a half-open
//! connection, and one that stops answering its pings while robot messages still arrive;
//! then 1,000 robot messages under 20 injected faults, none lost and none stored twice.
//! Against the mock DingTalk and the independent server (benches/independent/dingtalk_server.py),
//! which this file runs itself.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::dingtalk::{DingTalkConfig, DingTalkFault};
use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use serde_json::{json, Value};

use crate::detection::{row, trial, Running};
use crate::independent::Independent;
use crate::scratch;

const PING_S: u64 = 1;
const TRIALS: usize = 30;
const AT_ONCE: usize = 10;
/// dingtalk_server.py's default app.
const INDEPENDENT_ID: &str = "dingindependent";
const INDEPENDENT_SECRET: &str = "independent-secret";
/// A message not acked is pushed again after this, up to `RETRIES` times, on both servers
/// (DingTalk's own: once, after about 60 s, which would make the flood take an hour).
const ACK_TIMEOUT_S: u64 = 3;
const RETRIES: u32 = 6;

/// dingtalk_server.py as a child process, stopped when dropped.
struct Indep {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Indep {
    fn start(python: &str, log: &Path) -> Indep {
        use std::io::BufRead;
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/benches/independent/dingtalk_server.py"
        );
        let mut child = Command::new(python)
            .arg(script)
            .args(["--port", "0", "--ack-timeout-s", &ACK_TIMEOUT_S.to_string()])
            .args([
                "--max-retries",
                &RETRIES.to_string(),
                "--system-ping-s",
                "5",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start dingtalk_server.py");
        let mut line = String::new();
        let _ = std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let base = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("{line:?}"))
            .to_owned();
        Indep {
            child,
            base,
            http: reqwest::Client::new(),
        }
    }

    async fn control(&self, path: &str, body: Value) -> Value {
        let r = self
            .http
            .post(format!("{}/_control/{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        r.json().await.unwrap()
    }

    async fn stats(&self) -> Value {
        let r = self
            .http
            .get(format!("{}/_independent/stats", self.base))
            .send()
            .await
            .unwrap();
        r.json().await.unwrap()
    }
}

impl Drop for Indep {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Clone)]
enum Server {
    Mock,
    Independent(Arc<Indep>),
}

/// The server's side of one run: a mock of its own for a mock run.
struct Side {
    mock: Option<Arc<MockPlatform>>,
    server: Server,
}

impl Side {
    async fn new(server: &Server) -> (Side, String, String) {
        let mock = match server {
            Server::Mock => {
                let dingtalk = DingTalkConfig {
                    ack_timeout: Duration::from_secs(ACK_TIMEOUT_S),
                    max_retries: RETRIES,
                    ..DingTalkConfig::default()
                };
                let config = MockConfig {
                    dingtalk,
                    ..MockConfig::default()
                };
                Some(Arc::new(MockPlatform::start(config).await.unwrap()))
            }
            Server::Independent(_) => None,
        };
        let (base, id, secret) = match (&mock, server) {
            (Some(m), _) => {
                let c = DingTalkConfig::default();
                (m.http_base(), c.client_id, c.client_secret)
            }
            (None, Server::Independent(i)) => (
                i.base.clone(),
                INDEPENDENT_ID.into(),
                INDEPENDENT_SECRET.into(),
            ),
            (None, Server::Mock) => unreachable!("a mock run has its mock"),
        };
        let toml = format!(
            "[[adapter]]\nname = \"d\"\nkind = \"dingtalk\"\nclient-id = \"{id}\"\nsecret-env = \"S\"\n\
             api-base = \"{base}\"\nping-interval = \"{PING_S}s\"\nbackoff-min = \"100ms\"\nbackoff-max = \"1s\"\n"
        );
        (
            Side {
                mock,
                server: server.clone(),
            },
            toml,
            secret,
        )
    }

    async fn fault(&self, kind: &str) {
        match (&self.mock, &self.server) {
            (Some(m), _) => m.dingtalk_set_fault(match kind {
                "silence" => DingTalkFault::Silence,
                "deaf" => DingTalkFault::Deaf,
                "drop" => DingTalkFault::Drop,
                _ => DingTalkFault::Disconnect,
            }),
            (None, Server::Independent(i)) => {
                i.control("fault", json!({"kind": kind})).await;
            }
            (None, Server::Mock) => {}
        }
    }

    async fn emit(&self, n: usize) -> Vec<String> {
        match (&self.mock, &self.server) {
            (Some(m), _) => m.dingtalk_emit(n),
            (None, Server::Independent(i)) => {
                let v = i.control("emit", json!({"count": n})).await;
                v["msg_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect()
            }
            (None, Server::Mock) => vec![],
        }
    }

    async fn connections(&self) -> u64 {
        match (&self.mock, &self.server) {
            (Some(m), _) => m.dingtalk_stats().connections,
            (None, Server::Independent(i)) => i.stats().await["connections"].as_u64().unwrap_or(0),
            (None, Server::Mock) => 0,
        }
    }

    async fn redeliveries(&self) -> u64 {
        match (&self.mock, &self.server) {
            (Some(m), _) => m.dingtalk_stats().redeliveries,
            (None, Server::Independent(i)) => i.stats().await["redeliveries"].as_u64().unwrap_or(0),
            (None, Server::Mock) => 0,
        }
    }
}

/// One detection trial: the fault `kind` on the adapter's connection; with `deaf`, robot
/// messages keep coming (about 50 a second), so only the pong deadline can tell.
async fn one(server: Server, kind: &'static str, dir: &Path) -> (f64, bool) {
    let (side, toml, secret) = Side::new(&server).await;
    let side = Arc::new(side);
    let chatter = (kind == "deaf").then(|| {
        let side = side.clone();
        tokio::spawn(async move {
            loop {
                side.emit(1).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    });
    let inject = {
        let side = side.clone();
        move || {
            tokio::spawn(async move { side.fault(kind).await });
        }
    };
    let d = trial(
        &toml,
        &secret,
        dir,
        Duration::from_secs(PING_S),
        inject,
        |v, before| v.attempts > before.attempts && v.state == State::Connected,
    )
    .await;
    if let Some(c) = chatter {
        c.abort();
    }
    (
        d.detected.as_secs_f64() / PING_S as f64,
        d.error.contains("zombie"),
    )
}

async fn trials(server: Server, kind: &'static str, dir: &Path) -> (Vec<f64>, usize) {
    let at_once = if matches!(server, Server::Mock) {
        AT_ONCE
    } else {
        1
    };
    let (mut detect, mut right) = (vec![], 0);
    for round in 0..TRIALS / at_once {
        let runs: Vec<_> = (0..at_once)
            .map(|i| {
                let (d, server) = (dir.join(format!("{kind}-{round}-{i}")), server.clone());
                tokio::spawn(async move { one(server, kind, &d).await })
            })
            .collect();
        for r in runs {
            let (d, ok) = r.await.unwrap();
            detect.push(d);
            right += usize::from(ok);
        }
        if let Server::Independent(i) = &server {
            i.control("clear", json!({})).await;
        }
    }
    (detect, right)
}

fn stored(dir: &Path) -> Vec<String> {
    hermes_svc::gateway::spool::read(&dir.join("inbox"), None)
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

const FLOOD_FAULTS: [&str; 4] = ["silence", "deaf", "drop", "disconnect"];

/// 1,000 robot messages in twenty batches of fifty, each said as the next fault strikes every
/// open connection. Returns (stored, lost, duplicated, pushed again, seconds).
async fn flood(server: Server, dir: &Path) -> (usize, usize, usize, u64, f64) {
    let (side, toml, secret) = Side::new(&server).await;
    let run = Running::start(&toml, Some(&secret), dir);
    run.until(|v| v.state == State::Connected).await;
    let started = Instant::now();
    let mut ids = vec![];
    for i in 0..20 {
        let before = side.connections().await;
        side.fault(FLOOD_FAULTS[i % FLOOD_FAULTS.len()]).await;
        ids.extend(side.emit(50).await);
        while side.connections().await <= before {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        run.until(|v| v.state == State::Connected).await;
        let end = Instant::now() + Duration::from_secs(30);
        while Instant::now() < end && !ids.iter().all(|id| stored(dir).contains(id)) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let end = Instant::now() + Duration::from_secs(120);
    let s = loop {
        let s = stored(dir);
        if ids.iter().all(|id| s.contains(id)) || Instant::now() > end {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let took = started.elapsed().as_secs_f64();
    let again = side.redeliveries().await;
    run.stop().await;
    let unique: std::collections::HashSet<&String> = s.iter().collect();
    let lost = ids.iter().filter(|id| !unique.contains(id)).count();
    (s.len(), lost, s.len() - unique.len(), again, took)
}

pub(crate) async fn dingtalk_figures() {
    let dir = scratch("dingtalk");
    let python = Independent::python();
    let independent = Arc::new(Indep::start(&python, &dir.join("independent.log")));
    let servers = [
        ("built-in mock", Server::Mock),
        ("independent server", Server::Independent(independent)),
    ];
    println!(
        "### DingTalk Stream: detection in units of the ping interval ({TRIALS} trials each, ping \
         interval {PING_S} s, pong deadline 0.2 interval)\n"
    );
    println!("| server | figure | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|---|");
    for (name, server) in &servers {
        let half = trials(server.clone(), "silence", &dir.join("half-open")).await;
        let deaf = trials(server.clone(), "deaf", &dir.join("no-pong")).await;
        row(
            &format!("{name} | half-open: detection, in ping intervals"),
            &half.0,
            2,
            "every trial ≤ 1.20",
        );
        row(
            &format!("{name} | no pong (messages flowing): detection, in ping intervals"),
            &deaf.0,
            2,
            "every trial ≤ 1.20",
        );
        println!(
            "| {name} | dropped as a zombie | half-open {}/{TRIALS}, no pong {}/{TRIALS} | | | |",
            half.1, deaf.1
        );
    }
    println!("\n### DingTalk Stream: 1,000 robot messages under 20 injected faults\n");
    println!("| server | stored | lost | duplicated | pushed again | took, s |");
    println!("|---|---|---|---|---|---|");
    for (name, server) in servers {
        let d = dir.join(format!("flood-{}", name.replace(' ', "-")));
        let (stored, lost, dup, again, took) = flood(server, &d).await;
        println!("| {name} | {stored} | {lost} | {dup} | {again} | {took:.1} |");
    }
    println!(
        "\nFaults, cycled five times each, on every open connection while 50 messages are said: \
         half-open (nothing more read or written), deaf (no pongs, no acks read), a drop without \
         a close frame, and SYSTEM `disconnect` (the server closes 10 s later). Ping interval \
         {PING_S} s; a message not acked within {ACK_TIMEOUT_S} s is pushed again.\n"
    );
    let _ = std::fs::remove_dir_all(dir);
}

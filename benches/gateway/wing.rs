//! What the wings' sections share: trials run in rounds, the two servers a WebSocket wing is
//! measured against (the built-in mock and its independent server), its detection table, and
//! what a flood leaves in the spool. Each wing's file keeps what is its own: the adapter's
//! `gateway.toml`, how a fault is made and what the server is asked.
//!
//! `HSV_BENCH_TRIALS` (30) is how many trials each detection figure takes (the zombie
//! section's 50 excepted), so a quick run can check a section still works.

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::gateway::health::{ComponentView, State};
use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use serde_json::json;

use crate::detection::{row, Detection};
use crate::independent::Independent;

/// How many trials each detection figure takes: `HSV_BENCH_TRIALS`, else 30.
pub(crate) fn trial_count() -> usize {
    std::env::var("HSV_BENCH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(30)
}

/// `n` trials, `at_once` of them at a time, each `one(dir/ROUND-I)` in a task of its own; what
/// they gave, in order.
pub(crate) async fn in_rounds<T, Fut>(
    n: usize,
    at_once: usize,
    dir: &Path,
    one: impl Fn(PathBuf) -> Fut,
) -> Vec<T>
where
    T: Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    let at_once = at_once.clamp(1, n.max(1));
    let mut out = Vec::with_capacity(n);
    for round in 0..n / at_once {
        let runs: Vec<_> = (0..at_once)
            .map(|i| tokio::spawn(one(dir.join(format!("{round}-{i}")))))
            .collect();
        for r in runs {
            out.push(r.await.unwrap());
        }
    }
    out
}

/// A detection figure's trials: the latencies in probe intervals, the reconnect times in ms,
/// and how many gave the expected reason.
pub(crate) struct Trials {
    pub(crate) detect: Vec<f64>,
    pub(crate) back: Vec<f64>,
    pub(crate) right: usize,
}

impl Trials {
    pub(crate) fn of(ds: &[Detection], interval: Duration, reason: &str) -> Trials {
        Trials {
            detect: ds
                .iter()
                .map(|d| d.detected.as_secs_f64() / interval.as_secs_f64())
                .collect(),
            back: ds.iter().map(|d| d.back.as_secs_f64() * 1e3).collect(),
            right: ds.iter().filter(|d| d.error.contains(reason)).count(),
        }
    }
}

/// The faults a WebSocket wing's detection is timed on.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Fault {
    /// Nothing more written or read.
    HalfOpen,
    /// Messages keep coming; the client's pings go unanswered.
    NoPong,
}

/// One of benches/independent's servers, started by `start` with its log in the section's
/// scratch directory `dir`.
pub(crate) fn independent(
    dir: &Path,
    start: impl FnOnce(&str, &Path) -> Independent,
) -> Arc<Independent> {
    Arc::new(start(&Independent::python(), &dir.join("independent.log")))
}

/// What the adapter connects to: a mock of its own per run, or the one independent server
/// (every run its own connection; a fault there strikes every socket it has).
#[derive(Clone)]
pub(crate) enum Server {
    Mock,
    Independent(Arc<Independent>),
}

impl Server {
    /// The two servers of a section, as its tables name them.
    pub(crate) fn both(independent: &Arc<Independent>) -> [(&'static str, Server); 2] {
        [
            ("built-in mock", Server::Mock),
            (
                "independent server",
                Server::Independent(independent.clone()),
            ),
        ]
    }

    /// Trials at once: ten against mocks of their own, one against the independent server
    /// (a fault there applies to every open socket).
    pub(crate) fn at_once(&self) -> usize {
        match self {
            Server::Mock => 10,
            Server::Independent(_) => 1,
        }
    }

    /// One run's side of it: against the mock, a mock of its own started with `config`.
    pub(crate) async fn side(&self, config: MockConfig) -> Side {
        match self {
            Server::Mock => Side::Mock(Arc::new(MockPlatform::start(config).await.unwrap())),
            Server::Independent(i) => Side::Independent(i.clone()),
        }
    }
}

/// One run's server.
#[derive(Clone)]
pub(crate) enum Side {
    Mock(Arc<MockPlatform>),
    Independent(Arc<Independent>),
}

/// Messages said on the server every 20 ms (about 50 a second) until dropped, so that a
/// connection whose pongs stopped is not silent and only the pong deadline can tell.
pub(crate) struct Chatter(tokio::task::JoinHandle<()>);

impl Chatter {
    pub(crate) fn start<Fut>(say: impl Fn() -> Fut + Send + 'static) -> Chatter
    where
        Fut: Future + Send,
    {
        Chatter(tokio::spawn(async move {
            loop {
                say().await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }))
    }
}

impl Drop for Chatter {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether the adapter is connected again on a new attempt since `before`: the end of a
/// trial's drop.
pub(crate) fn reconnected(v: &ComponentView, before: &ComponentView) -> bool {
    v.attempts > before.attempts && v.state == State::Connected
}

/// The words of a WebSocket wing's detection table.
pub(crate) struct Words {
    /// The platform, as the section's title names it.
    pub(crate) title: &'static str,
    /// What the adapter waits for after a ping ("pong", "answer").
    pub(crate) answer: &'static str,
    /// What keeps coming while pongs are stopped ("envelopes").
    pub(crate) flowing: &'static str,
    /// What the adapter is when it is back ("connected", "subscribed").
    pub(crate) back: &'static str,
    /// What the last error says after a right drop, half-open and no pong.
    pub(crate) reasons: [&'static str; 2],
    /// How the count of right drops is named ("dropped as a zombie").
    pub(crate) verdict: &'static str,
    /// Whether the table shows the reconnect times.
    pub(crate) back_rows: bool,
}

impl Words {
    /// The words most wings' tables use: pongs, `connected` again, both drops called a zombie,
    /// with the reconnect times shown.
    pub(crate) const fn zombie(title: &'static str, flowing: &'static str) -> Words {
        Words {
            title,
            answer: "pong",
            flowing,
            back: "connected",
            reasons: ["zombie", "zombie"],
            verdict: "dropped as a zombie",
            back_rows: true,
        }
    }
}

/// A WebSocket wing's detection table: for each server, `trials` timed half-open and with no
/// pong, at a ping interval of `ping`. `one(server, fault, dir)` is one trial; against the
/// independent server each is followed by its faults cleared.
pub(crate) async fn detection_table<Fut>(
    words: &Words,
    ping: Duration,
    independent: &Arc<Independent>,
    dir: &Path,
    one: impl Fn(Server, Fault, PathBuf) -> Fut + Copy,
) where
    Fut: Future<Output = Detection> + Send + 'static,
{
    let (n, ping_s) = (trial_count(), ping.as_secs());
    println!(
        "### {}: detection in units of the ping interval ({n} trials each, ping interval \
         {ping_s} s, {} deadline 0.2 interval)\n",
        words.title, words.answer
    );
    println!("| server | figure | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|---|");
    let bound = "every trial ≤ 1.20";
    for (name, server) in Server::both(independent) {
        let mut got = vec![];
        for (fault, sub, reason) in [
            (Fault::HalfOpen, "half-open", words.reasons[0]),
            (Fault::NoPong, "no-pong", words.reasons[1]),
        ] {
            let ds = in_rounds(n, server.at_once(), &dir.join(sub), |d| {
                let server = server.clone();
                let trial = one(server.clone(), fault, d);
                async move {
                    let d = trial.await;
                    if let Server::Independent(i) = &server {
                        i.control("clear", json!({})).await;
                    }
                    d
                }
            })
            .await;
            got.push(Trials::of(&ds, ping, reason));
        }
        let (half, deaf) = (&got[0], &got[1]);
        let fig = |what: &str| format!("{name} | {what}");
        row(
            &fig("half-open: detection, in ping intervals"),
            &half.detect,
            2,
            bound,
        );
        row(
            &fig(&format!(
                "no pong ({} flowing): detection, in ping intervals",
                words.flowing
            )),
            &deaf.detect,
            2,
            bound,
        );
        if words.back_rows {
            let again = format!("drop to {} again, ms", words.back);
            row(&fig(&format!("half-open: {again}")), &half.back, 1, "");
            row(&fig(&format!("no pong: {again}")), &deaf.back, 1, "");
        }
        println!(
            "| {name} | {} | half-open {}/{n}, no pong {}/{n} | | | |",
            words.verdict, half.right, deaf.right
        );
    }
}

/// The ids of the events the spool in `dir` holds, in the order stored.
pub(crate) fn stored(dir: &Path) -> Vec<String> {
    hermes_svc::gateway::spool::read(&dir.join("inbox"), None)
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

/// Whether every one of `ids` is in the spool in `dir`.
pub(crate) fn all_stored(dir: &Path, ids: &[String]) -> bool {
    let s: HashSet<String> = stored(dir).into_iter().collect();
    ids.iter().all(|id| s.contains(id))
}

/// Wait until every one of `ids` is in the spool in `dir`, or `limit` has passed; what it
/// held when last read.
pub(crate) async fn settle(dir: &Path, ids: &[String], limit: Duration) -> Vec<String> {
    let end = Instant::now() + limit;
    loop {
        let s = stored(dir);
        if ids.iter().all(|id| s.contains(id)) || Instant::now() > end {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait until every one of `ids` is in the spool in `dir`; panics after `limit`.
pub(crate) async fn wait_stored(dir: &Path, ids: &[String], limit: Duration) {
    let end = Instant::now() + limit;
    loop {
        let s = stored(dir);
        if ids.iter().all(|id| s.contains(id)) {
            return;
        }
        assert!(Instant::now() < end, "{} not all stored", dir.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a flood left: of the `ids` said, how many events were stored, lost and stored twice.
pub(crate) struct Tally {
    pub(crate) stored: usize,
    pub(crate) lost: usize,
    pub(crate) duplicated: usize,
}

impl Tally {
    pub(crate) fn of(stored: &[String], ids: &[String]) -> Tally {
        let unique: HashSet<&String> = stored.iter().collect();
        Tally {
            stored: stored.len(),
            lost: ids.iter().filter(|id| !unique.contains(id)).count(),
            duplicated: stored.len() - unique.len(),
        }
    }

    /// The table's `stored | lost | duplicated` cells.
    pub(crate) fn cells(&self) -> String {
        format!("{} | {} | {}", self.stored, self.lost, self.duplicated)
    }
}

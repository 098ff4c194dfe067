//! Telegram and Weixin (issue 14): how long a hung poll takes to be dropped, and what 1,000
//! updates under 20 injected faults leave in the spool. Each adapter runs in this process, as in
//! the zombie and Feishu sections, against the built-in mock and against the independent
//! server (benches/independent/poll_server.py), which was written from the platforms' docs and
//! not from the adapters.
//!
//! A hung poll is made the way a half-open socket makes one: the server reads the request and
//! never answers. The fault is armed while a poll is held, then one message is emitted, which
//! answers the held poll; the adapter stores it and polls again, and that poll hangs.
//! Detection is timed from the server counting the hung poll (the mock's count is read in
//! this process; the independent server's over HTTP, every millisecond, so its start is late
//! by that request's round trip) to the adapter leaving `connected`: the bound is the poll's
//! deadline, `poll-timeout` + `poll-grace`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::config::Secret;
use hermes_svc::gateway::health::State;
use hermes_svc::gateway::spool;
use hermes_svc::mock_platform::telegram::{TelegramConfig, TelegramFault};
use hermes_svc::mock_platform::weixin::{WeixinConfig, WeixinFault};
use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use hermes_svc::platform::weixin::WeixinLogin;
use serde_json::json;

use crate::detection::{row, Running};
use crate::independent::Independent;
use crate::scratch;

/// The server's wait for a poll with nothing to say, and the grace after it.
const TIMEOUT_S: u64 = 2;
const GRACE_S: u64 = 1;
const TRIALS: usize = 30;
/// Mock trials run this many at a time.
const AT_ONCE: usize = 10;
const TELEGRAM_TOKEN: &str = "7000000001:AAbench-independent-telegram";
const WEIXIN_TOKEN: &str = "bench-independent-weixin-token";

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Telegram,
    Weixin,
}

/// The faults a run injects, in the order it cycles through them.
#[derive(Clone, Copy, Debug)]
enum Fault {
    Hang,
    ServerError,
    RateLimit,
    Duplicate,
    /// Telegram: a 409 from another poller. Weixin: the server forgets its cursors.
    ConflictOrReset,
}

const FAULTS: [Fault; 5] = [
    Fault::Hang,
    Fault::ServerError,
    Fault::RateLimit,
    Fault::Duplicate,
    Fault::ConflictOrReset,
];

enum Server {
    Mock(Arc<MockPlatform>),
    Independent(Independent),
}

/// One platform on one server, with a profile directory whose adapter polls it.
struct Platform {
    kind: Kind,
    server: Server,
}

impl Platform {
    async fn start(kind: Kind, independent: Option<&str>, dir: &Path) -> Platform {
        std::fs::create_dir_all(dir).unwrap();
        let server = match independent {
            None => Server::Mock(Arc::new(
                MockPlatform::start(MockConfig {
                    weixin: WeixinConfig {
                        longpolling_timeout_ms: TIMEOUT_S * 1000,
                        ..WeixinConfig::default()
                    },
                    ..MockConfig::default()
                })
                .await
                .unwrap(),
            )),
            Some(python) => {
                let ms = (TIMEOUT_S * 1000).to_string();
                Server::Independent(Independent::start_poll(
                    python,
                    &[
                        "--telegram-token",
                        TELEGRAM_TOKEN,
                        "--weixin-token",
                        WEIXIN_TOKEN,
                        "--weixin-poll-timeout-ms",
                        &ms,
                    ],
                    &dir.join("server.log"),
                ))
            }
        };
        Platform { kind, server }
    }

    fn base(&self) -> String {
        match &self.server {
            Server::Mock(m) => m.http_base(),
            Server::Independent(i) => i.base(),
        }
    }

    fn token(&self) -> String {
        match (&self.server, self.kind) {
            (Server::Mock(_), Kind::Telegram) => TelegramConfig::default().token,
            (Server::Mock(_), Kind::Weixin) => WeixinConfig::default().token,
            (Server::Independent(_), Kind::Telegram) => TELEGRAM_TOKEN.into(),
            (Server::Independent(_), Kind::Weixin) => WEIXIN_TOKEN.into(),
        }
    }

    /// Start the adapter, with the login a Weixin adapter reads from its profile.
    fn adapter(&self, dir: &Path) -> Running {
        let (kind, token_env) = match self.kind {
            Kind::Telegram => ("telegram", "token-env = \"TG\"\n"),
            Kind::Weixin => ("weixin", ""),
        };
        let toml = format!(
            "[[adapter]]\nname = \"p\"\nkind = \"{kind}\"\n{token_env}api-base = \"{}\"\n\
             poll-timeout = \"{TIMEOUT_S}s\"\npoll-grace = \"{GRACE_S}s\"\n\
             backoff-min = \"100ms\"\nbackoff-max = \"1s\"\n",
            self.base()
        );
        if self.kind == Kind::Weixin {
            WeixinLogin::new(
                Secret::new(self.token()),
                self.base(),
                "bench@im.bot".into(),
                "bench@im.wechat".into(),
            )
            .write(&dir.join("weixin/p.json"))
            .unwrap();
        }
        let secret = (self.kind == Kind::Telegram).then(|| self.token());
        Running::start(&toml, secret.as_deref(), dir)
    }

    /// `n` messages; their spool ids, in order.
    async fn emit(&self, n: usize) -> Vec<String> {
        match (&self.server, self.kind) {
            (Server::Mock(m), Kind::Telegram) => {
                m.telegram_emit(n).iter().map(i64::to_string).collect()
            }
            (Server::Mock(m), Kind::Weixin) => m.weixin_emit(n),
            (Server::Independent(i), kind) => {
                let (path, list, id) = match kind {
                    Kind::Telegram => ("telegram", "updates", "update_id"),
                    Kind::Weixin => ("weixin", "messages", "message_id"),
                };
                let answer = i.control(&format!("{path}/emit?n={n}"), json!({})).await;
                answer[list]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|u| match &u[id] {
                        serde_json::Value::String(s) => s.clone(),
                        v => v.to_string(),
                    })
                    .collect()
            }
        }
    }

    /// Arm `fault` for the next poll (`Hang` with `lasting`: until [`Platform::clear`]).
    async fn arm(&self, fault: Fault, lasting: bool) {
        match (&self.server, self.kind) {
            (Server::Mock(m), Kind::Telegram) => {
                let f = match fault {
                    Fault::Hang => TelegramFault::HangPolls,
                    Fault::ServerError => TelegramFault::ServerError,
                    Fault::RateLimit => TelegramFault::RateLimited { retry_after: 1 },
                    Fault::Duplicate => TelegramFault::Duplicate,
                    Fault::ConflictOrReset => TelegramFault::OtherPoller,
                };
                match lasting {
                    true => m.telegram_set_fault(f),
                    false => m.telegram_set_fault_for(f, 1),
                }
            }
            (Server::Mock(m), Kind::Weixin) => {
                let f = match fault {
                    Fault::Hang => WeixinFault::HangPolls,
                    Fault::ServerError => WeixinFault::ServerError,
                    Fault::RateLimit => WeixinFault::RateLimited,
                    Fault::Duplicate => WeixinFault::Duplicate,
                    Fault::ConflictOrReset => WeixinFault::CursorReset,
                };
                match lasting {
                    true => m.weixin_set_fault(f),
                    false => m.weixin_set_fault_for(f, 1),
                }
            }
            (Server::Independent(i), kind) => {
                let (path, poll) = match kind {
                    Kind::Telegram => ("telegram", "getupdates"),
                    Kind::Weixin => ("weixin", "getupdates"),
                };
                let mut body = match (fault, kind) {
                    (Fault::Hang, _) => json!({"kind": "hang"}),
                    (Fault::ServerError, _) => json!({"kind": "server_error", "status": 502}),
                    (Fault::RateLimit, _) => json!({"kind": "rate_limit", "retry_after": 1}),
                    (Fault::Duplicate, _) => json!({"kind": "duplicate"}),
                    (Fault::ConflictOrReset, Kind::Telegram) => json!({"kind": "conflict"}),
                    (Fault::ConflictOrReset, Kind::Weixin) => json!({"kind": "cursor_reset"}),
                };
                if !matches!(fault, Fault::ConflictOrReset if kind == Kind::Weixin) {
                    body["methods"] = json!([poll]);
                    if !lasting {
                        body["count"] = json!(1);
                    }
                }
                i.control(&format!("{path}/fault"), body).await;
            }
        }
    }

    async fn clear(&self) {
        match (&self.server, self.kind) {
            (Server::Mock(m), Kind::Telegram) => m.telegram_clear_fault(),
            (Server::Mock(m), Kind::Weixin) => m.weixin_clear_fault(),
            (Server::Independent(i), kind) => {
                let path = match kind {
                    Kind::Telegram => "telegram/fault",
                    Kind::Weixin => "weixin/fault",
                };
                i.control(path, json!({"kind": "none"})).await;
            }
        }
    }

    /// Polls the server has held without an answer.
    async fn hung(&self) -> u64 {
        match (&self.server, self.kind) {
            (Server::Mock(m), Kind::Telegram) => m.telegram_stats().hung,
            (Server::Mock(m), Kind::Weixin) => m.weixin_stats().hung,
            (Server::Independent(i), kind) => {
                let key = match kind {
                    Kind::Telegram => "telegram_hung",
                    Kind::Weixin => "weixin_hung",
                };
                i.stats().await[key].as_u64().unwrap_or(0)
            }
        }
    }

    /// Polls the server has seen.
    async fn polls(&self) -> u64 {
        match (&self.server, self.kind) {
            (Server::Mock(m), Kind::Telegram) => m.telegram_stats().polls,
            (Server::Mock(m), Kind::Weixin) => m.weixin_stats().polls,
            (Server::Independent(i), kind) => {
                let key = match kind {
                    Kind::Telegram => "telegram_polls",
                    Kind::Weixin => "weixin_polls",
                };
                i.stats().await[key].as_u64().unwrap_or(0)
            }
        }
    }
}

/// The spool's event ids in `dir`, in order.
pub(crate) fn stored(dir: &Path) -> Vec<String> {
    spool::read(&dir.join("inbox"), None)
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.id)
        .collect()
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

/// One hung-poll trial: seconds from the server holding the poll it will never answer to the
/// adapter dropping it, and whether the reason given was a dead connection.
async fn hung_poll(kind: Kind, independent: Option<String>, dir: &Path) -> (f64, bool) {
    let platform = Platform::start(kind, independent.as_deref(), dir).await;
    let run = platform.adapter(dir);
    let first = platform.emit(1).await;
    wait_stored(dir, &first, Duration::from_secs(20)).await;
    run.until(|v| v.state == State::Connected).await;
    // A poll is held now; wait into its hold at a random point, then hang the next one.
    tokio::time::sleep(Duration::from_millis(100 + fastrand::u64(0..1000))).await;
    platform.arm(Fault::Hang, true).await;
    let hung = platform.hung().await;
    let second = platform.emit(1).await;
    // The next poll follows once the message is durable in the spool (its fsync can take a
    // second on a loaded disk), so the clock starts when the server holds that poll.
    let released = loop {
        if platform.hung().await > hung {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let dropped = run.until(|v| v.state != State::Connected).await;
    let error = run.view().last_error.unwrap_or_default();
    platform.clear().await;
    let third = platform.emit(1).await;
    let all: Vec<String> = [first, second, third].concat();
    wait_stored(dir, &all, Duration::from_secs(20)).await;
    assert_eq!(stored(dir), all, "each message once, in order");
    run.stop().await;
    (
        (dropped - released).as_secs_f64(),
        error.contains("dead connection"),
    )
}

/// 1,000 messages in twenty batches of fifty, each batch with the next fault of [`FAULTS`]
/// armed for one poll; then what the spool holds. Returns (stored, lost, duplicated, in order,
/// seconds).
async fn flood(
    kind: Kind,
    independent: Option<String>,
    dir: &Path,
) -> (usize, usize, usize, bool, f64) {
    let platform = Platform::start(kind, independent.as_deref(), dir).await;
    let run = platform.adapter(dir);
    let started = Instant::now();
    let mut ids = vec![];
    for i in 0..20 {
        platform.arm(FAULTS[i % FAULTS.len()], false).await;
        let polls = platform.polls().await;
        ids.extend(platform.emit(50).await);
        // Let the fault strike (two more polls) before the next is armed over it.
        let end = Instant::now() + Duration::from_secs(60);
        while platform.polls().await < polls + 2 && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    wait_stored(dir, &ids, Duration::from_secs(120)).await;
    let took = started.elapsed().as_secs_f64();
    let s = stored(dir);
    run.stop().await;
    let unique: std::collections::HashSet<&String> = s.iter().collect();
    let lost = ids.iter().filter(|id| !unique.contains(id)).count();
    (s.len(), lost, s.len() - unique.len(), s == ids, took)
}

pub(crate) async fn long_poll_figures() {
    let python = Independent::python();
    let dir = scratch("poll");
    println!(
        "### Telegram and Weixin: hung-poll detection ({TRIALS} trials each, poll-timeout \
         {TIMEOUT_S} s + poll-grace {GRACE_S} s = a {} s deadline)\n",
        TIMEOUT_S + GRACE_S
    );
    println!("| adapter, server | p50, s | p99, s | max, s | target |");
    println!("|---|---|---|---|---|");
    let cases = [
        (Kind::Telegram, false, "telegram, mock"),
        (Kind::Telegram, true, "telegram, independent"),
        (Kind::Weixin, false, "weixin, mock"),
        (Kind::Weixin, true, "weixin, independent"),
    ];
    let mut reasons = vec![];
    for (kind, independent, name) in cases {
        let (mut took, mut right) = (vec![], 0);
        // The independent server is one Python process per trial: ten at once on two cores
        // would time the machine's load, so those trials run one at a time.
        let at_once = if independent { 1 } else { AT_ONCE };
        for round in 0..TRIALS / at_once {
            let trials: Vec<_> = (0..at_once)
                .map(|i| {
                    let d = dir.join(format!("{name}-{round}-{i}").replace([',', ' '], ""));
                    let py = independent.then(|| python.clone());
                    tokio::spawn(async move { hung_poll(kind, py, &d).await })
                })
                .collect();
            for t in trials {
                let (s, reason) = t.await.unwrap();
                took.push(s);
                right += usize::from(reason);
            }
        }
        let bound = format!("every trial ≤ {}.05", TIMEOUT_S + GRACE_S);
        row(name, &took, 3, &bound);
        reasons.push(format!("{name} {right}/{TRIALS}"));
    }
    println!(
        "\nDropped as \"a dead connection\": {}.\n",
        reasons.join(", ")
    );

    println!("### Telegram and Weixin: 1,000 messages under 20 injected faults\n");
    println!("| adapter, server | stored | lost | duplicated | in order | took, s |");
    println!("|---|---|---|---|---|---|");
    let runs: Vec<_> = cases
        .iter()
        .map(|&(kind, independent, name)| {
            let d = dir.join(format!("flood-{name}").replace([',', ' '], ""));
            let py = independent.then(|| python.clone());
            (name, tokio::spawn(async move { flood(kind, py, &d).await }))
        })
        .collect();
    for (name, run) in runs {
        let (stored, lost, dup, order, took) = run.await.unwrap();
        println!("| {name} | {stored} | {lost} | {dup} | {order} | {took:.1} |");
    }
    println!(
        "\nFaults, cycled four times each: a hung poll, a 502, a rate limit (Telegram 429 \
         with retry_after 1; Weixin -2, which the adapter waits out for 30 s), a duplicated \
         batch, and (Telegram) a 409 from another poller or (Weixin) a cursor reset.\n"
    );
    let _ = std::fs::remove_dir_all(dir);
}

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

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::config::Secret;
use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::telegram::{TelegramConfig, TelegramFault};
use hermes_svc::mock_platform::weixin::{WeixinConfig, WeixinFault};
use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use hermes_svc::platform::weixin::WeixinLogin;
use serde_json::json;

use crate::detection::Running;
use crate::hung::{self, Holds};
use crate::independent::Independent;
use crate::scratch;
use crate::wing::{stored, trial_count, wait_stored, Tally};

/// The server's wait for a poll with nothing to say, and the grace after it.
const TIMEOUT_S: u64 = 2;
const GRACE_S: u64 = 1;
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
        Running::start(&toml, secret.as_deref().as_slice(), dir)
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
                i.stat(key).await
            }
        }
    }
}

/// The hung-poll trial's view of the platform.
impl Holds for Platform {
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

    async fn hang(&self) {
        self.arm(Fault::Hang, true).await;
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

    async fn hung(&self) -> u64 {
        match (&self.server, self.kind) {
            (Server::Mock(m), Kind::Telegram) => m.telegram_stats().hung,
            (Server::Mock(m), Kind::Weixin) => m.weixin_stats().hung,
            (Server::Independent(i), kind) => {
                let key = match kind {
                    Kind::Telegram => "telegram_hung",
                    Kind::Weixin => "weixin_hung",
                };
                i.stat(key).await
            }
        }
    }
}

/// One hung-poll trial: seconds from the server holding the poll it will never answer to the
/// adapter dropping it, and whether the reason given was a dead connection.
async fn hung_poll(kind: Kind, independent: Option<String>, dir: PathBuf) -> (f64, bool) {
    let platform = Platform::start(kind, independent.as_deref(), &dir).await;
    let run = platform.adapter(&dir);
    let first = platform.emit(1).await;
    wait_stored(&dir, &first, Duration::from_secs(20)).await;
    run.until(|v| v.state == State::Connected).await;
    hung::timed(&platform, run, &dir, first).await
}

/// 1,000 messages in twenty batches of fifty, each batch with the next fault of [`FAULTS`]
/// armed for one poll; then what the spool holds. Returns what was stored, whether in order,
/// and the seconds.
async fn flood(kind: Kind, independent: Option<String>, dir: &Path) -> (Tally, bool, f64) {
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
    (Tally::of(&s, &ids), s == ids, took)
}

pub(crate) async fn long_poll_figures() {
    let python = Independent::python();
    let dir = scratch("poll");
    println!(
        "### Telegram and Weixin: hung-poll detection ({} trials each, poll-timeout \
         {TIMEOUT_S} s + poll-grace {GRACE_S} s = a {} s deadline)\n",
        trial_count(),
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
        let d = dir.join(name.replace([',', ' '], ""));
        let one = |d| hung_poll(kind, independent.then(|| python.clone()), d);
        let deadline = TIMEOUT_S + GRACE_S;
        reasons.push(hung::row_of(name, independent, deadline, &d, one).await);
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
        let (tally, order, took) = run.await.unwrap();
        println!("| {name} | {} | {order} | {took:.1} |", tally.cells());
    }
    println!(
        "\nFaults, cycled four times each: a hung poll, a 502, a rate limit (Telegram 429 \
         with retry_after 1; Weixin -2, which the adapter waits out for 30 s), a duplicated \
         batch, and (Telegram) a 409 from another poller or (Weixin) a cursor reset.\n"
    );
    let _ = std::fs::remove_dir_all(dir);
}

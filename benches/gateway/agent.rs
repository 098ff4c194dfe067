//! The agent bridge (issue 28): the latency hermes-svc adds between a platform's message and
//! the agent's request (inbound), and between the agent's answer and the platform's post
//! (outbound), at 100 messages a second. A real gateway process with one Telegram adapter and
//! `[agent] kind = "openai"` pointed at an OpenAI-compatible echo agent served in this process,
//! against the built-in mock's Bot API and against benches/independent/poll_server.py.
//!
//! Every message's text carries its number and the moment it was emitted
//! (`bench.00042.<unix us>`); the agent stamps each request's arrival and puts its answer's
//! send time in the reply (`echo <text> at=<unix us>`), so every post says when its answer left
//! the agent. Where the time goes is read from the gateway's own stamps (1 ms resolution): the
//! spool's `received_at` (the adapter has the update) and the outbox journal's `queued_at`,
//! `sending` and `sent` (each stamped before its record is synced), and from a probe of the
//! disk's `fdatasync` after each run.
//!
//! `HSV_BENCH_AGENT_SECS` (20) is the run's length, `HSV_BENCH_ONLY` (`mock` or `independent`)
//! the platform.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use hermes_svc::mock_platform::telegram::TelegramConfig;
use hermes_svc::mock_platform::{MockConfig, MockPlatform};

use crate::binary::{gateway_bin, spawn_gateway, Gateway, BIN};
use crate::independent::Independent;
use crate::proc::{cpu_ns, machine_ticks, wait_for_quiet_machine};
use crate::{percentile, scratch};

/// Messages a second, over all chats.
const RATE: u32 = 100;
/// Chats the messages are spread over, round robin: 5 a second each, one turn at a time.
const CHATS: usize = 20;
/// The measured messages' text starts with this; the warm-up's with [`WARM`].
const TAG: &str = "bench.";
const WARM: &str = "warm.";
const PROFILE: &str = "ag";
const INDEPENDENT_TOKEN: &str = "7000000002:AAbench-agent-bridge";
/// The mock's chats: 1001 (its default) and the 19 after it.
const FIRST_MOCK_CHAT: i64 = 1001;
/// The independent server's chats (`poll_server.py`'s `chat(k)`): 500000001 and the 19 after.
const FIRST_INDEPENDENT_CHAT: i64 = 500_000_001;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// A wall-clock stamp in whole milliseconds (the gateway's RFC 3339 stamps and the independent
/// server's `received_unix_ms`, both cut, not rounded) as microseconds: the middle of its
/// millisecond, so that a difference is off by at most half a millisecond per stamp.
fn ms_stamp_us(ms: u64) -> u64 {
    ms * 1000 + 500
}

fn rfc3339_us(s: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339(s).ok()?;
    let ms = t.duration_since(UNIX_EPOCH).ok()?.as_millis() as u64;
    Some(ms_stamp_us(ms))
}

/// `(number, emit time)` from the first `prefix00042.<unix us>` in `s`.
fn tagged(s: &str, prefix: &str) -> Option<(usize, u64)> {
    let rest = &s[s.find(prefix)? + prefix.len()..];
    let (seq, rest) = rest.split_once('.')?;
    let t: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((seq.parse().ok()?, t.parse().ok()?))
}

/// The answer's send time from a reply's ` at=<unix us>`.
fn answered_at(s: &str) -> Option<u64> {
    let rest = &s[s.rfind(" at=")? + 4..];
    let t: String = rest.chars().take_while(char::is_ascii_digit).collect();
    t.parse().ok()
}

/// One request the agent answered.
#[derive(Clone)]
struct Call {
    text: String,
    session: String,
    arrived_us: u64,
}

#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Vec<Call>>>);

impl Heard {
    fn calls(&self) -> Vec<Call> {
        self.0.lock().unwrap().clone()
    }
}

/// The OpenAI-compatible echo agent, on a free loopback port, HTTP/1.1 with keep-alive as any
/// agent server has it.
struct EchoAgent {
    url: String,
    heard: Heard,
    accept: JoinHandle<()>,
}

impl EchoAgent {
    async fn start() -> EchoAgent {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let heard = Heard::default();
        let router = Router::new()
            .route("/v1/chat/completions", post(completions))
            .with_state(heard.clone());
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let service = TowerToHyperService::new(router.clone());
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        EchoAgent { url, heard, accept }
    }
}

impl Drop for EchoAgent {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Stamp the arrival, answer at once with the text and the answer's send time.
async fn completions(State(heard): State<Heard>, headers: HeaderMap, body: Bytes) -> Json<Value> {
    let arrived_us = now_us();
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let text = v["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    let session = headers
        .get("x-hermes-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let content = format!("echo {text} at={}", now_us());
    heard.0.lock().unwrap().push(Call {
        text,
        session,
        arrived_us,
    });
    Json(json!({
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": arrived_us / 1_000_000,
        "model": "echo",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
    }))
}

/// The platform side: the mock in this process, or the independent server as a child.
enum Platform {
    Mock {
        mock: MockPlatform,
        /// One moment on both clocks, to put the mock's `Instant`s on the wall clock.
        at: Instant,
        at_us: u64,
    },
    Independent(Independent),
}

impl Platform {
    async fn start(label: &str, python: Option<&str>, log: &Path) -> Platform {
        match label {
            "mock" => {
                let telegram = TelegramConfig {
                    chats: (0..CHATS as i64).map(|k| FIRST_MOCK_CHAT + k).collect(),
                    ..TelegramConfig::default()
                };
                let config = MockConfig {
                    telegram,
                    ..MockConfig::default()
                };
                let mock = MockPlatform::start(config).await.unwrap();
                Platform::Mock {
                    mock,
                    at: Instant::now(),
                    at_us: now_us(),
                }
            }
            _ => Platform::Independent(Independent::start_poll(
                python.expect("the independent server needs scripts/bench-deps' python"),
                &["--telegram-token", INDEPENDENT_TOKEN],
                log,
            )),
        }
    }

    fn base(&self) -> String {
        match self {
            Platform::Mock { mock, .. } => mock.http_base(),
            Platform::Independent(i) => i.base(),
        }
    }

    fn token(&self) -> String {
        match self {
            Platform::Mock { .. } => TelegramConfig::default().token,
            Platform::Independent(_) => INDEPENDENT_TOKEN.to_owned(),
        }
    }

    fn pid(&self) -> Option<u32> {
        match self {
            Platform::Mock { .. } => None,
            Platform::Independent(i) => Some(i.child.id()),
        }
    }

    /// One message in chat `k` (0-based). The independent server picks the chat itself, round
    /// robin over `chats=K` by how many it has made, which is the same order.
    async fn emit(&self, k: usize, text: &str) {
        match self {
            Platform::Mock { mock, .. } => {
                mock.telegram_emit_text(FIRST_MOCK_CHAT + k as i64, text);
            }
            Platform::Independent(i) => {
                let path = format!("telegram/emit?n=1&chats={CHATS}&text={text}");
                let answer = i.control(&path, json!({})).await;
                assert_eq!(answer["updates"].as_array().map(Vec::len), Some(1));
            }
        }
    }

    /// Every post: its text and when the platform received it (unix us).
    async fn posts(&self) -> Vec<(String, u64)> {
        match self {
            Platform::Mock { mock, at, at_us } => mock
                .posts()
                .into_iter()
                .map(|p| {
                    let us = match p.received_at.checked_duration_since(*at) {
                        Some(d) => at_us + d.as_micros() as u64,
                        None => at_us - (*at - p.received_at).as_micros() as u64,
                    };
                    (p.content, us)
                })
                .collect(),
            Platform::Independent(i) => {
                let page = i.posts().await;
                page["posts"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|p| {
                        let text = p["text"].as_str().or(p["content"].as_str())?;
                        let ms = p["received_unix_ms"].as_u64()?;
                        Some((text.to_owned(), ms_stamp_us(ms)))
                    })
                    .collect()
            }
        }
    }

    /// Independent only: for each measured update, ms from its creation to the first
    /// `getUpdates` answer that carried it, both on the server's clock (`GET /_updates`).
    async fn held(&self) -> Vec<f64> {
        let Platform::Independent(i) = self else {
            return vec![];
        };
        let url = format!("{}/_updates", i.base());
        let page: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
        page["telegram"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|u| u["text"].as_str().is_some_and(|t| t.starts_with(TAG)))
            .filter_map(|u| {
                let created = u["created_ms"].as_f64()?;
                Some(u["first_delivered_ms"].as_f64()? - created)
            })
            .collect()
    }

    /// `getUpdates` requests the platform has answered or held so far.
    async fn polls(&self) -> u64 {
        match self {
            Platform::Mock { mock, .. } => mock.telegram_stats().polls,
            Platform::Independent(i) => i.stats().await["telegram_polls"].as_u64().unwrap_or(0),
        }
    }

    async fn count_posts(&self, prefix: &str) -> usize {
        self.posts()
            .await
            .iter()
            .filter(|(t, _)| t.contains(prefix))
            .count()
    }

    /// Wait until `n` posts carrying `prefix` have arrived, or `limit` has passed.
    async fn wait_posts(&self, prefix: &str, n: usize, limit: Duration) -> usize {
        let end = Instant::now() + limit;
        let every = match self {
            Platform::Mock { .. } => Duration::from_millis(20),
            Platform::Independent(_) => Duration::from_millis(250),
        };
        loop {
            let got = self.count_posts(prefix).await;
            if got >= n || Instant::now() > end {
                return got;
            }
            tokio::time::sleep(every).await;
        }
    }
}

/// A gateway with one Telegram adapter against `base` and the echo agent behind it, started
/// and waited for until the adapter is ready.
async fn start_gateway(home: &Path, base: &str, token: &str, agent: &str) -> (Gateway, PathBuf) {
    let profile_home = home.join("profiles").join(PROFILE);
    std::fs::create_dir_all(&profile_home).unwrap();
    // Every message is judged as it is stored (access.rs): each chat's sender is listed, as
    // an owner lists theirs, and has a budget well above its 5 messages a second, so the
    // allow-list and the budget are both on the path and nothing is refused.
    let senders: Vec<String> = (0..CHATS as i64)
        .flat_map(|k| [FIRST_MOCK_CHAT + k, FIRST_INDEPENDENT_CHAT + k])
        .map(|id| format!("\"{id}\""))
        .collect();
    let toml = format!(
        "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"TG_TOKEN\"\n\
         api-base = \"{base}\"\npoll-timeout = \"30s\"\n\n\
         [access]\nallow-users = [{}]\nbudget = \"1000/1m\"\n\n\
         [agent]\nkind = \"openai\"\nurl = \"{agent}\"\n",
        senders.join(", ")
    );
    std::fs::write(profile_home.join("gateway.toml"), toml).unwrap();
    std::fs::write(profile_home.join(".env"), format!("TG_TOKEN={token}\n")).unwrap();
    let gw = spawn_gateway(home, PROFILE, None);
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let state = std::fs::read_to_string(profile_home.join("state/gateway.json"));
        if state.is_ok_and(|t| t.contains("1/1 adapters ready")) {
            return (gw, profile_home);
        }
        assert!(
            Instant::now() < end,
            "the gateway never said 1/1 adapters ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The figures of one run, in ms, each sorted.
struct Run {
    server: &'static str,
    n: usize,
    secs: u32,
    inbound: Vec<f64>,
    outbound: Vec<f64>,
    /// Inbound plus outbound, per message.
    added: Vec<f64>,
    /// Emit → the spool's `received_at`.
    in_delivered: Vec<f64>,
    /// The spool's `received_at` → the agent's request.
    in_bridged: Vec<f64>,
    /// The answer → the outbox's `queued_at`.
    out_queued: Vec<f64>,
    /// `queued_at` → the journal's last `sending` (the one that posted).
    out_waited: Vec<f64>,
    /// `sending` → the platform received the post.
    out_sent: Vec<f64>,
    /// The outbox worker's attempt: `sending` → `sent`.
    attempt: Vec<f64>,
    /// The outbox worker's cycle while messages wait for it: from one `sending` to the next,
    /// where the next was queued before the first began.
    cycle: Vec<f64>,
    /// Independent only: the server's own hold, update created → first answer carrying it.
    server_held: Vec<f64>,
    /// A 300-byte append and `fdatasync` in the profile's directory, after the run.
    fsync: Vec<f64>,
    /// Independent only: the emit request's round trip.
    emit_rtt: Vec<f64>,
    answered_once: usize,
    /// The outbox journal's `retry`, `failed` and `unknown` records.
    retries: usize,
    failed: usize,
    missing: usize,
    doubled: usize,
    asked_twice: usize,
    sessions: usize,
    polls: u64,
    gateway_cpu_pct: f64,
    platform_cpu_pct: Option<f64>,
    /// This process: the echo agent, the emitter and, against the mock, the platform.
    bench_cpu_pct: f64,
    busy: f64,
    /// The machine's busy time less the gateway's, the platform's and this process's, in %
    /// of one core: what else ran (another engineer's build or tests).
    others_pct: f64,
}

fn ms(a_us: u64, b_us: u64) -> f64 {
    (b_us as f64 - a_us as f64) / 1000.0
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// Every line of a JSON-lines file that parses.
fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

async fn measure(label: &'static str, python: Option<&str>, secs: u32) -> Run {
    let home = scratch(&format!("agent-{label}"));
    let agent = EchoAgent::start().await;
    let platform = Platform::start(label, python, &home.join("server.log")).await;
    let (gw, profile_home) =
        start_gateway(&home, &platform.base(), &platform.token(), &agent.url).await;
    let gw_pid = gw.0.id();

    // Warm-up, not measured: one message per chat, so that every chat's session, the
    // connections to the agent and to the platform, and the long poll are as a running
    // gateway has them.
    for k in 0..CHATS {
        platform
            .emit(k, &format!("{WARM}{k:05}.{}", now_us()))
            .await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let warm = platform
        .wait_posts(WARM, CHATS, Duration::from_secs(60))
        .await;
    assert_eq!(
        warm, CHATS,
        "the warm-up was not answered; is the agent bridge running?"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    let n = (RATE * secs) as usize;
    let mut emitted = vec![0u64; n];
    let mut emit_rtt = vec![];
    let polls0 = platform.polls().await;
    let platform_cpu = || platform.pid().map(cpu_ns);
    let me = std::process::id();
    let (cpu0, plat0, me0, m0, started) = (
        cpu_ns(gw_pid),
        platform_cpu(),
        cpu_ns(me),
        machine_ticks(),
        Instant::now(),
    );
    let mut tick = tokio::time::interval(Duration::from_secs(1) / RATE);
    for (i, at) in emitted.iter_mut().enumerate() {
        tick.tick().await;
        *at = now_us();
        platform.emit(i % CHATS, &format!("{TAG}{i:05}.{at}")).await;
        if label != "mock" {
            emit_rtt.push(ms(*at, now_us()));
        }
    }
    let got = platform.wait_posts(TAG, n, Duration::from_secs(60)).await;
    if got < n {
        eprintln!("agent / {label}: {got} of {n} answers posted after 60 s");
    }
    // Time for a second post of any message to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (cpu1, plat1, me1, m1, took) = (
        cpu_ns(gw_pid),
        platform_cpu(),
        cpu_ns(me),
        machine_ticks(),
        started.elapsed(),
    );
    let pct = |ns: f64| ns / 1e9 / took.as_secs_f64() * 100.0;
    let plat_ns = plat0.zip(plat1).map(|(a, b)| (b - a) as f64);
    // /proc/stat counts in USER_HZ, 100 a second.
    let busy_ns = (m1.0 - m0.0) as f64 * 1e7;
    let ours_ns = (cpu1 - cpu0) as f64 + plat_ns.unwrap_or(0.0) + (me1 - me0) as f64;
    let polls = platform.polls().await - polls0;
    let posts = platform.posts().await;
    let calls = agent.heard.calls();
    let held = platform.held().await;
    drop(gw);

    // The agent: when each message's request first arrived.
    let mut asked: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut sessions: Vec<&str> = vec![];
    for c in &calls {
        if let Some((seq, _)) = tagged(&c.text, TAG) {
            asked.entry(seq).or_default().push(c.arrived_us);
            sessions.push(&c.session);
        }
    }
    sessions.sort_unstable();
    sessions.dedup();
    // The platform: each message's posts, with when its answer left the agent.
    let mut posted: HashMap<usize, Vec<(u64, u64)>> = HashMap::new();
    for (text, received_us) in &posts {
        if let (Some((seq, _)), Some(answer_us)) = (tagged(text, TAG), answered_at(text)) {
            posted
                .entry(seq)
                .or_default()
                .push((answer_us, *received_us));
        }
    }
    // The gateway's stamps: the spool's received_at, the outbox's queued_at and sending.
    let mut stored: HashMap<usize, u64> = HashMap::new();
    for e in json_lines(&profile_home.join("inbox/events.jsonl")) {
        let (Some((seq, _)), Some(at)) = (
            tagged(&e["data"].to_string(), TAG),
            e["received_at"].as_str().and_then(rfc3339_us),
        ) else {
            continue;
        };
        stored.entry(seq).or_insert(at);
    }
    let mut queued: HashMap<usize, u64> = HashMap::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut sending: HashMap<usize, u64> = HashMap::new();
    let mut sent: HashMap<usize, u64> = HashMap::new();
    let mut troubles: HashMap<String, usize> = HashMap::new();
    for r in json_lines(&profile_home.join("outbox/journal.jsonl")) {
        match r["op"].as_str() {
            Some("put") => {
                let m = &r["message"];
                let seq = m["text"].as_str().and_then(|t| tagged(t, TAG));
                let at = m["queued_at"].as_str().and_then(rfc3339_us);
                if let (Some((seq, _)), Some(at), Some(id)) = (seq, at, m["id"].as_str()) {
                    by_id.insert(id.to_owned(), seq);
                    queued.entry(seq).or_insert(at);
                }
            }
            Some(op @ ("sending" | "sent")) => {
                let seq = r["id"].as_str().and_then(|id| by_id.get(id));
                let stamps = if op == "sending" {
                    &mut sending
                } else {
                    &mut sent
                };
                // The last `sending` is the attempt that posted (a retried one has several).
                if let (Some(&seq), Some(at)) = (seq, r["at"].as_str().and_then(rfc3339_us)) {
                    stamps.insert(seq, at);
                }
            }
            Some(op @ ("retry" | "failed" | "unknown")) => {
                let error = r["error"].to_string();
                eprintln!("agent / {label}: outbox {op}: {error}");
                *troubles.entry(op.to_owned()).or_default() += 1;
            }
            _ => {}
        }
    }

    let mut run = Run {
        server: label,
        n,
        secs,
        inbound: vec![],
        outbound: vec![],
        added: vec![],
        in_delivered: vec![],
        in_bridged: vec![],
        out_queued: vec![],
        out_waited: vec![],
        out_sent: vec![],
        attempt: vec![],
        cycle: vec![],
        server_held: vec![],
        fsync: vec![],
        emit_rtt: sorted(emit_rtt),
        answered_once: 0,
        retries: troubles.get("retry").copied().unwrap_or(0),
        failed: troubles.get("failed").copied().unwrap_or(0)
            + troubles.get("unknown").copied().unwrap_or(0),
        missing: 0,
        doubled: 0,
        asked_twice: asked.values().filter(|a| a.len() > 1).count(),
        sessions: sessions.len(),
        polls,
        gateway_cpu_pct: pct((cpu1 - cpu0) as f64),
        platform_cpu_pct: plat_ns.map(pct),
        bench_cpu_pct: pct((me1 - me0) as f64),
        busy: (m1.0 - m0.0) as f64 / (m1.1 - m0.1).max(1) as f64 * 100.0,
        others_pct: pct((busy_ns - ours_ns).max(0.0)),
    };
    for (seq, &emit) in emitted.iter().enumerate() {
        let arrived = asked.get(&seq).and_then(|a| a.iter().min().copied());
        let post = posted.get(&seq);
        match post.map_or(0, Vec::len) {
            0 => run.missing += 1,
            1 => run.answered_once += 1,
            _ => run.doubled += 1,
        }
        if let Some(arrived) = arrived {
            run.inbound.push(ms(emit, arrived));
            if let Some(&at) = stored.get(&seq) {
                run.in_delivered.push(ms(emit, at));
                run.in_bridged.push(ms(at, arrived));
            }
        }
        let Some(&(answer, received)) = post.and_then(|p| p.iter().min_by_key(|(_, r)| *r)) else {
            continue;
        };
        run.outbound.push(ms(answer, received));
        if let Some(arrived) = arrived {
            run.added.push(ms(emit, arrived) + ms(answer, received));
        }
        if let (Some(&q), Some(&s)) = (queued.get(&seq), sending.get(&seq)) {
            run.out_queued.push(ms(answer, q));
            run.out_waited.push(ms(q, s));
            run.out_sent.push(ms(s, received));
        }
        if let (Some(&s), Some(&d)) = (sending.get(&seq), sent.get(&seq)) {
            run.attempt.push(ms(s, d));
        }
    }
    let mut begun: Vec<(u64, u64)> = sending
        .iter()
        .filter_map(|(seq, &s)| Some((s, *queued.get(seq)?)))
        .collect();
    begun.sort_unstable();
    run.cycle = sorted(
        begun
            .windows(2)
            .filter(|w| w[1].1 <= w[0].0)
            .map(|w| ms(w[0].0, w[1].0))
            .collect(),
    );
    run.server_held = sorted(held);
    run.fsync = sorted(fsync_times(&profile_home, 300));
    for v in [
        &mut run.inbound,
        &mut run.outbound,
        &mut run.added,
        &mut run.in_delivered,
        &mut run.in_bridged,
        &mut run.out_queued,
        &mut run.out_waited,
        &mut run.out_sent,
        &mut run.attempt,
    ] {
        v.sort_by(f64::total_cmp);
    }
    drop(platform);
    drop(agent);
    let server_log = std::fs::read_to_string(home.join("server.log")).unwrap_or_default();
    if !server_log.trim().is_empty() {
        eprintln!("independent server stderr, last lines:");
        let tail: Vec<&str> = server_log.lines().rev().take(20).collect();
        for l in tail.into_iter().rev() {
            eprintln!("  {l}");
        }
    }
    let _ = std::fs::remove_dir_all(&home);
    run
}

/// `n` appends of 300 bytes, each followed by `fdatasync`, in `dir` (the profile's, on the
/// disk the spool and the outbox journal are on): ms each.
fn fsync_times(dir: &Path, n: usize) -> Vec<f64> {
    use std::io::Write;
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path).unwrap();
    let line = [b'x'; 300];
    let times = (0..n)
        .map(|_| {
            let t = Instant::now();
            f.write_all(&line).unwrap();
            f.sync_data().unwrap();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let _ = std::fs::remove_file(path);
    times
}

/// p50 / p99 / max of sorted milliseconds, for a table cell.
fn spread(sorted: &[f64]) -> String {
    if sorted.is_empty() {
        return "—".into();
    }
    format!(
        "{:.1} / {:.1} / {:.1} ms",
        percentile(sorted, 50.0),
        percentile(sorted, 99.0),
        sorted.last().copied().unwrap_or(f64::NAN)
    )
}

pub(crate) async fn agent_figures() {
    let secs = std::env::var("HSV_BENCH_AGENT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let only = std::env::var("HSV_BENCH_ONLY").unwrap_or_default();
    let servers: Vec<&'static str> = ["mock", "independent"]
        .into_iter()
        .filter(|s| only.is_empty() || only == *s)
        .collect();
    let bin = gateway_bin();
    eprintln!("measuring {bin}");
    let python = servers.contains(&"independent").then(Independent::python);
    let mut runs = vec![];
    for label in servers {
        wait_for_quiet_machine().await;
        let run = measure(label, python.as_deref(), secs).await;
        eprintln!(
            "agent / {label}: inbound p99 {:.1} ms, outbound p99 {:.1} ms",
            percentile(&run.inbound, 99.0),
            percentile(&run.outbound, 99.0)
        );
        runs.push(run);
    }
    print_runs(&runs);
    println!(
        "Measured binary: {}\n",
        if bin == BIN {
            "cargo's bench build (dev-dependency features on)"
        } else {
            "a plain release build (`HSV_BENCH_BIN`)"
        }
    );
}

fn print_runs(runs: &[Run]) {
    let Some(any) = runs.first() else { return };
    println!(
        "### The agent bridge at {} messages/s ({} messages over {} s, {CHATS} Telegram chats, an echo agent answering at once)\n",
        RATE, any.n, any.secs
    );
    println!("| figure | built-in mock | independent server |");
    println!("|---|---|---|");
    let row = |figure: &str, cell: &dyn Fn(&Run) -> String| {
        let cells: Vec<String> = ["mock", "independent"]
            .iter()
            .map(|s| {
                runs.iter()
                    .find(|r| r.server == *s)
                    .map_or("—".into(), cell)
            })
            .collect();
        println!("| {figure} | {} | {} |", cells[0], cells[1]);
    };
    row(
        "**inbound**: platform emits the message → agent has the request, p50 / p99 / max",
        &|r| spread(&r.inbound),
    );
    row(
        "**outbound**: agent sends its answer → platform has the post, p50 / p99 / max",
        &|r| spread(&r.outbound),
    );
    row("both legs of one message, added, p50 / p99 / max", &|r| {
        spread(&r.added)
    });
    row(
        "answered once / missing / posted twice / agent asked twice",
        &|r| {
            format!(
                "{} / {} / {} / {}",
                r.answered_once, r.missing, r.doubled, r.asked_twice
            )
        },
    );
    row("outbox sends retried / failed or unknown", &|r| {
        format!("{} / {}", r.retries, r.failed)
    });
    row("chats (sessions the agent saw)", &|r| {
        r.sessions.to_string()
    });
    row(
        "inbound, part 1: emit → the adapter has the update (spool `received_at`)",
        &|r| spread(&r.in_delivered),
    );
    row(
        "inbound, part 2: spool → the agent has the request",
        &|r| spread(&r.in_bridged),
    );
    row(
        "outbound, part 1: answer → reply queued in the outbox (`queued_at`, before its sync)",
        &|r| spread(&r.out_queued),
    );
    row(
        "outbound, part 2: `queued_at` → the worker's last `sending` (the sync, the wait for the worker)",
        &|r| spread(&r.out_waited),
    );
    row(
        "outbound, part 3: `sending` → the platform has the post (the `sending` sync, `sendMessage`)",
        &|r| spread(&r.out_sent),
    );
    row(
        "outbox worker, one attempt: `sending` → `sent` (its sync not included)",
        &|r| spread(&r.attempt),
    );
    row(
        "outbox worker, backlogged: one `sending` → the next, when the next was queued (count)",
        &|r| format!("{} ({})", spread(&r.cycle), r.cycle.len()),
    );
    row(
        "300-byte append + `fdatasync` in the profile's directory, after the run",
        &|r| spread(&r.fsync),
    );
    row(
        "the platform's own hold: update created → first `getUpdates` answer with it",
        &|r| {
            if r.server_held.is_empty() {
                "(not recorded)".into()
            } else {
                spread(&r.server_held)
            }
        },
    );
    row("`getUpdates` requests (messages per request)", &|r| {
        format!("{} ({:.2})", r.polls, r.n as f64 / r.polls.max(1) as f64)
    });
    row("the bench's emit request, round trip", &|r| {
        if r.emit_rtt.is_empty() {
            "(a call in the bench process)".into()
        } else {
            spread(&r.emit_rtt)
        }
    });
    row(
        "CPU, % of one core: gateway / platform process / bench process (agent, emitter)",
        &|r| {
            let plat = r
                .platform_cpu_pct
                .map_or("(in the bench process)".into(), |p| format!("{p:.1}%"));
            format!(
                "{:.1}% / {plat} / {:.1}%",
                r.gateway_cpu_pct, r.bench_cpu_pct
            )
        },
    );
    row(
        "whole machine busy (2 cores) / of which other work, % of one core",
        &|r| format!("{:.0}% / {:.0}%", r.busy, r.others_pct),
    );
    println!();
}

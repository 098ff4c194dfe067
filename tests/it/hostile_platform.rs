//! A real gateway against a hostile platform (`hostile_server.rs`): numbers that would
//! panic or overflow, a batch with one unreadable item, ids that cannot be confirmed, and
//! secrets echoed back. Each case is what a broken or hostile server did to main, and what
//! the gateway must do instead. Profile names start with `hp`.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hermes_svc::config::Secret;
use hermes_svc::platform::weixin::WeixinLogin;
use serde_json::Value;

use crate::harness::{wait_for, BIN};
use crate::hostile_rig::{matrix, telegram, Rig, Running, TOKEN};
use crate::hostile_server::answer;

const EMPTY_BATCH: &str = r#"{"ok":true,"result":[]}"#;

/// A 429 that asks for no wait was a hot loop: `retry_after_ms: 0` or `Retry-After: 0` made
/// 52,857 `/sync` requests in 8 s, and `retry_after: 0` 43,937 `getUpdates`. Now a refusal
/// waits at least a second (platform_number::platform_wait), a floor under the growing
/// backoff: at most one request a second, here allowed twice that and five more.
#[test]
fn a_429_that_asks_for_no_wait_is_no_hot_loop() {
    let tg = telegram("hpzerotg");
    tg.server.script(
        "/getUpdates",
        vec![answer(
            429,
            r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 0","parameters":{"retry_after":0}}"#,
        )],
    );
    let body = matrix("hpzerobody");
    body.server.script(
        "/sync",
        vec![answer(
            429,
            r#"{"errcode":"M_LIMIT_EXCEEDED","error":"Too Many Requests","retry_after_ms":0}"#,
        )],
    );
    let header = matrix("hpzerohdr");
    header.server.script(
        "/sync",
        vec![answer(
            429,
            r#"{"errcode":"M_LIMIT_EXCEEDED","error":"Too Many Requests"}"#,
        )
        .header("retry-after", "0")],
    );
    let rigs = [
        (&tg, "tg", "/getUpdates"),
        (&body, "mx", "/sync"),
        (&header, "mx", "/sync"),
    ];
    let _running: Vec<Running> = rigs.iter().map(|(r, ..)| Running(r.gateway(""))).collect();
    for (rig, name, path) in rigs {
        rig.component(name, |c| {
            c["state"] == "retrying" && c["last_error"].as_str().is_some_and(|e| e.contains("429"))
        });
        let refused = wait_for(Duration::from_secs(30), "four refused requests", || {
            let r = rig.server.requests(path);
            (r.len() >= 4).then_some(r)
        });
        let secs = refused[0].at.elapsed().as_secs_f64();
        let n = rig.server.requests(path).len();
        assert!(
            n as f64 <= 2.0 * secs + 5.0,
            "{path}: {n} requests in {secs:.1}s: {}",
            rig.log()
        );
    }
}

/// A 429 whose `retry_after` is 1e308 panicked the adapter in `Duration::from_secs_f64`: now
/// the wait is cut to its ceiling, an hour, the log says so, and the adapter says it is
/// waiting.
#[test]
fn a_429_with_an_absurd_retry_after_is_a_capped_wait_not_a_panic() {
    let rig = telegram("hp429");
    rig.server.script(
        "/getUpdates",
        vec![answer(
            429,
            r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 1e308","parameters":{"retry_after":1e308}}"#,
        )],
    );
    let mut gw = Running(rig.gateway(""));
    let c = rig.component("tg", |c| c["state"] == "retrying");
    assert!(
        c["last_error"].as_str().unwrap().contains("HTTP 429"),
        "{c}"
    );
    assert!(gw.0.try_wait().unwrap().is_none(), "{}", rig.log());
    wait_for(Duration::from_secs(10), "the cap in the log", || {
        rig.log()
            .contains("asked for a wait longer than an hour")
            .then_some(())
    });
    assert!(!rig.log().contains("panicked"), "{}", rig.log());
}

/// A component that panics is a named failure at once: exit 75 naming it, long before the
/// 30 s the start would otherwise wait for it to report in.
#[test]
fn a_panicking_adapter_is_a_named_restart_at_once() {
    let rig = telegram("hppanic");
    rig.server
        .script("/getUpdates", vec![answer(200, EMPTY_BATCH)]);
    let started = Instant::now();
    let mut gw = rig.gateway("panic:tg");
    let status = wait_for(Duration::from_secs(20), "the gateway to exit", || {
        gw.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(75), "{}", rig.log());
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "noticed after {:?}",
        started.elapsed()
    );
    let log = rig.log();
    assert!(log.contains("component tg panicked"), "{log}");
}

/// One update with a lone surrogate used to keep the whole batch out of the spool, and the
/// same batch blocked the adapter forever. Now the good ones are stored, the bad one is
/// quarantined under its id, and the offset moves past all three.
#[test]
fn one_unreadable_update_is_quarantined_and_the_batch_is_stored_and_confirmed() {
    let rig = telegram("hpbatch");
    rig.server.script(
        "/getUpdates",
        vec![
            answer(
                200,
                r#"{"ok":true,"result":[{"update_id":10,"message":{"text":"good"}},{"update_id":11,"message":{"text":"\ud800"}},{"update_id":12,"message":{"text":"also good"}}]}"#,
            ),
            answer(200, EMPTY_BATCH),
        ],
    );
    let _gw = Running(rig.gateway(""));
    let events = wait_for(Duration::from_secs(20), "three events", || {
        let e = rig.events();
        (e.len() == 3).then_some(e)
    });
    let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["10", "11", "12"]);
    let bad = serde_json::to_value(&events[1]).unwrap();
    assert_eq!(bad["kind"], "unreadable", "{bad}");
    assert!(
        bad["data"]["raw"].as_str().unwrap().contains(r"\ud800"),
        "{bad}"
    );
    wait_for(Duration::from_secs(10), "a poll confirming 12", || {
        rig.server
            .requests("/getUpdates")
            .iter()
            .any(|r| r.body.contains("\"offset\":13"))
            .then_some(())
    });
}

/// `update_id` 2^63 can never be confirmed and `i64::MAX` has no offset after it: main
/// polled 36,481 times in 8 s (and overflowed `offset` in release builds). Now such a poll
/// backs off, at least `backoff-min` (200 ms) more each time, and the ids are named.
#[test]
fn updates_that_cannot_be_confirmed_back_off_instead_of_a_hot_loop() {
    let rig = telegram("hpids");
    rig.server.script(
        "/getUpdates",
        vec![answer(
            200,
            r#"{"ok":true,"result":[{"update_id":9223372036854775807,"message":{"text":"max"}},{"update_id":9223372036854775808,"message":{"text":"past max"}}]}"#,
        )],
    );
    let mut gw = Running(rig.gateway(""));
    let first = wait_for(Duration::from_secs(20), "a first poll", || {
        (!rig.server.requests("/getUpdates").is_empty()).then(Instant::now)
    });
    wait_for(Duration::from_secs(30), "six polls", || {
        (rig.server.requests("/getUpdates").len() >= 6).then_some(())
    });
    // Five waits of at least 200 ms each lie between the first poll and the sixth.
    assert!(
        first.elapsed() >= Duration::from_secs(1),
        "{} polls in {:?}",
        rig.server.requests("/getUpdates").len(),
        first.elapsed()
    );
    let c = rig.component("tg", |c| c["last_error"].is_string());
    assert!(
        c["last_error"]
            .as_str()
            .unwrap()
            .contains("9223372036854775808"),
        "{c}"
    );
    assert!(gw.0.try_wait().unwrap().is_none(), "{}", rig.log());
    assert!(!rig.log().contains("panicked"), "{}", rig.log());
    assert!(rig
        .server
        .requests("/getUpdates")
        .iter()
        .all(|r| !r.body.contains("\"offset\":-")));
}

/// The same for Weixin: one unreadable message in a `getupdates` answer costs only itself,
/// and the cursor moves past the batch.
#[test]
fn one_unreadable_weixin_message_is_quarantined_and_the_cursor_moves_on() {
    let rig = Rig::new(
        "hpwx",
        "name = \"wx\"\nkind = \"weixin\"\napi-base = \"{base}\"\npoll-timeout = \"1s\"\n\
         poll-grace = \"1s\"",
    );
    WeixinLogin::new(
        Secret::new("wx-hostile-token".into()),
        rig.server.base(),
        "bot@im.bot".into(),
        "owner@im.wechat".into(),
    )
    .write(&rig.profile_home().join("weixin/wx.json"))
    .unwrap();
    rig.server
        .script("/getconfig", vec![answer(200, r#"{"ret":0}"#)]);
    rig.server.script(
        "/getupdates",
        vec![
            answer(
                200,
                r#"{"ret":0,"get_updates_buf":"cursor-2","msgs":[{"message_id":1,"from_user_id":"a@im.wechat","item_list":[]},{"message_id":2,"from_user_id":"b@im.wechat","text":"\udc00"},{"message_id":3,"from_user_id":"c@im.wechat","item_list":[]}]}"#,
            ),
            answer(200, r#"{"ret":0,"get_updates_buf":"cursor-3","msgs":[]}"#),
        ],
    );
    let _gw = Running(rig.gateway(""));
    let events = wait_for(Duration::from_secs(20), "three events", || {
        let e = rig.events();
        (e.len() == 3).then_some(e)
    });
    let kinds: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            let v = serde_json::to_value(e).unwrap();
            (e.id.clone(), v["kind"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("1".to_owned(), "message".to_owned()),
            ("2".to_owned(), "unreadable".to_owned()),
            ("3".to_owned(), "message".to_owned())
        ]
    );
    wait_for(
        Duration::from_secs(10),
        "a poll from the next cursor",
        || {
            rig.server
                .requests("/getupdates")
                .iter()
                .any(|r| r.body.contains("cursor-2"))
                .then_some(())
        },
    );
}

/// The gateway's resident memory, from /proc.
fn rss_bytes(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

/// Long ids and long context tokens from new peers, poll after poll: the dedupe window kept
/// every id whole and the context map every peer, so memory grew with what the platform sent
/// (4 GB in 60 s, 3.9 GB in 30 s). Here 1,000 messages bring 64 MiB of ids and 88 MiB of
/// tokens; the gateway must hold neither.
#[test]
fn long_ids_and_context_tokens_do_not_grow_memory() {
    const POLLS: usize = 100;
    const PER_POLL: usize = 10;
    let rig = Rig::new(
        "hpmem",
        "name = \"wx\"\nkind = \"weixin\"\napi-base = \"{base}\"\npoll-timeout = \"1s\"\n\
         poll-grace = \"1s\"",
    );
    WeixinLogin::new(
        Secret::new("wx-hostile-token".into()),
        rig.server.base(),
        "bot@im.bot".into(),
        "owner@im.wechat".into(),
    )
    .write(&rig.profile_home().join("weixin/wx.json"))
    .unwrap();
    rig.server
        .script("/getconfig", vec![answer(200, r#"{"ret":0}"#)]);
    let long_id = "i".repeat(64 * 1024);
    let token = "t".repeat(90 * 1024);
    rig.server.generate("/getupdates", move |n| {
        let msgs: Vec<Value> = (0..PER_POLL)
            .filter(|_| n < POLLS)
            .map(|k| {
                serde_json::json!({
                    "message_id": format!("{n}-{k}-{long_id}"),
                    "from_user_id": format!("peer-{n}-{k}@im.wechat"),
                    "context_token": token,
                    "item_list": [],
                })
            })
            .collect();
        let body = serde_json::json!({"ret": 0, "get_updates_buf": format!("c{n}"), "msgs": msgs});
        answer(200, body.to_string())
    });
    let gw = Running(rig.gateway(""));
    // The poll after the last batch comes once that batch is stored and its cursor written.
    wait_for(Duration::from_secs(120), "every batch stored", || {
        (rig.server.requests("/getupdates").len() > POLLS + 1).then_some(())
    });
    let rss = rss_bytes(gw.0.id());
    assert!(
        rss < 100 * 1024 * 1024,
        "the gateway holds {} MiB after 152 MiB of ids and tokens",
        rss / (1024 * 1024)
    );
}

/// Everything the gateway said through `NOTIFY_SOCKET`, collected until the guard drops.
struct NotifyLog {
    path: PathBuf,
    said: std::sync::Arc<std::sync::Mutex<String>>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl NotifyLog {
    fn bind(dir: &std::path::Path) -> NotifyLog {
        let path = dir.join("notify.sock");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, d) = (said.clone(), done.clone());
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            while !d.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(n) = sock.recv(&mut buf) {
                    let mut s = s.lock().unwrap();
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                    s.push('\n');
                }
            }
        });
        NotifyLog { path, said, done }
    }

    fn text(&self) -> String {
        self.said.lock().unwrap().clone()
    }
}

impl Drop for NotifyLog {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A Telegram 502 whose description quotes the request path, token and all, put the token
/// into `STATUS=`, the state file and the log. Now every form of it is scrubbed.
#[test]
fn a_token_the_platform_echoes_back_reaches_no_status_state_or_log() {
    let rig = telegram("hpecho");
    let encoded = TOKEN.replace(':', "%3A");
    rig.server.script(
        "/getUpdates",
        vec![answer(
            502,
            format!(
                r#"{{"ok":false,"error_code":502,"description":"Bad Gateway: upstream POST /bot{TOKEN}/getUpdates (/bot{encoded}/getUpdates) timed out"}}"#
            ),
        )],
    );
    let notify = NotifyLog::bind(rig.home.path());
    let log = fs::File::create(rig.home.path().join("gateway.log")).unwrap();
    let _gw = Running(
        Command::new(BIN)
            .args(["gateway", "run", "--profile", &rig.profile])
            .env("HERMES_HOME", rig.home.path())
            .env("HERMES_LOCK_DIR", rig.home.path().join("locks"))
            .env("HP_TOKEN", TOKEN)
            .env("NOTIFY_SOCKET", &notify.path)
            .env("RUST_LOG", "debug")
            .env_remove("WATCHDOG_USEC")
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let c = rig.component("tg", |c| {
        c["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("Bad Gateway"))
    });
    wait_for(Duration::from_secs(20), "STATUS= with the error", || {
        notify.text().contains("Bad Gateway").then_some(())
    });
    let secret = TOKEN.split(':').nth(1).unwrap();
    let state = fs::read_to_string(rig.profile_home().join("state/gateway.json")).unwrap();
    for (what, text) in [
        ("the state file", state),
        ("STATUS=", notify.text()),
        ("the log", rig.log()),
    ] {
        assert!(!text.contains(secret), "{what} holds the token:\n{text}");
        assert!(text.contains("[redacted]"), "{what}:\n{text}");
    }
    assert!(c["last_error"]
        .as_str()
        .unwrap()
        .contains("/bot[redacted]/getUpdates"));
}

/// A QQ token endpoint that repeats the AppSecret in its refusal: the secret reached four
/// log lines and the state file.
#[test]
fn an_app_secret_the_token_endpoint_echoes_back_is_scrubbed() {
    const SECRET: &str = "qq-app-secret-7f3e9a";
    let rig = Rig::new(
        "hpqqecho",
        "name = \"qq\"\nkind = \"qqbot\"\napp-id = \"1020304\"\nsecret-env = \"HP_QQ\"\n\
         api-base = \"{base}\"\ntoken-url = \"{base}/app/getAppAccessToken\"",
    );
    rig.server.script(
        "/app/getAppAccessToken",
        vec![answer(
            200,
            format!(r#"{{"code":100016,"message":"invalid appid or secret: {SECRET}"}}"#),
        )],
    );
    let log = fs::File::create(rig.home.path().join("gateway.log")).unwrap();
    let mut gw = Command::new(BIN)
        .args(["gateway", "run", "--profile", &rig.profile])
        .env("HERMES_HOME", rig.home.path())
        .env("HERMES_LOCK_DIR", rig.home.path().join("locks"))
        .env("HP_QQ", SECRET)
        .env("RUST_LOG", "debug")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .stdin(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let status = wait_for(Duration::from_secs(30), "the gateway to exit", || {
        gw.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(78), "{}", rig.log());
    let log = rig.log();
    assert!(log.contains("100016"), "{log}");
    assert!(!log.contains(SECRET), "{log}");
    let state =
        fs::read_to_string(rig.profile_home().join("state/gateway.json")).unwrap_or_default();
    assert!(!state.contains(SECRET), "{state}");
}

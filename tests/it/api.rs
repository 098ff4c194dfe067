//! The local agent API on a real Unix socket: who may connect, long-polls that wake on an
//! append, cursors a reconnecting consumer can trust (across a real 64 MiB rotation too), and
//! requests refused with nothing queued.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use hermes_svc::api::client::{Client, ClientError};
use hermes_svc::gateway::spool::Event;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, setgid, setuid, ForkResult, Gid, Uid};
use serde_json::json;

use crate::api_rig::{http, ids, ApiRig, MAX_TEXT, TG_MAX_TEXT};
use crate::harness::wait_for;

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_socket_is_0600_in_a_0700_directory_and_goes_away_on_stop() {
    let mut rig = ApiRig::start();
    let sock = rig.socket();
    assert_eq!(mode(&sock), 0o600);
    assert_eq!(mode(sock.parent().unwrap()), 0o700);

    // Health is the state file as the gateway wrote it; before its first tick there is none.
    let none = rig.get("/v1/health");
    assert_eq!((none.status, none.code().as_str()), (503, "no_snapshot"));
    let state = json!({
        "updated_at": "2024-05-01T09:00:00.000Z", "pid": 42, "profile": "agent",
        "stale_after_ms": 16000, "summary": "1/1 adapters ready", "components": []
    });
    fs::write(
        rig.profile.home().join("state/gateway.json"),
        state.to_string(),
    )
    .unwrap();
    let health = rig.get("/v1/health");
    assert_eq!(health.status, 200);
    assert_eq!(health.json(), state);

    rig.stop();
    assert!(!sock.exists(), "the socket is removed on stop");
    let err = rig.rt.block_on(Client::new(&sock).health()).unwrap_err();
    assert!(matches!(err, ClientError::NotRunning { .. }), "{err}");
}

/// Connect as uid 65534 in a forked child; its exit code says what happened: 0 refused (the
/// server closed without a byte), 1 answered, 2 could not connect (EACCES), 3 other.
fn connect_as_nobody(sock: &Path) -> i32 {
    // SAFETY: the child only makes syscalls and exits with _exit; it touches no lock that
    // another thread of the test binary could hold.
    match unsafe { fork() }.unwrap() {
        ForkResult::Child => {
            let code = (|| {
                if setgid(Gid::from_raw(65534)).is_err() || setuid(Uid::from_raw(65534)).is_err() {
                    return 3;
                }
                let mut s = match UnixStream::connect(sock) {
                    Ok(s) => s,
                    Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return 2,
                    Err(_) => return 3,
                };
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let _ = s.write_all(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n");
                let mut buf = [0u8; 64];
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => 0,
                    Ok(_) => 1,
                }
            })();
            unsafe { nix::libc::_exit(code) }
        }
        ForkResult::Parent { child } => match waitpid(child, None).unwrap() {
            WaitStatus::Exited(_, code) => code,
            other => panic!("child: {other:?}"),
        },
    }
}

#[test]
fn another_user_is_refused_by_the_directory_and_then_by_its_uid() {
    assert!(nix::unistd::geteuid().is_root(), "the tests run as root");
    let rig = ApiRig::start();
    let sock = rig.socket();
    assert_eq!(connect_as_nobody(&sock), 2, "0700 keeps nobody out");

    // Open every door: only the peer check is left between nobody and the API.
    let mut dir = sock.parent().unwrap().to_owned();
    while dir.starts_with(rig.home.path()) {
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        dir.pop();
    }
    fs::set_permissions(&sock, fs::Permissions::from_mode(0o777)).unwrap();
    assert_eq!(connect_as_nobody(&sock), 0, "closed without an answer");
    // And the API still answers its own user.
    assert_eq!(rig.get("/v1/messages/none").status, 404);
}

#[test]
fn a_long_poll_wakes_when_an_event_is_appended() {
    let rig = ApiRig::start();
    rig.append("before");
    let sock = rig.socket();
    let poll = std::thread::spawn(move || {
        let start = Instant::now();
        let answer = http(&sock, "GET", "/v1/events?after=end&wait=30s", None);
        (start.elapsed(), answer)
    });
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        !poll.is_finished(),
        "nothing new yet: the request is held open"
    );
    rig.append("after");
    let (took, answer) = poll.join().unwrap();
    assert_eq!(answer.status, 200);
    let page = answer.json();
    assert_eq!(ids(&page), ["after"]);
    assert!(took < Duration::from_secs(5), "woke after {took:?}");
    assert_eq!(page["next"], page["events"][0]["cursor"]);
    // The event is as stored, with its cursor added.
    let event: Event = serde_json::from_value(page["events"][0].clone()).unwrap();
    assert_eq!(event.id, "after");

    // With nothing appended, a wait ends empty after about as long as it asked.
    let start = Instant::now();
    let empty = rig.get(&format!(
        "/v1/events?after={}&wait=300ms",
        page["next"].as_str().unwrap()
    ));
    assert!(
        start.elapsed() >= Duration::from_millis(280),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(ids(&empty.json()), Vec::<String>::new());
    assert_eq!(empty.json()["next"], page["next"]);
}

#[test]
fn a_consumer_that_reconnects_with_its_cursor_misses_nothing_and_sees_nothing_twice() {
    let rig = ApiRig::start();
    const N: usize = 300;
    let client = Client::new(rig.socket());
    let writer = {
        let spool = rig.spool.clone();
        rig.rt.spawn(async move {
            for i in 0..N {
                let e = Event::new(format!("e{i:04}"), "qq", "MESSAGE_CREATE", None, json!({}));
                spool.append(&e).await.unwrap();
                if i % 7 == 0 {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
            }
        })
    };
    let seen = rig.rt.block_on(async {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        let mut round = 0usize;
        while seen.len() < N {
            round += 1;
            // Every fourth request is cut off mid-wait, as a consumer that crashes or loses
            // its connection is: it then comes back with the cursor it had.
            if round % 4 == 0 {
                let cut = client.events(cursor.as_deref(), Duration::from_secs(5), 3);
                let _ = tokio::time::timeout(Duration::from_millis(2), cut).await;
                continue;
            }
            let page = client
                .events(cursor.as_deref(), Duration::from_secs(5), 1 + round % 13)
                .await
                .unwrap();
            seen.extend(page.events.into_iter().map(|e| e.event.id));
            cursor = Some(page.next);
        }
        seen
    });
    rig.rt.block_on(writer).unwrap();
    let want: Vec<String> = (0..N).map(|i| format!("e{i:04}")).collect();
    assert_eq!(seen, want);
}

#[test]
fn cursors_hold_across_a_real_rotation() {
    let rig = ApiRig::start();
    // Large events, so that the real 64 MiB rotation comes after about a thousand of them.
    let blob = "x".repeat(60_000);
    let per_event = blob.len() as u64 + 200;
    // The documented rotation size, spelled out rather than asked of the code under test.
    let total = (64 * 1024 * 1024 / per_event + 40) as usize;
    let append = |i: usize| {
        rig.append_event(Event::new(
            format!("big{i:05}"),
            "qq",
            "MESSAGE_CREATE",
            None,
            json!({ "blob": blob }),
        ))
    };
    let half = total / 2;
    (0..half).for_each(append);
    let client = Client::new(rig.socket());
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let read = |seen: &mut Vec<String>, cursor: &mut Option<String>| loop {
        let page = rig
            .rt
            .block_on(client.events(cursor.as_deref(), Duration::ZERO, 1000))
            .unwrap();
        if page.events.is_empty() {
            return;
        }
        assert!(page.events.len() < 1000, "a page stops at its byte budget");
        seen.extend(page.events.into_iter().map(|e| e.event.id));
        *cursor = Some(page.next);
    };
    read(&mut seen, &mut cursor);
    assert_eq!(seen.len(), half);
    (half..total).for_each(append);
    let rotated = rig.spool.dir().join("events.jsonl.1");
    assert!(rotated.exists(), "the spool rotated");
    read(&mut seen, &mut cursor);
    let want: Vec<String> = (0..total).map(|i| format!("big{i:05}")).collect();
    assert_eq!(
        seen, want,
        "every event once, in order, across the rotation"
    );
}

#[test]
fn each_bad_request_is_a_4xx_that_names_the_field_and_queues_nothing() {
    let rig = ApiRig::start();
    let ok = json!({"adapter": "qq", "target": "group:G1", "text": "hi", "idempotency_key": "k1"});
    let with = |k: &str, v: serde_json::Value| {
        let mut b = ok.clone();
        b[k] = v;
        b.to_string()
    };
    let without = |k: &str| {
        let mut b = ok.clone();
        b.as_object_mut().unwrap().remove(k);
        b.to_string()
    };
    let cases: Vec<(String, u16, &str, Option<&str>)> = vec![
        ("{not json".into(), 400, "bad_json", None),
        ("[1,2]".into(), 400, "bad_json", None),
        (with("reply-to", json!("x")), 400, "unknown_field", None),
        (without("adapter"), 400, "missing_field", Some("adapter")),
        (without("target"), 400, "missing_field", Some("target")),
        (without("text"), 400, "missing_field", Some("text")),
        (
            without("idempotency_key"),
            400,
            "missing_idempotency_key",
            Some("idempotency_key"),
        ),
        (
            with("adapter", json!(7)),
            400,
            "invalid_field",
            Some("adapter"),
        ),
        (
            with("policy", json!("twice")),
            400,
            "invalid_field",
            Some("policy"),
        ),
        (
            with("adapter", json!("irc")),
            400,
            "unknown_adapter",
            Some("adapter"),
        ),
        (
            with("target", json!("guild-G1")),
            400,
            "bad_target",
            Some("target"),
        ),
        (with("text", json!("   ")), 400, "empty_text", Some("text")),
        (
            with("text", json!("y".repeat(MAX_TEXT + 1))),
            400,
            "text_too_long",
            Some("text"),
        ),
        (
            with("idempotency_key", json!("")),
            400,
            "missing_idempotency_key",
            Some("idempotency_key"),
        ),
        (
            with("idempotency_key", json!("k\u{7}")),
            400,
            "bad_idempotency_key",
            Some("idempotency_key"),
        ),
        (
            with("text", json!("z".repeat(hermes_svc::api::MAX_BODY))),
            413,
            "body_too_large",
            None,
        ),
        // Two of the same field: readers disagree on which counts, so neither does.
        (
            r#"{"adapter":"qq","target":"group:G1","text":"hi","idempotency_key":"k1","idempotency_key":"k2"}"#.into(),
            400,
            "duplicate_field",
            Some("idempotency_key"),
        ),
        (
            r#"{"adapter":"qq","target":"group:G1","text":"hi","text":"bye","idempotency_key":"k1"}"#.into(),
            400,
            "duplicate_field",
            Some("text"),
        ),
    ];
    for (body, status, code, field) in &cases {
        let answer = rig.post("/v1/messages", body.as_bytes());
        let short: String = body.chars().take(60).collect();
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (*status, *code),
            "{short}"
        );
        let error = &answer.json()["error"];
        assert_eq!(error["field"].as_str(), *field, "{short}");
        let message = error["message"].as_str().unwrap();
        if let Some(field) = field {
            assert!(message.contains(field), "{message}");
        }
    }
    assert_eq!(rig.queued(), 0, "nothing was queued");

    // Then a good one is queued once, however often it is sent.
    let first = rig.post("/v1/messages", ok.to_string().as_bytes());
    assert_eq!(first.status, 202);
    let id = first.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(first.headers["location"], format!("/v1/messages/{id}"));
    let again = rig.post("/v1/messages", ok.to_string().as_bytes());
    assert_eq!(again.status, 200);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.json(), first.json());
    assert_eq!(rig.queued(), 1);
    // The same key for another message is a conflict, and queues nothing.
    let reused = rig.post("/v1/messages", with("text", json!("other")).as_bytes());
    assert_eq!(
        (reused.status, reused.code().as_str()),
        (409, "idempotency_key_reused")
    );
    assert_eq!(rig.queued(), 1);
    assert_eq!(rig.get(&format!("/v1/messages/{id}")).json(), first.json());
    let unknown = rig.get("/v1/messages/nope");
    assert_eq!(
        (unknown.status, unknown.code().as_str()),
        (404, "unknown_message")
    );

    for (query, status, code) in [
        ("wait=2m", 400, "bad_wait"),
        ("wait=soon", 400, "bad_wait"),
        ("limit=0", 400, "bad_limit"),
        ("limit=1001", 400, "bad_limit"),
        ("after=somewhere", 400, "bad_cursor"),
        ("from=start", 400, "bad_query"),
        ("after=i1.o10.h0", 410, "cursor_gone"),
    ] {
        let answer = rig.get(&format!("/v1/events?{query}"));
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (status, code),
            "{query}"
        );
    }
    let nowhere = rig.get("/v2/events");
    assert_eq!(
        (nowhere.status, nowhere.code().as_str()),
        (404, "not_found")
    );
    let wrong = rig.post("/v1/health", b"");
    assert_eq!(
        (wrong.status, wrong.code().as_str()),
        (405, "method_not_allowed")
    );
}

#[test]
fn a_stop_answers_a_waiting_long_poll_at_once() {
    let mut rig = ApiRig::start();
    let sock = rig.socket();
    let poll = std::thread::spawn(move || {
        let start = Instant::now();
        (
            http(&sock, "GET", "/v1/events?after=end&wait=60s", None),
            start.elapsed(),
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    rig.stop();
    let (answer, took) = poll.join().unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(ids(&answer.json()), Vec::<String>::new());
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// Issue 26: a retry must be the same message, and `policy` is part of it. The same key
/// with the other policy is a different message: refused, and nothing new queued.
#[test]
fn the_same_key_with_another_policy_is_a_conflict() {
    let rig = ApiRig::start();
    let body = |policy: &str| {
        json!({"adapter": "qq", "target": "group:G1", "text": "hi", "idempotency_key": "kp", "policy": policy})
            .to_string()
    };
    let first = rig.post("/v1/messages", body("at-most-once").as_bytes());
    assert_eq!(first.status, 202);
    let again = rig.post("/v1/messages", body("at-most-once").as_bytes());
    assert_eq!(again.status, 200, "the same message is replayed");
    let other = rig.post("/v1/messages", body("at-least-once").as_bytes());
    assert_eq!(
        (other.status, other.code().as_str()),
        (409, "idempotency_key_reused"),
        "{}",
        String::from_utf8_lossy(&other.body)
    );
    assert_eq!(other.json()["error"]["field"], "idempotency_key");
    assert_eq!(rig.queued(), 1);
}

/// The longest text a platform takes (Telegram's 65,536 characters) is sendable however the
/// client spells it in JSON: here every character an emoji escaped as a surrogate pair, 12
/// bytes each, the longest spelling there is.
#[test]
fn the_longest_text_fits_in_a_body_in_its_longest_json_spelling() {
    let rig = ApiRig::start();
    let escaped = "\\ud83d\\ude00".repeat(TG_MAX_TEXT);
    let body = format!(
        r#"{{"adapter":"tg","target":"123456","text":"{escaped}","idempotency_key":"long"}}"#
    );
    assert!(body.len() > 768 * 1024, "{}", body.len());
    let answer = rig.post("/v1/messages", body.as_bytes());
    assert_eq!(
        answer.status,
        202,
        "{}",
        String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
    );
    let id = answer.json()["id"].as_str().unwrap().to_owned();
    let stored = rig
        .rt
        .block_on(Client::new(rig.socket()).message(&id))
        .unwrap()
        .unwrap();
    assert_eq!(stored.text.chars().count(), TG_MAX_TEXT);
    assert!(stored.text.chars().all(|c| c == '\u{1f600}'));
}

/// Raw HTTP on its own connection, left open: a request's head and the first `sent` bytes
/// of a body `length` long.
fn trickle(sock: &Path, length: usize, sent: &[u8]) -> UnixStream {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    .unwrap();
    s.write_all(sent).unwrap();
    s
}

/// Everything the server sends on `s` until it closes it: the bytes, or the error.
fn read_until_closed(mut s: UnixStream) -> std::io::Result<Vec<u8>> {
    let mut all = Vec::new();
    s.read_to_end(&mut all).map(|_| all)
}

/// A body that does not arrive within 10 s of its headers is answered 408 and its
/// connection closed; a connection that sends nothing is closed after 10 s too.
#[test]
fn a_slow_body_and_an_idle_connection_are_cut_off_after_their_timeouts() {
    let rig = ApiRig::start();
    let sock = rig.socket();
    let started = Instant::now();
    let slow = trickle(&sock, 100, b"{");
    let idle = UnixStream::connect(&sock).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let idle = std::thread::spawn(move || read_until_closed(idle));
    let answer = read_until_closed(slow).unwrap();
    let took = started.elapsed();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(answer.contains("\"body_timeout\""), "{answer}");
    assert!(
        took < hermes_svc::api::BODY_TIMEOUT + Duration::from_secs(5),
        "{took:?}"
    );
    let idle = idle.join().unwrap();
    assert!(
        idle.as_ref().is_ok_and(Vec::is_empty),
        "an idle connection is closed without an answer: {idle:?}"
    );
    assert!(started.elapsed() < hermes_svc::api::HEADER_TIMEOUT + Duration::from_secs(5));
    assert_eq!(rig.queued(), 0);
}

/// A full house of connections trickling their bodies does not shut a request out: one of
/// them is closed, without an answer, to admit it.
#[test]
fn trickling_bodies_on_every_connection_do_not_shut_out_a_request() {
    let rig = ApiRig::start();
    let sock = rig.socket();
    let max = hermes_svc::api::MAX_CONNECTIONS;
    let slow: Vec<UnixStream> = (0..max).map(|_| trickle(&sock, 1000, b"{")).collect();
    wait_for(
        Duration::from_secs(20),
        "every trickle to have a place",
        || (rig.api_health()["connections"] == max).then_some(()),
    );
    let body =
        json!({"adapter": "qq", "target": "group:G1", "text": "hi", "idempotency_key": "kt"});
    let started = Instant::now();
    let answer = rig.post("/v1/messages", body.to_string().as_bytes());
    assert_eq!(answer.status, 202);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(rig.queued(), 1);
    let health = rig.api_health();
    assert_eq!(health["state"], "saturated", "{health}");
    assert_eq!(health["shed"], 1, "{health}");
    // Exactly one trickle was shed: closed, with nothing written to it.
    let closed = wait_for(Duration::from_secs(5), "the shed trickle to close", || {
        let closed: Vec<usize> = slow
            .iter()
            .enumerate()
            .filter(|(_, s)| is_closed_unanswered(s))
            .map(|(i, _)| i)
            .collect();
        (!closed.is_empty()).then_some(closed)
    });
    assert_eq!(closed.len(), 1, "{closed:?}");
}

/// Whether the server closed `s` without a byte: a non-blocking read finds the end at once.
fn is_closed_unanswered(s: &UnixStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let closed = matches!((&*s).read(&mut byte), Ok(0))
        || matches!((&*s).read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset);
    s.set_nonblocking(false).unwrap();
    closed
}

/// A full house of long-polls does not shut a request out either: the oldest long-poll is
/// answered at once with what there is (nothing), and its client may ask again.
#[test]
fn long_polls_on_every_connection_do_not_shut_out_a_request() {
    let rig = ApiRig::start();
    let sock = rig.socket();
    let max = hermes_svc::api::MAX_CONNECTIONS;
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..max {
        let (sock, tx) = (sock.clone(), tx.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            let answer = http(&sock, "GET", "/v1/events?after=end&wait=60s", None);
            let _ = tx.send((answer, started.elapsed()));
        });
    }
    wait_for(Duration::from_secs(30), "every long-poll to wait", || {
        (rig.api_health()["long_polls"] == max).then_some(())
    });
    let started = Instant::now();
    let health = rig.get("/v1/health");
    assert_eq!(
        (health.status, health.code().as_str()),
        (503, "no_snapshot")
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let (answer, took) = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("a long-poll answered early");
    assert_eq!(answer.status, 200);
    assert_eq!(ids(&answer.json()), Vec::<String>::new());
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(rx.try_recv().is_err(), "only one long-poll was shed");
    assert_eq!(rig.api_health()["shed"], 1);
    // The rest still wait, and a stop answers them all.
    drop(rig);
}

#[test]
fn a_chat_message_comes_normalised_with_a_reply_the_api_takes() {
    let rig = ApiRig::start();
    let group = "C9F778FE6ADF9D1D1DBE395BF744A33A";
    rig.append_event(Event::new(
        "m1",
        "qq",
        "GROUP_AT_MESSAGE_CREATE",
        Some(2),
        json!({"author": {"member_openid": "E4F4AEA3"}, "content": " hi there",
               "group_openid": group, "id": "ROBOT1.0_abc"}),
    ));
    rig.append_event(Event::new(
        "j1",
        "qq",
        "GROUP_ADD_ROBOT",
        Some(3),
        json!({"group_openid": group}),
    ));
    rig.append_event(Event::new(
        "t1",
        "tg",
        "message",
        Some(4),
        json!({"update_id": 4, "message": {"message_id": 9, "from": {"id": 5, "is_bot": false, "first_name": "Ann"},
               "chat": {"id": 5, "type": "private", "first_name": "Ann"}, "date": 1, "text": "yo"}}),
    ));
    let page = rig.get("/v1/events").json();
    assert_eq!(ids(&page), ["m1", "j1", "t1"]);
    let m = &page["events"][0]["message"];
    assert_eq!(
        m,
        &json!({
            "platform": "qqbot", "adapter": "qq",
            "chat": {"id": group, "type": "group", "name": null},
            "sender": {"id": "E4F4AEA3", "name": null, "is_bot": false, "vouched": true},
            "thread_id": null, "message_id": "ROBOT1.0_abc", "reply_to_message_id": null,
            "message_type": "text", "text": "hi there", "media": [],
            "reply": {"adapter": "qq", "target": format!("group:{group}"), "reply_to": "ROBOT1.0_abc"}
        })
    );
    // Stored here with no gateway judging it: said to be unjudged, which no agent is sent.
    assert_eq!(
        page["events"][0]["access"],
        json!({"admitted": false, "rule": "unjudged"})
    );
    // Not a message: its kind says what it is, and it has no "message" and no verdict.
    assert_eq!(page["events"][1]["kind"], "GROUP_ADD_ROBOT");
    assert!(page["events"][1].get("message").is_none());
    assert!(page["events"][1].get("access").is_none());
    // The raw payload is still there, as stored.
    assert_eq!(page["events"][0]["data"]["content"], " hi there");
    assert_eq!(page["events"][2]["message"]["reply"]["target"], "chat:5");

    // The ready-made reply, with a text and a key, is a message the API queues.
    let mut body = m["reply"].clone();
    body["text"] = json!("hello");
    body["idempotency_key"] = json!("k-reply-1");
    let sent = rig.post("/v1/messages", body.to_string().as_bytes());
    assert_eq!(sent.status, 202, "{:?}", sent.json());
    assert_eq!(sent.json()["target"], format!("group:{group}"));
}

//! A real gateway process with a Matrix adapter (`mx`) against the mock homeserver in this
//! process (the outbox rig's, with the adapter added): messages stored once and in order with
//! the cursor kept after them, a first sync that is a baseline, a kill between receive and
//! append, a hung sync and a half body, a limited timeline filled from `/messages`, a revoked
//! token as needs-login with no request loop, a 429's wait, a reply sent once across a lost
//! answer with its echo the bot's own, encrypted rooms counted, and doctor. Against a
//! homeserver that says what a test wants (`hostile_server.rs`): a `next_batch` past the
//! cursor limit, a kept position that cannot be used, and gaps paged a page at a time within
//! the batch's pages. Profile names start with `mx`.
//! Polls are short here (1 s, with 1 s of grace).

use std::process::Child;
use std::time::{Duration, Instant};

use hermes_svc::gateway::outbox::{Policy, State};
use hermes_svc::mock_platform::{MatrixConfig, MatrixFault, MockConfig, Platform, SendFault};
use serde_json::json;

use crate::harness::wait_for;
use crate::hostile_rig::{self, Running};
use crate::hostile_server::{answer, Answer, Request};
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

const TOKEN_VAR: &str = "MX_ACCESS_TOKEN";

fn rig(profile: &str) -> Rig {
    let config = MatrixConfig::default();
    let extra = format!(
        "[[adapter]]\nname = \"mx\"\nkind = \"matrix\"\nhomeserver = \"{{base}}\"\n\
         user-id = \"{}\"\ntoken-env = \"{TOKEN_VAR}\"\npoll-timeout = \"1s\"\n\
         poll-grace = \"1s\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n",
        config.user_id
    );
    Rig::with_mock(
        profile,
        &extra,
        MockConfig {
            matrix: config,
            ..MockConfig::default()
        },
    )
}

fn gateway(rig: &Rig, faults: &str) -> Child {
    let token = MatrixConfig::default().access_token;
    let mut env = vec![(TOKEN_VAR, token.as_str())];
    if !faults.is_empty() {
        env.push(("HERMES_TEST_FAULT", faults));
    }
    rig.gateway_with_env(&env)
}

fn events(rig: &Rig) -> Vec<serde_json::Value> {
    rig.events("mx")
}

fn stored(rig: &Rig) -> Vec<String> {
    rig.stored("mx")
}

fn wait_stored(rig: &Rig, ids: &[String], timeout: Duration) {
    wait_for(timeout, "the events in the spool", || {
        let s = stored(rig);
        ids.iter().all(|id| s.contains(id)).then_some(())
    });
}

/// Wait until the adapter has answered syncs past its first (so it holds a cursor).
fn syncing(rig: &Rig) {
    let before = rig.mock.matrix_stats().syncs_answered;
    wait_for(Duration::from_secs(20), "the adapter to sync", || {
        (rig.mock.matrix_stats().syncs_answered > before + 1).then_some(())
    });
}

fn adapter_state(rig: &Rig) -> Option<(String, String)> {
    let s = rig.state()?;
    let c = s["components"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == "mx")?
        .clone();
    Some((
        c["state"].as_str()?.to_owned(),
        c["last_error"].as_str().unwrap_or("").to_owned(),
    ))
}

fn cursor(rig: &Rig) -> Option<String> {
    std::fs::read_to_string(rig.profile_home().join("inbox/cursors/mx")).ok()
}

#[test]
fn messages_are_stored_once_in_order_after_a_first_sync_that_is_a_baseline() {
    let rig = rig("mxorder");
    // Said before the bot ever synced: history, not messages to answer.
    let history = rig.mock.matrix_emit(2);
    let mut gw = gateway(&rig, "");
    syncing(&rig);
    let ids = rig.mock.matrix_emit(30);
    wait_stored(&rig, &ids, Duration::from_secs(20));
    assert_eq!(
        stored(&rig),
        ids,
        "in order, once each, none of the history"
    );
    assert!(history.iter().all(|h| !stored(&rig).contains(h)));
    // The kept cursor moves on with each stored batch.
    let kept = cursor(&rig).expect("a kept cursor");
    let more = rig.mock.matrix_emit(1);
    wait_stored(&rig, &more, Duration::from_secs(10));
    wait_for(Duration::from_secs(10), "the cursor to move", || {
        (cursor(&rig).as_ref() != Some(&kept)).then_some(())
    });
    sigterm(&mut gw);
    let log = rig.log();
    assert!(
        !log.contains(&MatrixConfig::default().access_token),
        "the token leaked: {log}"
    );
}

/// Arm `fault` for one sync and release the sync held now, so the next one meets it; returns
/// once it has struck (the mock counted a sync it hung or refused).
fn strike(rig: &Rig, fault: MatrixFault) -> Vec<String> {
    let s = rig.mock.matrix_stats();
    let before = s.hung + s.refused;
    rig.mock.matrix_set_fault_for(fault, 1);
    let released = rig.mock.matrix_emit(1);
    wait_for(Duration::from_secs(10), "the fault to strike", || {
        let s = rig.mock.matrix_stats();
        (s.hung + s.refused > before).then_some(())
    });
    released
}

#[test]
fn killed_between_receive_and_spool_append_the_events_come_again_after_restart() {
    let rig = rig("mxkill");
    let mut gw = gateway(&rig, "");
    syncing(&rig);
    sigterm(&mut gw);
    let mut gw = gateway(&rig, "kill:poll-received");
    let ids = rig.mock.matrix_emit(3);
    killed_by_fault(&mut gw, Duration::from_secs(20));
    assert!(stored(&rig).is_empty(), "killed before the append");
    let mut gw = gateway(&rig, "");
    wait_stored(&rig, &ids, Duration::from_secs(20));
    assert_eq!(stored(&rig), ids, "each once");
    sigterm(&mut gw);
}

#[test]
fn a_hung_sync_and_a_half_body_are_dead_connections_and_syncing_goes_on() {
    let rig = rig("mxhang");
    let mut gw = gateway(&rig, "");
    syncing(&rig);
    for fault in [MatrixFault::HangSyncs, MatrixFault::HalfBody] {
        let mut ids = strike(&rig, fault);
        ids.extend(rig.mock.matrix_emit(2));
        // Within the struck sync's deadline (2 s), a backoff and a sync.
        wait_stored(&rig, &ids, Duration::from_secs(10));
    }
    let dead = rig.log().matches("dead connection").count();
    assert!(dead >= 2, "{}", rig.log());
    sigterm(&mut gw);
}

#[test]
fn a_limited_timeline_after_the_gateway_was_away_is_filled_from_messages() {
    let rig = rig("mxgap");
    let mut gw = gateway(&rig, "");
    syncing(&rig);
    sigterm(&mut gw);
    // Away while 120 messages came: more than the filter's 50 a sync.
    let ids = rig.mock.matrix_emit(120);
    let mut gw = gateway(&rig, "");
    wait_stored(&rig, &ids, Duration::from_secs(20));
    assert_eq!(stored(&rig), ids, "the gap filled, oldest first, each once");
    let s = rig.mock.matrix_stats();
    assert!(s.limited >= 1 && s.messages_requests >= 1, "{s:?}");
    sigterm(&mut gw);
}

#[test]
fn a_revoked_token_is_needs_login_with_no_request_loop_and_recovers_when_taken_again() {
    let rig = rig("mxlogin");
    let mut gw = gateway(&rig, "");
    syncing(&rig);
    rig.mock.matrix_revoke_token();
    let (_, error) = wait_for(Duration::from_secs(10), "needs-login", || {
        adapter_state(&rig).filter(|(state, _)| state == "needs-login")
    });
    assert!(
        error.contains("M_UNKNOWN_TOKEN") && error.contains(TOKEN_VAR),
        "{error}"
    );
    let syncs = rig.mock.matrix_stats().syncs;
    let since = Instant::now();
    wait_for(Duration::from_secs(10), "3 s to pass", || {
        (since.elapsed() > Duration::from_secs(3)).then_some(())
    });
    assert_eq!(
        rig.mock.matrix_stats().syncs,
        syncs,
        "no sync while the token is refused"
    );
    assert_eq!(
        adapter_state(&rig).unwrap().0,
        "needs-login",
        "and still alive"
    );
    rig.mock.matrix_restore_token();
    let ids = rig.mock.matrix_emit(1);
    wait_stored(&rig, &ids, Duration::from_secs(15));
    sigterm(&mut gw);
}

#[test]
fn a_429_waits_what_it_names_and_server_errors_back_off() {
    let rig = rig("mx429");
    let mut gw = gateway(&rig, "");
    syncing(&rig);
    let limit = MatrixFault::RateLimited {
        retry_after_ms: Some(1500),
        header_secs: None,
    };
    let mut ids = strike(&rig, limit);
    let struck = rig.mock.matrix_stats().sync_times.len();
    wait_for(Duration::from_secs(10), "the next sync", || {
        (rig.mock.matrix_stats().sync_times.len() > struck).then_some(())
    });
    let times = rig.mock.matrix_stats().sync_times;
    let waited = times[struck] - times[struck - 1];
    assert!(waited >= Duration::from_millis(1450), "waited {waited:?}");
    // Ten 502s with a proxy's page: backed off, not a loop.
    let s = rig.mock.matrix_stats();
    let (before, refused) = (s.sync_times.len(), s.refused);
    let error = MatrixFault::ServerError {
        status: 502,
        html: true,
    };
    rig.mock.matrix_set_fault_for(error, 10);
    ids.extend(rig.mock.matrix_emit(1));
    let started = Instant::now();
    wait_for(Duration::from_secs(30), "ten 502s", || {
        (rig.mock.matrix_stats().refused >= refused + 10).then_some(())
    });
    let took = started.elapsed();
    wait_stored(&rig, &ids, Duration::from_secs(10));
    let times = rig.mock.matrix_stats().sync_times;
    let requests = times.len() - before;
    assert!(requests <= 13, "{requests} syncs in {took:?}");
    // Each 502 is followed by a jittered backoff of at least `backoff-min` (200 ms), never
    // an at-once retry: ten failures in a row make at least nine such gaps (the jitter
    // decides how long each is, so their sum is not asserted).
    let gaps: Vec<Duration> = times[before..].windows(2).map(|w| w[1] - w[0]).collect();
    let backed_off = gaps
        .iter()
        .filter(|g| **g >= Duration::from_millis(190))
        .count();
    assert!(backed_off >= 9, "gaps between syncs: {gaps:?}");
    sigterm(&mut gw);
}

#[test]
fn a_reply_is_posted_once_across_a_lost_answer_and_its_echo_is_the_bots_own() {
    let rig = rig("mxreply");
    let mut gw = gateway(&rig, "");
    syncing(&rig);
    assert!(rig.wait_api(&mut gw));
    let asked = rig.mock.matrix_emit(1).remove(0);
    wait_stored(&rig, std::slice::from_ref(&asked), Duration::from_secs(10));
    let room = MatrixConfig::default().rooms[0].clone();
    rig.mock
        .set_send_fault(Platform::Matrix, SendFault::ResetAfterProcessing(1));
    // At-most-once, and still sent again: the transaction id makes the repeat the same event.
    let message = rig
        .submit(
            "mx-reply-1",
            ("mx", &format!("room:{room}")),
            "on it",
            Some(&asked),
            Policy::AtMostOnce,
        )
        .unwrap();
    rig.wait_drained(&gw, Duration::from_secs(20));
    let m = rig.message(&message.id);
    assert_eq!(m.state, State::Sent, "{m:?}");
    let posts = rig.posts();
    assert_eq!(posts.len(), 1, "posted once: {posts:?}");
    assert_eq!(posts[0].reply_to.as_deref(), Some(asked.as_str()));
    assert!(rig.mock.matrix_stats().txn_hits >= 1);
    assert_eq!(m.platform_id.as_deref(), Some(posts[0].message_id.as_str()));
    wait_for(
        Duration::from_secs(10),
        "the echo stored as the bot's",
        || {
            events(&rig)
                .into_iter()
                .find(|e| e["data"]["hermes_svc.own"] == true)
                .map(|_| ())
        },
    );
    sigterm(&mut gw);
}

#[test]
fn encrypted_events_are_counted_in_status_and_not_stored() {
    let rig = rig("mxcrypt");
    let mut gw = gateway(&rig, "");
    syncing(&rig);
    let room = MatrixConfig::default().rooms[0].clone();
    rig.mock.matrix_enable_encryption(&room);
    let secret = rig.mock.matrix_emit_encrypted(&room);
    wait_for(Duration::from_secs(10), "the count in status", || {
        adapter_state(&rig).filter(|(_, e)| e.contains("encrypted room") && e.contains("1 event"))
    });
    assert!(!stored(&rig).contains(&secret));
    sigterm(&mut gw);
}

/// doctor's findings for the rig's profile, with the token in its `.env` (no manager is
/// asked: the bus addresses lead nowhere, which doctor reports as HSV000 and goes on).
fn doctor(rig: &Rig) -> Vec<serde_json::Value> {
    use std::os::unix::fs::PermissionsExt;
    let env = rig.profile_home().join(".env");
    let text = format!(
        "{TOKEN_VAR}={}\nOB_DC_TOKEN=dc\nOB_QQ_SECRET=qq\n",
        MatrixConfig::default().access_token
    );
    std::fs::write(&env, text).unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = rig
        .hermes()
        .args(["doctor", "--json"])
        .env(
            "DBUS_SYSTEM_BUS_ADDRESS",
            "unix:path=/nonexistent/mx-system-bus",
        )
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            "unix:path=/nonexistent/mx-user-bus",
        )
        .env("XDG_RUNTIME_DIR", "/nonexistent/mx-runtime")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["id"] == "HSV020")
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .into_iter()
        .map(serde_json::Value::String)
        .collect()
}

#[test]
fn doctor_names_a_revoked_token_and_the_encrypted_rooms_with_the_fix() {
    let rig = rig("mxdoctor");
    assert!(doctor(&rig).is_empty(), "{:?}", doctor(&rig));
    let room = MatrixConfig::default().rooms[0].clone();
    rig.mock.matrix_enable_encryption(&room);
    let found = doctor(&rig);
    assert!(
        found.iter().any(
            |f| f.to_string().contains("end-to-end encrypted") && f.to_string().contains(&room)
        ),
        "{found:?}"
    );
    rig.mock.matrix_revoke_token();
    let found = doctor(&rig);
    assert!(
        found.iter().any(|f| f.to_string().contains("M_UNKNOWN_TOKEN") && f.to_string().contains(TOKEN_VAR)),
        "{found:?}"
    );
    let text = serde_json::to_string(&found).unwrap();
    assert!(
        !text.contains(&MatrixConfig::default().access_token),
        "{text}"
    );
}

/// A `/sync` answer (spec, `GET /_matrix/client/v3/sync`) from a homeserver that says what
/// a test wants: `next_batch`, and the message `event` in one joined room's timeline.
fn sync_answer(next_batch: &str, event: Option<&str>) -> Answer {
    let events: Vec<serde_json::Value> = event
        .into_iter()
        .map(|id| {
            json!({"type": "m.room.message", "event_id": id, "sender": "@alice:hs",
                "origin_server_ts": 1, "content": {"msgtype": "m.text", "body": "hello"}})
        })
        .collect();
    let timeline = json!({"events": events, "limited": false, "prev_batch": "p0"});
    let body = json!({"next_batch": next_batch,
        "rooms": {"join": {"!room:hs": {"timeline": timeline}}}});
    answer(200, body.to_string())
}

/// The `since` a sync went from, if any.
fn since(r: &Request) -> Option<&str> {
    r.query.split('&').find_map(|kv| kv.strip_prefix("since="))
}

fn hostile_cursor(rig: &hostile_rig::Rig) -> Option<String> {
    std::fs::read_to_string(rig.profile_home().join("inbox/cursors/mx")).ok()
}

/// A 1 MiB `next_batch` was staged past the limit the cursor file's reader applies, and every
/// later `/sync` failed to build its URL: no request reached the homeserver again. Now it is
/// refused where it is taken, said, and its batch not taken; syncing goes on from the last
/// position kept, and a good batch moves it on.
#[test]
fn a_next_batch_past_the_limit_is_refused_said_and_syncing_goes_on() {
    let rig = hostile_rig::matrix("mxhuge");
    let huge = "s".repeat(1 << 20);
    rig.server.generate("/sync", move |n| match n {
        0 => sync_answer("s1", None),
        1 | 2 => sync_answer(&huge, Some("$late")),
        3 => sync_answer("s3", Some("$late")),
        _ => sync_answer("s3", None).held(Duration::from_millis(500)),
    });
    let _gw = Running(rig.gateway(""));
    wait_for(Duration::from_secs(30), "a sync from s3", || {
        let syncs = rig.server.requests("/sync");
        syncs.iter().any(|r| since(r) == Some("s3")).then_some(())
    });
    let syncs = rig.server.requests("/sync");
    let froms: Vec<Option<&str>> = syncs[..5].iter().map(since).collect();
    assert_eq!(
        froms,
        [None, Some("s1"), Some("s1"), Some("s1"), Some("s3")],
        "{}",
        rig.log()
    );
    assert!(syncs.iter().all(|r| r.query.len() < 64 * 1024));
    let ids: Vec<String> = rig.events().into_iter().map(|e| e.id).collect();
    assert_eq!(ids, ["$late"]);
    assert_eq!(hostile_cursor(&rig).as_deref(), Some("s3"));
    let c = rig.component("mx", |c| c["last_error"].is_string());
    assert!(
        c["last_error"].as_str().unwrap().contains("next_batch"),
        "{c}"
    );
}

/// After a restart, a cursor file the reader refused was a warning, and the adapter synced as
/// a new client whose first sync is a baseline: the gap was skipped in silence. Now the
/// position that cannot be used is said in status, and the sync from none is stored.
#[test]
fn a_kept_position_that_cannot_be_used_is_said_and_the_fresh_sync_is_stored() {
    let rig = hostile_rig::matrix("mxrefused");
    let cursors = rig.profile_home().join("inbox/cursors");
    std::fs::create_dir_all(&cursors).unwrap();
    std::fs::write(cursors.join("mx"), "s".repeat(1 << 20)).unwrap();
    rig.server.generate("/sync", |n| match n {
        0 => sync_answer("s5", Some("$gap")),
        _ => sync_answer("s5", None).held(Duration::from_millis(500)),
    });
    let _gw = Running(rig.gateway(""));
    let c = rig.component("mx", |c| {
        c["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("sync position cannot be used"))
    });
    wait_for(Duration::from_secs(30), "the fresh sync's message", || {
        rig.events().iter().any(|e| e.id == "$gap").then_some(())
    });
    assert_eq!(since(&rig.server.requests("/sync")[0]), None, "{c}");
    wait_for(Duration::from_secs(10), "the cursor kept", || {
        (hostile_cursor(&rig).as_deref() == Some("s5")).then_some(())
    });
}

/// The caps on a sync's gap paging (`platform/matrix/receive/backfill.rs`).
const PAGES_PER_ROOM: usize = 20;
const PAGES_PER_BATCH: usize = 50;

/// Each limited room's gap was paged whole, and every room's held, before anything was
/// stored: one sync with 10 limited rooms of 7.9 MB pages took the process to 2.08 GiB. Now
/// each page is in the spool before the next is asked for, the pages of a batch are capped,
/// and the cursor moves on after the batch. Three rooms with endless gaps (two events a page)
/// ask for more than the batch's pages: the first two get a room's 20, the third the rest.
#[test]
fn a_gap_is_stored_page_by_page_within_the_batchs_pages_and_the_cursor_moves_on() {
    let rig = hostile_rig::matrix("mxpages");
    let rooms = ["!r0:hs", "!r1:hs", "!r2:hs"];
    rig.server.generate("/sync", move |n| match n {
        0 => sync_answer("s1", None),
        1 => {
            let join: serde_json::Map<String, serde_json::Value> = (0..rooms.len())
                .map(|r| {
                    let event = json!({"type": "m.room.message", "event_id": format!("$r{r}t"),
                        "sender": "@alice:hs", "origin_server_ts": 2,
                        "content": {"msgtype": "m.text", "body": "latest"}});
                    let timeline =
                        json!({"events": [event], "limited": true, "prev_batch": format!("p{r}")});
                    (rooms[r].to_owned(), json!({"timeline": timeline}))
                })
                .collect();
            answer(
                200,
                json!({"next_batch": "s2", "rooms": {"join": join}}).to_string(),
            )
        }
        _ => sync_answer("s2", None).held(Duration::from_millis(500)),
    });
    // For each page asked: its room, its place, its query and what the spool held then.
    type Asked = Vec<(usize, usize, String, Vec<String>)>;
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Asked::new()));
    let (record, inbox) = (asked.clone(), rig.profile_home().join("inbox"));
    rig.server.answer_each("/messages", move |request, _| {
        let room = rooms.iter().position(|r| request.path.contains(r)).unwrap();
        let mut asked = record.lock().unwrap();
        let page = asked.iter().filter(|(r, ..)| *r == room).count();
        let stored: Vec<String> = hermes_svc::gateway::spool::read(&inbox, None)
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.id)
            .collect();
        asked.push((room, page, request.query.clone(), stored));
        let chunk: Vec<serde_json::Value> = (0..2)
            .map(|i| {
                json!({"type": "m.room.message", "event_id": format!("$r{room}p{page}e{i}"),
                    "sender": "@alice:hs", "origin_server_ts": 1, "room_id": rooms[room],
                    "content": {"msgtype": "m.text", "body": "gap"}})
            })
            .collect();
        let end = format!("g{room}-{}", page + 1);
        answer(
            200,
            json!({"chunk": chunk, "start": "x", "end": end}).to_string(),
        )
    });
    let _gw = Running(rig.gateway(""));
    wait_for(Duration::from_secs(60), "the batch's cursor kept", || {
        (hostile_cursor(&rig).as_deref() == Some("s2")).then_some(())
    });
    let asked = asked.lock().unwrap().clone();
    assert!(
        asked.len() <= PAGES_PER_BATCH,
        "{} pages asked",
        asked.len()
    );
    let mut want = Vec::new();
    for (room, id) in rooms.iter().enumerate() {
        let pages = asked.iter().filter(|(r, ..)| *r == room).count();
        assert_eq!(
            pages,
            PAGES_PER_ROOM.min(PAGES_PER_BATCH - room * PAGES_PER_ROOM)
        );
        let first = &asked.iter().find(|(r, ..)| *r == room).unwrap().2;
        assert!(
            first.contains("dir=f")
                && first.contains("from=s1")
                && first.contains(&format!("to=p{room}")),
            "{id}: {first}"
        );
        want.extend((0..pages).flat_map(|p| (0..2).map(move |i| format!("$r{room}p{p}e{i}"))));
        want.push(format!("$r{room}t"));
    }
    // Each page was in the spool before the next one was asked for.
    for (room, page, _, stored) in asked.iter().filter(|(_, page, ..)| *page > 0) {
        let before = format!("$r{room}p{}e1", page - 1);
        assert!(
            stored.contains(&before),
            "page {page} of room {room} asked before {before} was stored"
        );
    }
    let ids: Vec<String> = rig.events().into_iter().map(|e| e.id).collect();
    assert_eq!(
        ids, want,
        "every page and timeline once, each room oldest first"
    );
}

/// A 1×1 PNG.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0\x90wS\xde";

#[test]
fn an_image_reaches_the_agent_as_a_local_file_fetched_with_the_token() {
    let port = crate::harness::free_port();
    let config = MatrixConfig::default();
    let extra = format!(
        "[[adapter]]\nname = \"mx\"\nkind = \"matrix\"\nhomeserver = \"{{base}}\"\n\
         user-id = \"{}\"\ntoken-env = \"{TOKEN_VAR}\"\npoll-timeout = \"1s\"\n\
         poll-grace = \"1s\"\n\n{}[agent]\nkind = \"hermes-relay\"\nport = {port}\n",
        config.user_id,
        crate::hermes_rig::OPEN
    );
    let rig = Rig::with_mock(
        "mxmedia",
        &extra,
        MockConfig {
            matrix: config,
            ..MockConfig::default()
        },
    );
    let mut gw = gateway(&rig, "");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    syncing(&rig);
    let mut agent = crate::relay::greeted(&rig, port);
    let room = MatrixConfig::default().rooms[0].clone();
    rig.mock.matrix_emit_image(&room, "cat.png", PNG.to_vec());
    let inbound = rig.rt.block_on(agent.next_of("inbound"));
    let event = &inbound["event"];
    assert_eq!(event["message_type"], "photo", "{inbound}");
    let path = event["media_urls"][0].as_str().expect("a local path");
    assert!(
        path.starts_with(rig.profile_home().join("media").to_str().unwrap()),
        "{path}"
    );
    assert_eq!(std::fs::read(path).unwrap(), PNG, "the same bytes");
    assert!(path.ends_with("_cat.png"), "{path}");
    sigterm(&mut gw);
}

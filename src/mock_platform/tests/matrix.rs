//! The mock homeserver against a real HTTP client (reqwest) over loopback, checked against
//! docs/research/matrix-client-server.md: tokens, the `/sync` long poll, limited timelines
//! and `/messages`, idempotent sends and their echo, encrypted rooms and filters here; the
//! faults in `faults.rs`. Long polls ask for at most a few hundred milliseconds unless an event is meant
//! to end them early.

use std::time::Duration;

use reqwest::header::HeaderMap;

use super::*;
use crate::mock_platform::{MatrixConfig, MatrixFault, MatrixStats, Platform, SendFault, Target};

mod faults;
mod upload;

const TOKEN: &str = "mx-mock-token";
const ROOM: &str = "!room1:mock.test";
const ROOM2: &str = "!room2:mock.test";
const BOT: &str = "@bot:mock.test";

async fn matrix_mock(matrix: MatrixConfig) -> MockPlatform {
    MockPlatform::start(MockConfig {
        matrix,
        ..MockConfig::default()
    })
    .await
    .unwrap()
}

fn two_rooms() -> MatrixConfig {
    MatrixConfig {
        rooms: vec![ROOM.into(), ROOM2.into()],
        encrypted_rooms: vec![ROOM2.into()],
        ..MatrixConfig::default()
    }
}

fn v3(mock: &MockPlatform, path: &str) -> String {
    format!("{}/_matrix/client/v3/{path}", mock.http_base())
}

/// Percent-encodes everything but the unreserved characters, as a query value must be.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn query(pairs: &[(&str, &str)]) -> String {
    let pairs: Vec<String> = pairs
        .iter()
        .map(|(key, value)| format!("{key}={}", encode(value)))
        .collect();
    pairs.join("&")
}

/// An answer as the client saw it; the body kept as text, since a proxy's is not JSON.
struct Answered {
    status: u16,
    headers: HeaderMap,
    text: String,
}

impl Answered {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The Matrix error this is, as `(status, errcode)`.
    fn error(&self) -> (u16, String) {
        let body = self.json();
        assert!(body["error"].is_string(), "{}: {}", self.status, self.text);
        let errcode = body["errcode"].as_str().unwrap_or_default().to_owned();
        (self.status, errcode)
    }
}

async fn call(what: &str, request: reqwest::RequestBuilder) -> Answered {
    let response = within(what, request.send()).await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = within(what, response.text()).await.unwrap();
    Answered {
        status,
        headers,
        text,
    }
}

async fn get(mock: &MockPlatform, path: &str) -> Answered {
    call(path, client().get(v3(mock, path)).bearer_auth(TOKEN)).await
}

async fn sync_call(mock: &MockPlatform, params: &[(&str, &str)]) -> Answered {
    let url = format!("{}?{}", v3(mock, "sync"), query(params));
    call("a sync", client().get(url).bearer_auth(TOKEN)).await
}

/// A sync that must succeed; its body.
async fn sync(mock: &MockPlatform, params: &[(&str, &str)]) -> Value {
    let answered = sync_call(mock, params).await;
    assert_eq!(answered.status, 200, "{}", answered.text);
    assert_eq!(answered.header("content-type"), Some("application/json"));
    answered.json()
}

async fn initial(mock: &MockPlatform) -> String {
    let body = sync(mock, &[("timeout", "0")]).await;
    body["next_batch"].as_str().unwrap().to_owned()
}

fn timeline<'a>(body: &'a Value, room: &str) -> &'a Value {
    &body["rooms"]["join"][room]["timeline"]
}

fn ids(events: &Value) -> Vec<String> {
    let events = events.as_array().cloned().unwrap_or_default();
    let ids = events
        .iter()
        .map(|e| e["event_id"].as_str().unwrap_or_default().to_owned());
    ids.collect()
}

async fn send(mock: &MockPlatform, path: &str, content: Value) -> Answered {
    let url = v3(mock, path);
    call(
        "a send",
        client().put(url).bearer_auth(TOKEN).json(&content),
    )
    .await
}

fn send_path(room: &str, txn: &str) -> String {
    format!("rooms/{}/send/m.room.message/{txn}", encode(room))
}

async fn wait_for_matrix(mock: &MockPlatform, what: &str, check: impl Fn(&MatrixStats) -> bool) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let stats = mock.matrix_stats();
        if check(&stats) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn whoami_answers_the_token_and_refuses_a_missing_or_wrong_one() {
    let mock = matrix_mock(MatrixConfig::default()).await;
    let versions = format!("{}/_matrix/client/versions", mock.http_base());
    let answered = call("versions", client().get(versions)).await;
    assert_eq!(
        (answered.status, answered.json()),
        (200, json!({"versions": ["v1.11"]}))
    );
    let whoami = get(&mock, "account/whoami").await;
    assert_eq!(whoami.status, 200);
    assert_eq!(whoami.header("content-type"), Some("application/json"));
    let body = whoami.json();
    assert_eq!(
        (&body["user_id"], &body["device_id"]),
        (&json!(BOT), &json!("MOCKDEVICE"))
    );
    let by_query = format!("{}?access_token={TOKEN}", v3(&mock, "account/whoami"));
    assert_eq!(call("whoami", client().get(by_query)).await.status, 200);

    let missing = call("whoami", client().get(v3(&mock, "account/whoami"))).await;
    assert_eq!(missing.error(), (401, "M_MISSING_TOKEN".into()));
    let wrong = call(
        "whoami",
        client()
            .get(v3(&mock, "account/whoami"))
            .bearer_auth("nope"),
    )
    .await;
    assert_eq!(wrong.error(), (401, "M_UNKNOWN_TOKEN".into()));
    assert_eq!(wrong.json()["soft_logout"], false);

    let rooms = get(&mock, "joined_rooms").await;
    assert_eq!(rooms.json(), json!({"joined_rooms": [ROOM]}));
    assert_eq!(
        get(&mock, "nope").await.error(),
        (404, "M_UNRECOGNIZED".into())
    );
    let wrong_method = call(
        "a PUT sync",
        client().put(v3(&mock, "sync")).bearer_auth(TOKEN),
    );
    assert_eq!(wrong_method.await.error(), (405, "M_UNRECOGNIZED".into()));
    assert_eq!(mock.matrix_stats().whoami, 4);
}

#[tokio::test]
async fn the_initial_sync_answers_at_once_and_the_next_is_held_until_an_event() {
    let mock = matrix_mock(MatrixConfig::default()).await;
    let old = mock.matrix_emit(2);
    let started = Instant::now();
    let first = sync(&mock, &[("timeout", "10000")]).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "an initial sync waited"
    );
    assert_eq!(ids(&timeline(&first, ROOM)["events"]), old);
    assert_eq!(timeline(&first, ROOM)["limited"], false);
    let message = &timeline(&first, ROOM)["events"][0];
    assert_eq!(message["type"], "m.room.message");
    assert_eq!(message["sender"], "@alice:mock.test");
    assert_eq!(
        message["content"],
        json!({"msgtype": "m.text", "body": "matrix message 1"})
    );
    assert!(message["origin_server_ts"]
        .as_u64()
        .is_some_and(|t| t > 1_600_000_000_000));
    assert!(message.get("room_id").is_none(), "{message}");
    let since = first["next_batch"].as_str().unwrap().to_owned();

    // Held until an event arrives, then answered at once: long before its 10 s.
    let url = format!(
        "{}?{}",
        v3(&mock, "sync"),
        query(&[("since", &since), ("timeout", "10000")])
    );
    let held =
        tokio::spawn(
            async move { call("a held sync", client().get(url).bearer_auth(TOKEN)).await },
        );
    wait_for_matrix(&mock, "the sync to be held", |s| s.live_syncs == 1).await;
    let new = mock.matrix_emit(1);
    let answered = within("the early return", held).await.unwrap();
    let body = answered.json();
    assert_eq!(ids(&timeline(&body, ROOM)["events"]), new);
    let next = body["next_batch"].as_str().unwrap().to_owned();
    assert_ne!(next, since);
    assert_eq!(mock.matrix_stats().live_syncs, 0);

    // Nothing new: held for its whole timeout, then the same token back and no rooms.
    let started = Instant::now();
    let empty = sync(&mock, &[("since", &next), ("timeout", "300")]).await;
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "answered before its timeout"
    );
    assert_eq!(empty["next_batch"], next.as_str());
    assert!(empty.get("rooms").is_none(), "{empty}");
    // `timeout=0` and `full_state=true` do not wait either.
    let started = Instant::now();
    sync(&mock, &[("since", &next), ("timeout", "0")]).await;
    let full = sync(
        &mock,
        &[
            ("since", &next),
            ("timeout", "10000"),
            ("full_state", "true"),
        ],
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(full["rooms"]["join"].get(ROOM).is_some(), "{full}");
    let stats = mock.matrix_stats();
    assert_eq!(
        (stats.syncs, stats.syncs_answered, stats.refused, stats.hung),
        (5, 5, 0, 0)
    );
    assert_eq!(stats.sync_times.len(), 5);
}

#[tokio::test]
async fn a_limited_timeline_leaves_a_gap_that_messages_pages_back_to_exactly() {
    let mock = matrix_mock(two_rooms()).await;
    let before = mock.matrix_emit(2);
    let limit_one = r#"{"room":{"timeline":{"limit":1}}}"#;
    let first = sync(&mock, &[("filter", limit_one)]).await;
    assert_eq!(ids(&timeline(&first, ROOM)["events"]), before[1..]);
    assert_eq!(timeline(&first, ROOM)["limited"], true);
    let since = first["next_batch"].as_str().unwrap().to_owned();

    let gap = mock.matrix_emit(7);
    mock.matrix_emit_text(ROOM2, "elsewhere");
    let limit_three = r#"{"room":{"timeline":{"limit":3}}}"#;
    let body = sync(&mock, &[("since", &since), ("filter", limit_three)]).await;
    let line = timeline(&body, ROOM);
    assert_eq!(ids(&line["events"]), gap[4..]);
    assert_eq!(line["limited"], true);
    let prev_batch = line["prev_batch"].as_str().unwrap().to_owned();
    assert_eq!(timeline(&body, ROOM2)["limited"], false);

    // Back from prev_batch to the old since: the four omitted events, newest first, in pages
    // of two; `end` while more is left, none at the end, nothing from before `since`.
    let page = |from: String| {
        let path = format!(
            "rooms/{}/messages?{}",
            encode(ROOM),
            query(&[
                ("dir", "b"),
                ("from", &from),
                ("to", &since),
                ("limit", "2")
            ])
        );
        let mock = &mock;
        async move { get(mock, &path).await.json() }
    };
    let one = page(prev_batch.clone()).await;
    assert_eq!(ids(&one["chunk"]), [gap[3].clone(), gap[2].clone()]);
    assert_eq!(one["start"], prev_batch.as_str());
    assert_eq!(one["chunk"][0]["room_id"], ROOM);
    let two = page(
        one["end"]
            .as_str()
            .expect("an end while more is left")
            .to_owned(),
    )
    .await;
    assert_eq!(ids(&two["chunk"]), [gap[1].clone(), gap[0].clone()]);
    assert!(two.get("end").is_none(), "{two}");

    // Forwards from the old since, and without `to`: everything, in order.
    let path = format!(
        "rooms/{}/messages?{}",
        encode(ROOM),
        query(&[("dir", "f"), ("from", &since)])
    );
    assert_eq!(ids(&get(&mock, &path).await.json()["chunk"]), gap);
    let path = format!("rooms/{}/messages?limit=100&dir=b", encode(ROOM));
    let all = get(&mock, &path).await.json();
    assert_eq!(ids(&all["chunk"]).len(), 9);
    assert!(all.get("end").is_none());

    let no_dir = get(&mock, &format!("rooms/{}/messages", encode(ROOM))).await;
    assert_eq!(no_dir.error(), (400, "M_INVALID_PARAM".into()));
    let elsewhere = get(&mock, "rooms/%21other%3Amock.test/messages?dir=b").await;
    assert_eq!(elsewhere.error(), (403, "M_FORBIDDEN".into()));
    let stats = mock.matrix_stats();
    assert_eq!((stats.limited, stats.messages_requests), (2, 6));
}

#[tokio::test]
async fn a_send_is_idempotent_per_transaction_and_comes_back_as_the_bots_echo() {
    let mock = matrix_mock(MatrixConfig::default()).await;
    let since = initial(&mock).await;
    let reply = json!({"msgtype": "m.text", "body": "pong",
                       "m.relates_to": {"m.in_reply_to": {"event_id": "$orig"}}});
    let first = send(&mock, &send_path(ROOM, "txn1"), reply.clone()).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let event_id = first.json()["event_id"].as_str().unwrap().to_owned();
    // The same transaction on the same path, its ids raw this time: the same event.
    let raw = format!("rooms/{ROOM}/send/m.room.message/txn1");
    let again = send(&mock, &raw, reply.clone()).await;
    assert_eq!(
        (again.status, again.json()["event_id"].as_str()),
        (200, Some(event_id.as_str()))
    );
    let posts = mock.posts();
    assert_eq!(posts.len(), 1);
    let post = &posts[0];
    assert_eq!(
        (post.platform, post.target, post.target_id.as_str()),
        (Platform::Matrix, Target::Room, ROOM)
    );
    assert_eq!(
        (post.content.as_str(), post.reply_to.as_deref()),
        ("pong", Some("$orig"))
    );
    assert_eq!(
        (post.nonce.as_deref(), post.message_id.as_str()),
        (Some("txn1"), event_id.as_str())
    );

    let body = sync(&mock, &[("since", &since), ("timeout", "1000")]).await;
    let echo = &timeline(&body, ROOM)["events"];
    assert_eq!(ids(echo), std::slice::from_ref(&event_id));
    assert_eq!(echo[0]["sender"], BOT);
    assert_eq!(echo[0]["unsigned"]["transaction_id"], "txn1");
    assert_eq!(echo[0]["content"], reply);

    // A failure is not remembered: its retry is sent.
    mock.set_send_fault(Platform::Matrix, SendFault::ServerError(1));
    let failed = send(
        &mock,
        &send_path(ROOM, "txn2"),
        json!({"msgtype": "m.text", "body": "b"}),
    )
    .await;
    assert_eq!(failed.error(), (500, "M_UNKNOWN".into()));
    let retried = send(
        &mock,
        &send_path(ROOM, "txn2"),
        json!({"msgtype": "m.text", "body": "b"}),
    )
    .await;
    assert_eq!(retried.status, 200);
    assert_ne!(retried.json()["event_id"], event_id.as_str());

    let not_json = call(
        "a send",
        client()
            .put(v3(&mock, &send_path(ROOM, "txn3")))
            .bearer_auth(TOKEN)
            .body("nope"),
    )
    .await;
    assert_eq!(not_json.error(), (400, "M_NOT_JSON".into()));
    let elsewhere = send(
        &mock,
        &send_path("!other:mock.test", "txn4"),
        json!({"body": "x"}),
    )
    .await;
    assert_eq!(elsewhere.error(), (403, "M_FORBIDDEN".into()));
    let stats = mock.matrix_stats();
    assert_eq!((stats.sends, stats.txn_hits, mock.posts().len()), (6, 1, 2));
    // Every event, the bot's own included; only the human's messages (none here).
    assert_eq!(mock.matrix_event_ids().len(), 2);
    assert!(mock.matrix_message_ids().is_empty());
}

#[tokio::test]
async fn encryption_shows_in_state_on_an_initial_sync_and_in_the_timeline_mid_session() {
    let mock = matrix_mock(two_rooms()).await;
    let first = sync(&mock, &[]).await;
    let state = &first["rooms"]["join"][ROOM2]["state"]["events"];
    assert_eq!(state[0]["type"], "m.room.encryption", "{first}");
    assert_eq!(state[0]["state_key"], "");
    assert_eq!(state[0]["content"]["algorithm"], "m.megolm.v1.aes-sha2");
    assert_eq!(first["rooms"]["join"][ROOM]["state"]["events"], json!([]));
    let encryption =
        |room: &str, slash: &str| format!("rooms/{}/state/m.room.encryption{slash}", encode(room));
    let found = get(&mock, &encryption(ROOM2, "/")).await;
    assert_eq!(
        (found.status, &found.json()["algorithm"]),
        (200, &json!("m.megolm.v1.aes-sha2"))
    );
    assert_eq!(get(&mock, &encryption(ROOM2, "")).await.status, 200);
    assert_eq!(
        get(&mock, &encryption(ROOM, "/")).await.error(),
        (404, "M_NOT_FOUND".into())
    );

    let since = first["next_batch"].as_str().unwrap().to_owned();
    let switched = mock.matrix_enable_encryption(ROOM);
    let secret = mock.matrix_emit_encrypted(ROOM);
    let body = sync(&mock, &[("since", &since), ("timeout", "1000")]).await;
    let events = &timeline(&body, ROOM)["events"];
    assert_eq!(ids(events), [switched.clone(), secret.clone()]);
    assert_eq!(
        (&events[0]["type"], &events[0]["state_key"]),
        (&json!("m.room.encryption"), &json!(""))
    );
    assert_eq!(events[1]["type"], "m.room.encrypted");
    assert_eq!(events[1]["content"]["algorithm"], "m.megolm.v1.aes-sha2");
    assert!(events[1]["content"]["ciphertext"].is_string());
    // Not limited: the change is in the timeline only.
    assert_eq!(body["rooms"]["join"][ROOM]["state"]["events"], json!([]));
    assert_eq!(get(&mock, &encryption(ROOM, "/")).await.status, 200);
    assert_eq!(mock.matrix_event_ids(), [switched, secret]);
    assert!(mock.matrix_message_ids().is_empty());
}

#[tokio::test]
async fn filters_drop_types_and_rooms_and_bad_ones_are_refused() {
    let mock = matrix_mock(two_rooms()).await;
    let since = initial(&mock).await;
    mock.matrix_emit_encrypted(ROOM);
    let text = mock.matrix_emit(1);
    mock.matrix_emit_text(ROOM2, "in the other room");
    let no_encrypted =
        r#"{"room":{"rooms":["!room1:*"],"timeline":{"not_types":["m.room.encrypted"]}}}"#;
    let body = sync(&mock, &[("since", &since), ("filter", no_encrypted)]).await;
    assert_eq!(ids(&timeline(&body, ROOM)["events"]), text);
    assert!(body["rooms"]["join"].get(ROOM2).is_none(), "{body}");

    // The same filter uploaded, then named by its id.
    let url = v3(&mock, &format!("user/{}/filter", encode(BOT)));
    let filter: Value = serde_json::from_str(no_encrypted).unwrap();
    let uploaded = call(
        "an upload",
        client().post(url).bearer_auth(TOKEN).json(&filter),
    )
    .await;
    let filter_id = uploaded.json()["filter_id"].as_str().unwrap().to_owned();
    let by_id = sync(&mock, &[("since", &since), ("filter", &filter_id)]).await;
    assert_eq!(ids(&timeline(&by_id, ROOM)["events"]), text);

    let not_json = sync_call(&mock, &[("filter", "{nope")]).await;
    assert_eq!(not_json.error(), (400, "M_NOT_JSON".into()));
    let unknown = sync_call(&mock, &[("filter", "12345")]).await;
    assert_eq!(unknown.error(), (400, "M_INVALID_PARAM".into()));
}

#[tokio::test]
async fn a_limited_sync_carries_the_state_that_changed_in_its_gap() {
    let mock = matrix_mock(MatrixConfig::default()).await;
    let since = initial(&mock).await;
    mock.matrix_enable_encryption(ROOM);
    let messages = mock.matrix_emit(3);
    let limit_two = r#"{"room":{"timeline":{"limit":2}}}"#;
    let body = sync(&mock, &[("since", &since), ("filter", limit_two)]).await;
    assert_eq!(ids(&timeline(&body, ROOM)["events"]), messages[1..]);
    assert_eq!(timeline(&body, ROOM)["limited"], true);
    let state = &body["rooms"]["join"][ROOM]["state"]["events"];
    assert_eq!(state.as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(state[0]["type"], "m.room.encryption");
    // A state filter that leaves it out.
    let no_state = r#"{"room":{"timeline":{"limit":2},"state":{"not_types":["*"]}}}"#;
    let body = sync(&mock, &[("since", &since), ("filter", no_state)]).await;
    assert_eq!(body["rooms"]["join"][ROOM]["state"]["events"], json!([]));
}

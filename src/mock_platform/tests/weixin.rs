//! Checks of the mock's Weixin side (iLink) against a real HTTP client (reqwest) over loopback:
//! the long poll and its cursor, tokens and their expiry, the header checks; the sends, the QR
//! login and the faults have files of their own under `weixin/`.

use super::*;
use crate::mock_platform::weixin::{codec, WeixinConfig, MOCK_PEER};

mod cdn;
mod faults;
mod qr;
mod send;

/// Long enough to tell a held poll from an immediate answer, short enough for a test.
const HOLD_MS: u64 = 300;

fn fast() -> MockConfig {
    let mut config = MockConfig::default();
    config.weixin.longpolling_timeout_ms = HOLD_MS;
    config
}

async fn wx_mock(config: MockConfig) -> MockPlatform {
    MockPlatform::start(config).await.unwrap()
}

fn default_token() -> String {
    WeixinConfig::default().token
}

/// A fresh `X-WECHAT-UIN`, as clients draw one per request.
fn uin() -> String {
    codec::base64_encode(fastrand::u32(..).to_string().as_bytes())
}

/// A POST with every header a well-behaved client sends.
fn ilink(
    http: &reqwest::Client,
    mock: &MockPlatform,
    endpoint: &str,
    token: &str,
) -> reqwest::RequestBuilder {
    http.post(format!("{}/ilink/bot/{endpoint}", mock.http_base()))
        .header("AuthorizationType", "ilink_bot_token")
        .header("Authorization", format!("Bearer {token}"))
        .header("X-WECHAT-UIN", uin())
}

/// `body` with `base_info`, POSTed with every header; the answer.
async fn call(
    http: &reqwest::Client,
    mock: &MockPlatform,
    endpoint: &str,
    token: &str,
    mut body: Value,
) -> (StatusCode, Value) {
    body["base_info"] = json!({"channel_version": "2.2.0"});
    let request = ilink(http, mock, endpoint, token).json(&body).send();
    answer(within("an iLink answer", request).await.unwrap()).await
}

async fn poll(http: &reqwest::Client, mock: &MockPlatform, token: &str, cursor: &str) -> Value {
    let body = json!({"get_updates_buf": cursor});
    let (status, answer) = call(http, mock, "getupdates", token, body).await;
    assert_eq!(status, 200, "{answer}");
    answer
}

fn texts(answer: &Value) -> Vec<String> {
    answer["msgs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["item_list"][0]["text_item"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

fn cursor_of(answer: &Value) -> String {
    answer["get_updates_buf"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_poll_with_nothing_new_is_held_then_answered_empty_with_the_same_cursor() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let started = Instant::now();
    let first = poll(&http, &mock, &default_token(), "").await;
    assert!(started.elapsed() >= Duration::from_millis(HOLD_MS - 20));
    assert_eq!(first["ret"], 0);
    assert_eq!(first["msgs"], json!([]));
    assert_eq!(first["get_updates_buf"], "");
    assert_eq!(first["longpolling_timeout_ms"], HOLD_MS);
    mock.weixin_emit(1);
    let cursor = cursor_of(&poll(&http, &mock, &default_token(), "").await);
    let started = Instant::now();
    let held = poll(&http, &mock, &default_token(), &cursor).await;
    assert!(started.elapsed() >= Duration::from_millis(HOLD_MS - 20));
    assert_eq!(
        (held["msgs"].clone(), cursor_of(&held)),
        (json!([]), cursor.clone())
    );
    let stats = mock.weixin_stats();
    assert_eq!(
        (stats.polls, stats.answered, stats.empty_answers),
        (3, 3, 2)
    );
    assert_eq!(stats.last_cursor_seen, Some(cursor));
}

#[tokio::test]
async fn a_held_poll_answers_as_soon_as_a_message_arrives() {
    let mut config = MockConfig::default();
    config.weixin.longpolling_timeout_ms = 30_000;
    let mock = wx_mock(config).await;
    let http = client();
    let waiting = {
        let (http, mock_base) = (http.clone(), mock.http_base());
        tokio::spawn(async move {
            let body = json!({"get_updates_buf": "", "base_info": {"channel_version": "2.2.0"}});
            http.post(format!("{mock_base}/ilink/bot/getupdates"))
                .header("AuthorizationType", "ilink_bot_token")
                .header("Authorization", format!("Bearer {}", default_token()))
                .header("X-WECHAT-UIN", uin())
                .json(&body)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    let deadline = Instant::now() + DEADLINE;
    while mock.weixin_stats().polls == 0 {
        assert!(Instant::now() < deadline, "the poll never arrived");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ids = mock.weixin_emit(1);
    let answer = within("the woken poll", waiting).await.unwrap();
    assert_eq!(answer["msgs"][0]["message_id"].to_string(), ids[0]);
}

#[tokio::test]
async fn messages_come_in_order_and_an_old_cursor_gets_them_again() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let token = default_token();
    let ids = mock.weixin_emit(3);
    let first = poll(&http, &mock, &token, "").await;
    assert_eq!(
        texts(&first),
        ["weixin message 1", "weixin message 2", "weixin message 3"]
    );
    let message = &first["msgs"][0];
    assert_eq!(message["message_id"].as_u64().unwrap().to_string(), ids[0]);
    assert_eq!(message["from_user_id"], MOCK_PEER);
    assert_eq!(message["to_user_id"], WeixinConfig::default().bot_id);
    assert_eq!(
        (
            message["message_type"].clone(),
            message["message_state"].clone()
        ),
        (json!(1), json!(2))
    );
    assert_eq!(message["item_list"][0]["type"], 1);
    assert!(message["create_time_ms"].as_u64().unwrap() > 0);
    let contexts: Vec<&str> = first["msgs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["context_token"].as_str().unwrap())
        .collect();
    assert!(contexts[0] != contexts[1] && contexts[1] != contexts[2]);
    assert_eq!(
        mock.weixin_context_token(MOCK_PEER).as_deref(),
        Some(contexts[2])
    );
    let cursor = cursor_of(&first);
    assert!(!cursor.is_empty());
    // The old cursor again: the same messages, the same new cursor.
    let again = poll(&http, &mock, &token, "").await;
    assert_eq!(
        (again["msgs"].clone(), cursor_of(&again)),
        (first["msgs"].clone(), cursor.clone())
    );
    mock.weixin_emit_text("other@im.wechat", "hello");
    let next = poll(&http, &mock, &token, &cursor).await;
    assert_eq!(texts(&next), ["hello"]);
    assert_eq!(next["msgs"][0]["from_user_id"], "other@im.wechat");
    assert_ne!(cursor_of(&next), cursor);
    assert_eq!(mock.weixin_message_ids().len(), 4);
    assert_eq!(mock.weixin_stats().messages_delivered, 7);
}

#[tokio::test]
async fn a_large_backlog_comes_in_batches_and_a_foreign_cursor_reads_from_the_start() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let token = default_token();
    mock.weixin_emit(150);
    let first = poll(&http, &mock, &token, "").await;
    assert_eq!(first["msgs"].as_array().unwrap().len(), 100);
    let second = poll(&http, &mock, &token, &cursor_of(&first)).await;
    assert_eq!(texts(&second)[0], "weixin message 101");
    assert_eq!(second["msgs"].as_array().unwrap().len(), 50);
    let foreign = poll(&http, &mock, &token, "bm90IG91cnM=").await;
    assert_eq!(texts(&foreign)[0], "weixin message 1");
    assert_eq!(mock.weixin_stats().bad_cursors, 1);
}

#[tokio::test]
async fn an_expired_session_answers_minus_14_until_a_new_token_is_used() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let old = default_token();
    mock.weixin_emit(1);
    assert_eq!(poll(&http, &mock, &old, "").await["ret"], 0);
    mock.weixin_expire_session();
    let expired = json!({"ret": -14, "errcode": -14, "errmsg": "session timeout"});
    let started = Instant::now();
    assert_eq!(poll(&http, &mock, &old, "").await, expired);
    assert!(
        started.elapsed() < Duration::from_millis(HOLD_MS),
        "answered at once"
    );
    let body = send::text_to(MOCK_PEER, "hi", "c-1", None);
    assert_eq!(
        call(&http, &mock, "sendmessage", &old, body.clone())
            .await
            .1,
        expired
    );
    assert_eq!(
        call(&http, &mock, "getconfig", &old, json!({})).await.1,
        expired
    );
    let (status, never) = call(&http, &mock, "getupdates", "never-issued", json!({})).await;
    assert_eq!((status.as_u16(), never), (200, expired.clone()));
    let renewed = mock.weixin_issue_token();
    assert_ne!(renewed, old);
    assert_eq!(
        poll(&http, &mock, &renewed, "").await["msgs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        call(&http, &mock, "sendmessage", &renewed, body).await.1["ret"],
        0
    );
    // Expiry takes the issued tokens too.
    mock.weixin_expire_session();
    assert_eq!(poll(&http, &mock, &renewed, "").await, expired);
    let stats = mock.weixin_stats();
    assert_eq!((stats.expired_answers, stats.tokens_issued), (5, 1));
    assert_eq!(mock.posts().len(), 1);
}

#[tokio::test]
async fn header_and_base_info_violations_are_counted_and_still_answered() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let token = default_token();
    mock.weixin_emit(1);
    let url = format!("{}/ilink/bot/getupdates", mock.http_base());
    let good = json!({"get_updates_buf": "", "base_info": {"channel_version": "2.2.0"}});
    let send = |request: reqwest::RequestBuilder| async move {
        answer(within("an answer", request.send()).await.unwrap()).await
    };
    // No AuthorizationType, a UIN that is not base64 of a decimal u32.
    let bare = http
        .post(&url)
        .header("Authorization", format!("Bearer {token}"))
        .header("X-WECHAT-UIN", codec::base64_encode(b"12ab"))
        .json(&good);
    assert_eq!(send(bare).await.1["ret"], 0);
    // No base_info.
    let no_base = ilink(&http, &mock, "getupdates", &token).json(&json!({"get_updates_buf": ""}));
    assert_eq!(send(no_base).await.1["ret"], 0);
    // The same UIN twice in a row.
    let fixed = uin();
    for _ in 0..2 {
        let request = http
            .post(&url)
            .header("AuthorizationType", "ilink_bot_token")
            .header("Authorization", format!("Bearer {token}"))
            .header("X-WECHAT-UIN", &fixed)
            .json(&good);
        assert_eq!(send(request).await.1["ret"], 0);
    }
    // No Authorization at all: counted, and no token means no session.
    let anonymous = http.post(&url).header("X-WECHAT-UIN", uin()).json(&good);
    assert_eq!(send(anonymous).await.1["ret"], -14);
    let stats = mock.weixin_stats();
    assert_eq!((stats.header_violations, stats.uin_repeats), (3, 1));
    let violations = stats.violations.join("\n");
    for expected in [
        "AuthorizationType",
        "X-WECHAT-UIN is not base64",
        "base_info.channel_version",
        "repeats",
        "Authorization is not Bearer",
    ] {
        assert!(violations.contains(expected), "{expected} in {violations}");
    }
}

#[tokio::test]
async fn the_side_endpoints_answer_success() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let token = default_token();
    let (_, config) = call(
        &http,
        &mock,
        "getconfig",
        &token,
        json!({"ilink_user_id": MOCK_PEER}),
    )
    .await;
    assert_eq!(config["ret"], 0);
    assert!(codec::base64_decode(config["typing_ticket"].as_str().unwrap()).is_some());
    for endpoint in ["sendtyping", "msg/notifystart", "msg/notifystop"] {
        assert_eq!(
            call(&http, &mock, endpoint, &token, json!({})).await.1["ret"],
            0
        );
    }
    let (status, _) = call(&http, &mock, "nosuch", &token, json!({})).await;
    assert_eq!(status, 404);
    assert_eq!(mock.weixin_stats().header_violations, 0);
}

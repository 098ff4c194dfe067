//! The mock Slack against a real client over loopback: reqwest for the Web API,
//! tokio-tungstenite for Socket Mode, frames as docs/research/slack-socket-mode.md gives them.

use super::*;
use crate::mock_platform::{OpenRefusal, Platform, SendFault, SlackConfig, SlackFault};

mod files;
mod user_files;

/// Short enough for a test to watch a redelivery, long enough for a loaded box to ack first.
const ACK_TIMEOUT: Duration = Duration::from_millis(400);

async fn slack_mock(slack: SlackConfig) -> MockPlatform {
    MockPlatform::start(MockConfig {
        slack,
        ..MockConfig::default()
    })
    .await
    .unwrap()
}

fn fast() -> SlackConfig {
    SlackConfig {
        ack_timeout: ACK_TIMEOUT,
        ..SlackConfig::default()
    }
}

/// `POST /api/METHOD` with `token` and a JSON body; the answer's status, `Retry-After` and
/// JSON.
async fn call(
    mock: &MockPlatform,
    method: &str,
    token: &str,
    body: Value,
) -> (u16, Option<String>, Value) {
    let url = format!("{}/api/{method}", mock.http_base());
    let response = within(
        method,
        client().post(url).bearer_auth(token).json(&body).send(),
    )
    .await
    .unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, retry_after, response.json().await.unwrap())
}

async fn open_url(mock: &MockPlatform) -> String {
    let token = SlackConfig::default().app_token;
    let (status, _, answer) = call(mock, "apps.connections.open", &token, json!({})).await;
    assert_eq!((status, &answer["ok"]), (200, &json!(true)), "{answer}");
    answer["url"].as_str().unwrap().to_owned()
}

/// Opens a URL and connects; the client after `hello`, and `hello`.
async fn slack_connect(mock: &MockPlatform) -> (Client, Value) {
    let mut ws = connect(&open_url(mock).await).await;
    let hello = next_json(&mut ws).await;
    assert_eq!(hello["type"], "hello", "{hello}");
    (ws, hello)
}

async fn ack(ws: &mut Client, envelope: &Value) {
    send(ws, json!({"envelope_id": envelope["envelope_id"]})).await;
}

#[tokio::test]
async fn a_url_opens_one_connection_that_says_hello_and_gets_events() {
    let mock = slack_mock(fast()).await;
    let url = open_url(&mock).await;
    assert!(url.contains("/link/?ticket="), "{url}");
    let mut ws = connect(&url).await;
    let hello = next_json(&mut ws).await;
    assert_eq!(hello["num_connections"], 1, "{hello}");
    assert_eq!(
        hello["connection_info"]["app_id"],
        SlackConfig::default().app_id
    );
    // The URL is used up.
    match within("a refused upgrade", connect_async(&url)).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 401),
        other => panic!("a second connection on one URL: {:?}", other.map(|_| ())),
    }
    let ids = mock.slack_emit(2);
    for id in &ids {
        let envelope = next_json(&mut ws).await;
        assert_eq!(envelope["type"], "events_api", "{envelope}");
        assert_eq!(envelope["retry_attempt"], 0);
        assert_eq!(&envelope["payload"]["event_id"], id);
        assert_eq!(envelope["payload"]["event"]["type"], "message");
        ack(&mut ws, &envelope).await;
    }
    let deadline = Instant::now() + DEADLINE;
    while mock.slack_events().iter().any(|e| e.acked_at.is_none()) {
        assert!(Instant::now() < deadline, "{:?}", mock.slack_events());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stats = mock.slack_stats();
    assert_eq!(
        (stats.connections, stats.tickets_refused, stats.acks),
        (1, 1, 2)
    );
}

#[tokio::test]
async fn an_unacked_envelope_comes_again_with_a_new_envelope_id_and_the_same_event_id() {
    let mock = slack_mock(fast()).await;
    let (mut ws, _) = slack_connect(&mock).await;
    let id = mock.slack_emit(1).remove(0);
    let first = next_json(&mut ws).await;
    let again = next_json(&mut ws).await;
    assert_eq!(again["retry_attempt"], 1, "{again}");
    assert_eq!(again["retry_reason"], "timeout");
    assert_eq!(again["payload"]["event_id"], id);
    assert_ne!(again["envelope_id"], first["envelope_id"]);
    // Acking the first envelope settles the event: no third delivery.
    ack(&mut ws, &first).await;
    assert_quiet(&mut ws).await;
    let event = &mock.slack_events()[0];
    assert!(event.acked_at.is_some() && !event.dropped, "{event:?}");
    assert_eq!(event.deliveries.len(), 2);
}

#[tokio::test]
async fn an_envelope_never_acked_is_given_up_after_the_retries() {
    let mock = slack_mock(SlackConfig {
        max_retries: 2,
        new_envelope_id_on_retry: false,
        ..fast()
    })
    .await;
    let (mut ws, _) = slack_connect(&mock).await;
    mock.slack_emit(1);
    let attempts: Vec<Value> = [
        next_json(&mut ws).await,
        next_json(&mut ws).await,
        next_json(&mut ws).await,
    ]
    .into_iter()
    .collect();
    assert_eq!(
        attempts
            .iter()
            .map(|a| a["retry_attempt"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert!(attempts
        .iter()
        .all(|a| a["envelope_id"] == attempts[0]["envelope_id"]));
    // Backing off: the second retry waited twice as long as the first.
    let at: Vec<_> = mock.slack_events()[0]
        .deliveries
        .iter()
        .map(|d| d.2)
        .collect();
    assert!(at[1] - at[0] >= ACK_TIMEOUT, "{at:?}");
    assert!(at[2] - at[1] >= ACK_TIMEOUT * 2, "{at:?}");
    // The last retry waits four timeouts, then the event is given up.
    timeout(ACK_TIMEOUT * 6, async {
        while !mock.slack_events()[0].dropped {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the event given up");
}

#[tokio::test]
async fn events_are_spread_over_the_connections_and_wait_for_one() {
    let mock = slack_mock(fast()).await;
    let waiting = mock.slack_emit(1).remove(0);
    let (mut a, hello_a) = slack_connect(&mock).await;
    assert_eq!(hello_a["num_connections"], 1);
    let held = next_json(&mut a).await;
    assert_eq!(held["payload"]["event_id"], waiting);
    ack(&mut a, &held).await;
    let (mut b, hello_b) = slack_connect(&mock).await;
    assert_eq!(hello_b["num_connections"], 2);
    mock.slack_emit(2);
    let (on_a, on_b) = (next_json(&mut a).await, next_json(&mut b).await);
    assert_ne!(on_a["payload"]["event_id"], on_b["payload"]["event_id"]);
}

#[tokio::test]
async fn disconnects_are_sent_and_link_disabled_keeps_the_app_off() {
    let mock = slack_mock(fast()).await;
    let (mut ws, _) = slack_connect(&mock).await;
    mock.slack_set_fault(SlackFault::Disconnect("refresh_requested".into()));
    let said = next_json(&mut ws).await;
    assert_eq!(
        (said["type"].as_str(), said["reason"].as_str()),
        (Some("disconnect"), Some("refresh_requested"))
    );
    mock.slack_set_fault(SlackFault::Disconnect("link_disabled".into()));
    assert_eq!(next_json(&mut ws).await["reason"], "link_disabled");
    // A new connection is told at once, and closed.
    let mut next = connect(&open_url(&mock).await).await;
    assert_eq!(next_json(&mut next).await["reason"], "link_disabled");
    assert_eq!(close_code(&mut next).await, 1000);
    mock.slack_clear_faults();
    slack_connect(&mock).await;
    assert_eq!(mock.slack_stats().disconnects, 3);
}

#[tokio::test]
async fn a_silenced_connection_answers_no_ping_and_loses_what_is_sent_to_it() {
    let mock = slack_mock(fast()).await;
    let (mut ws, _) = slack_connect(&mock).await;
    mock.slack_set_fault(SlackFault::Silence);
    tokio::time::sleep(QUIET).await;
    ws.send(Message::Ping(b"p".to_vec().into())).await.unwrap();
    mock.slack_emit(1);
    assert_quiet(&mut ws).await;
    assert_eq!(
        mock.slack_stats().live_connections,
        1,
        "a ghost keeps its place"
    );
}

#[tokio::test]
async fn a_connection_that_answers_no_server_ping_is_dropped_and_its_events_go_elsewhere() {
    let mock = slack_mock(SlackConfig {
        server_ping: Some(Duration::from_millis(100)),
        ..fast()
    })
    .await;
    // Never read again, so it never pongs: a client gone without a FIN.
    let (_ghost, _) = slack_connect(&mock).await;
    within("the ghost dropped", async {
        while mock.slack_stats().live_connections > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let (mut live, _) = slack_connect(&mock).await;
    let id = mock.slack_emit(1).remove(0);
    assert_eq!(next_json(&mut live).await["payload"]["event_id"], id);
}

#[tokio::test]
async fn a_deaf_connection_still_sends_events_but_reads_no_ack() {
    let mock = slack_mock(fast()).await;
    let (mut ws, _) = slack_connect(&mock).await;
    mock.slack_set_fault(SlackFault::Deaf);
    tokio::time::sleep(QUIET).await;
    mock.slack_emit(1);
    let first = next_json(&mut ws).await;
    ack(&mut ws, &first).await;
    let again = next_json(&mut ws).await;
    assert_eq!(again["retry_attempt"], 1, "{again}");
}

#[tokio::test]
async fn tokens_are_checked_by_kind_and_refusals_are_slacks() {
    let mock = slack_mock(fast()).await;
    let config = SlackConfig::default();
    let (_, _, wrong_kind) =
        call(&mock, "apps.connections.open", &config.bot_token, json!({})).await;
    assert_eq!(wrong_kind["error"], "not_allowed_token_type");
    let (_, _, bad) = call(&mock, "auth.test", "xoxb-nope", json!({})).await;
    assert_eq!(bad["error"], "invalid_auth");
    let (_, _, me) = call(&mock, "auth.test", &config.bot_token, json!({})).await;
    assert_eq!(
        (&me["user_id"], &me["bot_id"]),
        (&json!(config.bot_user_id), &json!(config.bot_id))
    );
    mock.slack_refuse_open(Some(OpenRefusal::RateLimited(7)));
    let (status, retry_after, limited) =
        call(&mock, "apps.connections.open", &config.app_token, json!({})).await;
    assert_eq!(
        (status, retry_after.as_deref(), &limited["error"]),
        (429, Some("7"), &json!("ratelimited"))
    );
    mock.slack_clear_faults();
    mock.slack_revoke_tokens();
    let (_, _, revoked) = call(&mock, "apps.connections.open", &config.app_token, json!({})).await;
    assert_eq!(revoked["error"], "token_revoked");
    assert_eq!(mock.slack_stats().opens_refused, 3);
}

#[tokio::test]
async fn a_post_is_recorded_answered_with_its_ts_and_echoed_with_the_bots_id() {
    let mock = slack_mock(fast()).await;
    let config = SlackConfig::default();
    let (mut ws, _) = slack_connect(&mock).await;
    let channel = &config.channels[0];
    let body = json!({"channel": channel, "text": "hi", "thread_ts": "1700000000.000100"});
    let (status, _, posted) = call(&mock, "chat.postMessage", &config.bot_token, body).await;
    assert_eq!((status, &posted["ok"]), (200, &json!(true)), "{posted}");
    let echo = next_json(&mut ws).await;
    let event = &echo["payload"]["event"];
    assert_eq!(
        (&event["bot_id"], &event["text"], &event["thread_ts"]),
        (
            &json!(config.bot_id),
            &json!("hi"),
            &json!("1700000000.000100")
        )
    );
    let posts = mock.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(
        (posts[0].platform, posts[0].message_id.as_str()),
        (Platform::Slack, posted["ts"].as_str().unwrap())
    );
    let (_, _, missing) = call(
        &mock,
        "chat.postMessage",
        &config.bot_token,
        json!({"channel": "C0NOPE", "text": "x"}),
    )
    .await;
    assert_eq!(missing["error"], "channel_not_found");
    mock.set_send_fault(
        Platform::Slack,
        SendFault::RateLimited {
            posts: 1,
            retry_after: Duration::from_secs(2),
        },
    );
    let body = json!({"channel": channel, "text": "later"});
    let (status, retry_after, limited) =
        call(&mock, "chat.postMessage", &config.bot_token, body).await;
    assert_eq!(
        (status, retry_after.as_deref(), &limited["error"]),
        (429, Some("2"), &json!("ratelimited"))
    );
    assert_eq!(mock.posts().len(), 1);
}

//! The mock's Telegram Bot API against a real HTTP client (reqwest) over loopback: the long
//! poll and its confirmations, conflicts and the webhook here; sends and faults in the
//! submodules. Polls use `timeout` of 1-2 s at most.

use std::time::Duration;

use super::*;
use crate::mock_platform::telegram::{TelegramConfig, TelegramStats};

mod faults;
mod mentions;
mod send;
mod upload;

const WEBHOOK_ACTIVE: &str = "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first";
const TERMINATED: &str = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running";

fn method_url(mock: &MockPlatform, method: &str) -> String {
    format!(
        "{}/bot{}/{method}",
        mock.http_base(),
        TelegramConfig::default().token
    )
}

/// Calls a method with a JSON body; (HTTP status, body), checking the envelope.
async fn call(
    http: &reqwest::Client,
    mock: &MockPlatform,
    method: &str,
    body: Value,
) -> (u16, Value) {
    let request = http.post(method_url(mock, method)).json(&body).send();
    let (status, body) = answer(within(method, request).await.unwrap()).await;
    envelope(status.as_u16(), &body);
    (status.as_u16(), body)
}

/// Every answer is `ok` with a result, or not `ok` with the status repeated as `error_code`.
fn envelope(status: u16, body: &Value) {
    if status == 200 {
        assert_eq!(body["ok"], true, "{body}");
        assert!(body.get("result").is_some(), "{body}");
    } else {
        assert_eq!(body["ok"], false, "{body}");
        assert_eq!(body["error_code"], status, "{body}");
        assert!(body["description"].is_string(), "{body}");
    }
}

/// A poll that must succeed; its update ids.
async fn poll_ok(http: &reqwest::Client, mock: &MockPlatform, body: Value) -> Vec<i64> {
    let (status, answer) = call(http, mock, "getUpdates", body).await;
    assert_eq!(status, 200, "{answer}");
    update_ids(&answer)
}

fn update_ids(answer: &Value) -> Vec<i64> {
    let updates = answer["result"].as_array().cloned().unwrap_or_default();
    updates
        .iter()
        .filter_map(|u| u["update_id"].as_i64())
        .collect()
}

async fn wait_for_telegram(
    mock: &MockPlatform,
    what: &str,
    check: impl Fn(&TelegramStats) -> bool,
) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let stats = mock.telegram_stats();
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
async fn a_poll_answers_at_once_when_updates_are_pending() {
    let mock = platform().await;
    let http = client();
    let ids = mock.telegram_emit(2);
    assert_eq!(ids[1], ids[0] + 1);
    let started = Instant::now();
    let (status, answer) = call(&http, &mock, "getUpdates", json!({"timeout": 2})).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "held although updates were pending"
    );
    assert_eq!((status, update_ids(&answer)), (200, ids.clone()));
    let message = &answer["result"][0]["message"];
    assert_eq!(message["message_id"], 1);
    assert_eq!(
        message["chat"],
        json!({"id": 1001, "type": "private", "first_name": "User 1001"})
    );
    assert_eq!(message["from"]["id"], 1001);
    assert_eq!(message["from"]["is_bot"], false);
    assert!(message["date"].as_u64().is_some_and(|d| d > 1_600_000_000));
    assert_eq!(message["text"], "telegram message 1");
    assert_eq!(answer["result"][1]["message"]["message_id"], 2);
    assert_eq!(mock.telegram_update_ids(), ids);
}

#[tokio::test]
async fn a_poll_is_held_until_its_timeout_then_answers_empty() {
    let mock = platform().await;
    let http = client();
    let started = Instant::now();
    assert!(poll_ok(&http, &mock, json!({"timeout": 1}))
        .await
        .is_empty());
    let held = started.elapsed();
    assert!(
        held >= Duration::from_millis(950),
        "answered after {held:?}"
    );
    // A short poll answers at once.
    let started = Instant::now();
    assert!(poll_ok(&http, &mock, json!({})).await.is_empty());
    assert!(started.elapsed() < Duration::from_millis(500));
    let stats = mock.telegram_stats();
    assert_eq!(
        (stats.polls, stats.answered, stats.max_timeout_asked),
        (2, 2, 1)
    );
}

#[tokio::test]
async fn a_held_poll_answers_when_an_update_arrives() {
    let mock = platform().await;
    let http = client();
    let url = method_url(&mock, "getUpdates");
    let held = tokio::spawn(http.post(url).json(&json!({"timeout": 2})).send());
    wait_for_telegram(&mock, "the poll", |s| s.polls == 1).await;
    let started = Instant::now();
    let id = mock.telegram_emit_text(1001, "wake up");
    let answer: Value = within("the held poll", held)
        .await
        .unwrap()
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_millis(1500));
    assert_eq!(update_ids(&answer), vec![id]);
    assert_eq!(answer["result"][0]["message"]["text"], "wake up");
}

#[tokio::test]
async fn the_offset_confirms_everything_below_it() {
    let mock = platform().await;
    let http = client();
    let ids = mock.telegram_emit(3);
    // Nothing confirmed: asked again, the same updates.
    assert_eq!(poll_ok(&http, &mock, json!({"timeout": 0})).await, ids);
    assert_eq!(poll_ok(&http, &mock, json!({"offset": ids[0]})).await, ids);
    assert_eq!(
        poll_ok(&http, &mock, json!({"offset": ids[0], "limit": 1})).await,
        ids[..1]
    );
    // A higher offset forgets what is below it.
    assert_eq!(
        poll_ok(&http, &mock, json!({"offset": ids[1]})).await,
        ids[1..]
    );
    assert_eq!(poll_ok(&http, &mock, json!({})).await, ids[1..]);
    let stats = mock.telegram_stats();
    assert_eq!((stats.confirmed_below, stats.pending), (ids[1], 2));
    assert!(poll_ok(&http, &mock, json!({"offset": ids[2] + 1}))
        .await
        .is_empty());
    assert_eq!(mock.telegram_stats().pending, 0);
    // A negative offset keeps only that many of the newest.
    let more = mock.telegram_emit(3);
    assert_eq!(
        poll_ok(&http, &mock, json!({"offset": -1})).await,
        more[2..]
    );
    assert_eq!(mock.telegram_stats().confirmed_below, more[2]);
}

#[tokio::test]
async fn a_second_poll_ends_the_held_one_with_409() {
    let mock = platform().await;
    let http = client();
    let url = method_url(&mock, "getUpdates");
    let first = tokio::spawn(http.post(url).json(&json!({"timeout": 2})).send());
    wait_for_telegram(&mock, "the first poll", |s| s.polls == 1).await;
    let started = Instant::now();
    assert!(poll_ok(&http, &mock, json!({"timeout": 0}))
        .await
        .is_empty());
    let first = within("the first poll", first).await.unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    let (status, body) = answer(first).await;
    assert_eq!(status, 409);
    envelope(409, &body);
    assert_eq!(body["description"], TERMINATED);
    assert_eq!(mock.telegram_stats().conflicts, 1);
}

#[tokio::test]
async fn a_webhook_refuses_polls_until_deleted() {
    let mock = platform().await;
    let http = client();
    let (status, body) = call(
        &http,
        &mock,
        "setWebhook",
        json!({"url": "http://example.com/hook"}),
    )
    .await;
    assert_eq!(
        (status, &body["description"]),
        (
            400,
            &json!("Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        )
    );
    // Setting it ends a held poll.
    let url = method_url(&mock, "getUpdates");
    let held = tokio::spawn(http.post(url).json(&json!({"timeout": 2})).send());
    wait_for_telegram(&mock, "the poll", |s| s.polls == 1).await;
    let hook = json!({"url": "https://example.com/hook", "allowed_updates": ["message"]});
    let (status, body) = call(&http, &mock, "setWebhook", hook).await;
    assert_eq!(
        (status, &body["result"], &body["description"]),
        (200, &json!(true), &json!("Webhook was set"))
    );
    let (status, body) = answer(within("the held poll", held).await.unwrap().unwrap()).await;
    assert_eq!(
        (status.as_u16(), &body["description"]),
        (409, &json!("Conflict: terminated by setWebhook request"))
    );
    assert_eq!(
        mock.telegram_webhook().as_deref(),
        Some("https://example.com/hook")
    );
    let (status, body) = call(&http, &mock, "getUpdates", json!({})).await;
    assert_eq!(
        (status, &body["description"]),
        (409, &json!(WEBHOOK_ACTIVE))
    );
    mock.telegram_emit(2);
    let (_, info) = call(&http, &mock, "getWebhookInfo", json!({})).await;
    assert_eq!(info["result"]["url"], "https://example.com/hook");
    assert_eq!(info["result"]["pending_update_count"], 2);
    let (status, body) = call(&http, &mock, "deleteWebhook", json!({})).await;
    assert_eq!(
        (status, &body["description"]),
        (200, &json!("Webhook was deleted"))
    );
    assert_eq!(mock.telegram_webhook(), None);
    assert_eq!(poll_ok(&http, &mock, json!({})).await.len(), 2);
    // The handle sets one too; deleteWebhook can drop what is pending.
    mock.telegram_set_webhook("https://example.com/other");
    let (status, _) = call(&http, &mock, "getUpdates", json!({})).await;
    assert_eq!(status, 409);
    let (status, _) = call(
        &http,
        &mock,
        "deleteWebhook",
        json!({"drop_pending_updates": true}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(poll_ok(&http, &mock, json!({})).await.is_empty());
    let (_, info) = call(&http, &mock, "getWebhookInfo", json!({})).await;
    assert_eq!(
        info["result"],
        json!({"url": "", "has_custom_certificate": false, "pending_update_count": 0})
    );
    let stats = mock.telegram_stats();
    assert_eq!((stats.webhook_deletes, stats.conflicts), (2, 3));
}

#[tokio::test]
async fn allowed_updates_persist_and_filter() {
    let mock = platform().await;
    let http = client();
    let only_callbacks = json!({"allowed_updates": ["callback_query"]});
    assert!(poll_ok(&http, &mock, only_callbacks).await.is_empty());
    mock.telegram_emit(1);
    // Remembered across polls that do not repeat it: the message never comes.
    assert!(poll_ok(&http, &mock, json!({})).await.is_empty());
    let stats = mock.telegram_stats();
    assert_eq!(
        stats.last_allowed_updates,
        Some(vec!["callback_query".to_owned()])
    );
    assert_eq!(stats.pending, 0);
    // An empty list is the default set again, which has messages. Form-encoded this time.
    let form = "allowed_updates=%5B%5D";
    let request = http
        .post(method_url(&mock, "getUpdates"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form)
        .send();
    let (status, _) = answer(within("a form poll", request).await.unwrap()).await;
    assert_eq!(status, 200);
    let ids = mock.telegram_emit(1);
    assert_eq!(poll_ok(&http, &mock, json!({})).await, ids);
    assert_eq!(mock.telegram_stats().last_allowed_updates, Some(vec![]));
}

#[tokio::test]
async fn tokens_methods_and_parameters_are_read_as_the_server_reads_them() {
    let mock = platform().await;
    let http = client();
    // getMe in any case, by GET.
    let url = method_url(&mock, "GETME");
    let (status, me) = answer(within("getMe", http.get(url).send()).await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(
        (&me["result"]["id"], &me["result"]["is_bot"]),
        (&json!(123456), &json!(true))
    );
    let wrong = format!("{}/bot654321:wrong/getMe", mock.http_base());
    let (status, body) = answer(within("getMe", http.get(wrong).send()).await.unwrap()).await;
    envelope(status.as_u16(), &body);
    assert_eq!(
        (status.as_u16(), &body["description"]),
        (401, &json!("Unauthorized"))
    );
    let (status, body) = call(&http, &mock, "getNothing", json!({})).await;
    assert_eq!((status, &body["description"]), (404, &json!("Not Found")));
    // Parameters in the query string; limit and timeout are clamped, not refused.
    let ids = mock.telegram_emit(2);
    let url = format!("{}?limit=0&timeout=-5", method_url(&mock, "getUpdates"));
    let (status, body) = answer(within("a query poll", http.get(url).send()).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), update_ids(&body)),
        (200, ids[..1].to_vec())
    );
    let (status, body) = call(
        &http,
        &mock,
        "getUpdates",
        json!({"offset": ids[1], "limit": 500}),
    )
    .await;
    assert_eq!((status, update_ids(&body)), (200, ids[1..].to_vec()));
    let raw = reqwest::Body::from("{not json");
    let request = http
        .post(method_url(&mock, "getMe"))
        .header("Content-Type", "application/json")
        .body(raw);
    let (status, body) = answer(within("bad json", request.send()).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), &body["description"]),
        (400, &json!("Bad Request: can't parse JSON object"))
    );
}

#[tokio::test]
async fn the_long_poll_is_capped_at_max_timeout() {
    let mut config = MockConfig::default();
    config.telegram.max_timeout = Duration::from_millis(300);
    let mock = MockPlatform::start(config).await.unwrap();
    let http = client();
    let started = Instant::now();
    assert!(poll_ok(&http, &mock, json!({"timeout": 30}))
        .await
        .is_empty());
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(mock.telegram_stats().max_timeout_asked, 30);
}

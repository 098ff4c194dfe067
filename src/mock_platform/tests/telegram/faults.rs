//! Each `TelegramFault` against a real client: what a poll gets, and what it confirms.

use super::*;
use crate::mock_platform::telegram::TelegramFault;

#[tokio::test]
async fn hung_polls_are_never_answered() {
    let mock = platform().await;
    let http = client();
    mock.telegram_set_fault(TelegramFault::HangPolls);
    let ids = mock.telegram_emit(1);
    let request = http
        .post(method_url(&mock, "getUpdates"))
        .json(&json!({"offset": ids[0] + 1}))
        .timeout(QUIET);
    let error = within("a hung poll to time out", request.send())
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error}");
    // Nothing was confirmed.
    let stats = mock.telegram_stats();
    assert_eq!((stats.hung, stats.pending, stats.answered), (1, 1, 0));
    mock.telegram_clear_fault();
    assert_eq!(poll_ok(&http, &mock, json!({})).await, ids);
}

#[tokio::test]
async fn another_poller_takes_every_poll_over() {
    let mock = platform().await;
    let http = client();
    let ids = mock.telegram_emit(2);
    mock.telegram_set_fault(TelegramFault::OtherPoller);
    let started = Instant::now();
    let (status, body) = call(
        &http,
        &mock,
        "getUpdates",
        json!({"offset": ids[1], "timeout": 2}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!((status, &body["description"]), (409, &json!(TERMINATED)));
    mock.telegram_clear_fault();
    // The offset still counted: the server had read it.
    assert_eq!(poll_ok(&http, &mock, json!({})).await, ids[1..]);
    assert_eq!(mock.telegram_stats().conflicts, 1);
}

#[tokio::test]
async fn refusals_answer_their_errors_and_confirm_nothing() {
    let mock = platform().await;
    let http = client();
    let ids = mock.telegram_emit(1);
    let confirm = json!({"offset": ids[0] + 1});
    mock.telegram_set_fault(TelegramFault::RateLimited { retry_after: 3 });
    let (status, body) = call(&http, &mock, "getUpdates", confirm.clone()).await;
    assert_eq!(status, 429);
    assert_eq!(body["description"], "Too Many Requests: retry after 3");
    assert_eq!(body["parameters"]["retry_after"], 3);
    mock.telegram_set_fault(TelegramFault::ServerError);
    let (status, body) = call(&http, &mock, "getUpdates", confirm.clone()).await;
    assert_eq!(
        (status, body),
        (
            502,
            json!({"ok": false, "error_code": 502, "description": "Bad Gateway"})
        )
    );
    mock.telegram_set_fault(TelegramFault::Unauthorized);
    let (status, body) = call(&http, &mock, "getUpdates", confirm).await;
    assert_eq!(
        (status, &body["description"]),
        (401, &json!("Unauthorized"))
    );
    mock.telegram_clear_fault();
    let stats = mock.telegram_stats();
    assert_eq!(
        (stats.refused, stats.pending, stats.confirmed_below),
        (3, 1, 0)
    );
    assert_eq!(poll_ok(&http, &mock, json!({})).await, ids);
}

#[tokio::test]
async fn a_counted_fault_clears_itself() {
    let mock = platform().await;
    let http = client();
    mock.telegram_set_fault_for(TelegramFault::ServerError, 2);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(call(&http, &mock, "getUpdates", json!({})).await.0);
    }
    assert_eq!(statuses, [502, 502, 200]);
    assert_eq!(mock.telegram_stats().poll_times.len(), 3);
}

#[tokio::test]
async fn slow_answers_come_late() {
    let mock = platform().await;
    let http = client();
    let ids = mock.telegram_emit(1);
    let delay = Duration::from_millis(300);
    mock.telegram_set_fault(TelegramFault::Slow(delay));
    let started = Instant::now();
    assert_eq!(poll_ok(&http, &mock, json!({})).await, ids);
    assert!(started.elapsed() >= delay);
}

#[tokio::test]
async fn a_duplicate_resends_the_last_batch_once() {
    let mock = platform().await;
    let http = client();
    let ids = mock.telegram_emit(2);
    assert_eq!(poll_ok(&http, &mock, json!({})).await, ids);
    mock.telegram_set_fault(TelegramFault::Duplicate);
    let next = json!({"offset": ids[1] + 1});
    // The confirmation is lost: the same batch again, and nothing forgotten.
    assert_eq!(poll_ok(&http, &mock, next.clone()).await, ids);
    assert_eq!(mock.telegram_stats().pending, 2);
    assert!(poll_ok(&http, &mock, next).await.is_empty());
    assert_eq!(mock.telegram_stats().pending, 0);
}

//! Each long-poll fault: what the client sees, how long it lasts, what is counted.

use super::*;
use crate::mock_platform::weixin::{WeixinFault, REPLAY};

#[tokio::test]
async fn hung_polls_are_never_answered_until_the_fault_clears() {
    let mock = wx_mock(fast()).await;
    let token = default_token();
    mock.weixin_emit(1);
    mock.weixin_set_fault(WeixinFault::HangPolls);
    let impatient = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_millis(HOLD_MS * 2))
        .build()
        .unwrap();
    for _ in 0..2 {
        let body = json!({"get_updates_buf": "", "base_info": {"channel_version": "2.2.0"}});
        let request = ilink(&impatient, &mock, "getupdates", &token)
            .json(&body)
            .send();
        let error = within("a client timeout", request).await.unwrap_err();
        assert!(error.is_timeout(), "{error}");
    }
    mock.weixin_clear_fault();
    assert_eq!(
        poll(&client(), &mock, &token, "").await["msgs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let stats = mock.weixin_stats();
    assert_eq!((stats.polls, stats.hung, stats.answered), (3, 2, 1));
}

#[tokio::test]
async fn rate_limited_and_server_error_polls_answer_at_once_for_as_many_polls_as_set() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let token = default_token();
    mock.weixin_emit(1);
    mock.weixin_set_fault_for(WeixinFault::RateLimited, 2);
    for _ in 0..2 {
        let limited = poll(&http, &mock, &token, "").await;
        assert_eq!(
            limited,
            json!({"ret": -2, "errcode": -2, "errmsg": "freq limit"})
        );
    }
    assert_eq!(poll(&http, &mock, &token, "").await["ret"], 0);
    mock.weixin_set_fault(WeixinFault::ServerError);
    for _ in 0..3 {
        let body = json!({"get_updates_buf": ""});
        assert_eq!(call(&http, &mock, "getupdates", &token, body).await.0, 502);
    }
    mock.weixin_clear_fault();
    assert_eq!(poll(&http, &mock, &token, "").await["ret"], 0);
    // A dead token is answered -14 whatever is armed, and does not use the fault up.
    mock.weixin_set_fault_for(WeixinFault::ServerError, 1);
    assert_eq!(poll(&http, &mock, "never-issued", "").await["ret"], -14);
    let body = json!({"get_updates_buf": ""});
    assert_eq!(call(&http, &mock, "getupdates", &token, body).await.0, 502);
    let stats = mock.weixin_stats();
    assert_eq!(
        (stats.rate_limited, stats.server_errors, stats.answered),
        (2, 4, 2)
    );
}

#[tokio::test]
async fn a_slow_poll_answers_late() {
    let mock = wx_mock(fast()).await;
    let http = client();
    mock.weixin_emit(1);
    let delay = Duration::from_millis(400);
    mock.weixin_set_fault_for(WeixinFault::Slow(delay), 1);
    let started = Instant::now();
    let late = poll(&http, &mock, &default_token(), "").await;
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());
    assert_eq!(late["msgs"].as_array().unwrap().len(), 1);
    let started = Instant::now();
    poll(&http, &mock, &default_token(), "").await;
    assert!(started.elapsed() < delay, "the fault was for one poll");
}

#[tokio::test]
async fn a_cursor_reset_hands_out_the_recent_messages_again_once() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let token = default_token();
    mock.weixin_emit(60);
    let first = poll(&http, &mock, &token, "").await;
    let end = cursor_of(&first);
    mock.weixin_set_fault(WeixinFault::CursorReset);
    let replayed = poll(&http, &mock, &token, &end).await;
    let texts = texts(&replayed);
    assert_eq!(texts.len(), REPLAY);
    assert_eq!(texts[0], "weixin message 11");
    assert_eq!(cursor_of(&replayed), end);
    // Cleared itself: the end cursor is held and answered empty.
    assert_eq!(poll(&http, &mock, &token, &end).await["msgs"], json!([]));
}

#[tokio::test]
async fn a_cursor_reset_never_skips_what_the_client_has_not_seen() {
    let mock = wx_mock(fast()).await;
    let http = client();
    mock.weixin_emit(5);
    mock.weixin_set_fault(WeixinFault::CursorReset);
    let answer = poll(&http, &mock, &default_token(), "").await;
    assert_eq!(texts(&answer).len(), 5);
}

#[tokio::test]
async fn a_duplicate_repeats_the_previous_batch_once() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let token = default_token();
    mock.weixin_emit(2);
    let first = poll(&http, &mock, &token, "").await;
    mock.weixin_set_fault(WeixinFault::Duplicate);
    let started = Instant::now();
    let repeated = poll(&http, &mock, &token, &cursor_of(&first)).await;
    assert!(
        started.elapsed() < Duration::from_millis(HOLD_MS),
        "answered at once"
    );
    assert_eq!(repeated, first);
    mock.weixin_emit(1);
    let next = poll(&http, &mock, &token, &cursor_of(&first)).await;
    assert_eq!(texts(&next), ["weixin message 3"]);
    assert_eq!(mock.weixin_stats().messages_delivered, 5);
}

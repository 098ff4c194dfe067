//! Each send fault against a real HTTP client (reqwest) over loopback: what the client sees,
//! what the mock records, and for which platform.

use super::*;
use crate::mock_platform::{Platform, SendFault};

#[tokio::test]
async fn send_500_fails_the_next_posts_of_one_platform_only() {
    let mock = platform().await;
    let http = client();
    let auth = qq_auth(&http, &mock).await;
    mock.set_send_fault(Platform::Discord, SendFault::ServerError(2));
    let body = json!({"content": "x", "msg_type": 0});
    for expected in [500, 500, 200] {
        let status = post(&http, &mock, &discord("1"), "Bot t", body.clone())
            .await
            .status();
        assert_eq!(status, expected);
        if expected == 500 {
            // The other platform is untouched.
            let qq = post(&http, &mock, "/channels/1/messages", &auth, body.clone()).await;
            assert_eq!(qq.status(), 200);
        }
    }
    let discord_posts = mock
        .posts()
        .iter()
        .filter(|p| p.platform == Platform::Discord)
        .count();
    assert_eq!(discord_posts, 1);
    let faulted: Vec<_> = mock
        .send_attempts()
        .into_iter()
        .filter(|a| a.fault.is_some())
        .collect();
    assert_eq!(faulted.len(), 2);
    assert!(faulted
        .iter()
        .all(|a| a.fault == Some("send-500") && !a.recorded));
}

#[tokio::test]
async fn send_429_answers_in_each_platforms_rate_limit_shape() {
    let mock = platform().await;
    let http = client();
    let wait = Duration::from_millis(1500);
    mock.set_send_fault(
        Platform::Discord,
        SendFault::RateLimited {
            posts: 1,
            retry_after: wait,
        },
    );
    let response = post(
        &http,
        &mock,
        &discord("1"),
        "Bot t",
        json!({"content": "x"}),
    )
    .await;
    let headers = response.headers().clone();
    let (status, body) = answer(response).await;
    assert_eq!(status, 429);
    assert_eq!(
        body,
        json!({"message": "You are being rate limited.", "retry_after": 1.5, "global": false})
    );
    assert_eq!(headers["retry-after"], "2");
    assert_eq!(headers["x-ratelimit-remaining"], "0");
    assert_eq!(headers["x-ratelimit-reset-after"], "1.500");
    assert_eq!(headers["x-ratelimit-scope"], "user");
    for name in [
        "x-ratelimit-limit",
        "x-ratelimit-reset",
        "x-ratelimit-bucket",
    ] {
        assert!(headers.contains_key(name), "{name}");
    }
    let [limited] = mock.send_attempts().try_into().unwrap();
    assert_eq!(
        (limited.status, limited.retry_after),
        (Some(429), Some(wait))
    );
    assert!(mock.posts().is_empty());
    let after = post(
        &http,
        &mock,
        &discord("1"),
        "Bot t",
        json!({"content": "x"}),
    )
    .await;
    assert_eq!(after.status(), 200, "one post only");

    let auth = qq_auth(&http, &mock).await;
    mock.set_send_fault(
        Platform::Qq,
        SendFault::RateLimited {
            posts: 1,
            retry_after: wait,
        },
    );
    let text = json!({"content": "x", "msg_type": 0});
    let response = post(&http, &mock, "/v2/groups/G/messages", &auth, text).await;
    assert!(!response.headers().contains_key("retry-after"));
    let (status, body) = answer(response).await;
    assert_eq!((status.as_u16(), &body["code"]), (429, &json!(22009)));
    let qq = mock.send_attempts().pop().unwrap();
    assert_eq!((qq.status, qq.retry_after), (Some(429), None));
}

#[tokio::test]
async fn send_hang_reads_and_never_answers_nor_records() {
    let mock = platform().await;
    let http = client();
    mock.set_send_fault(Platform::Discord, SendFault::Hang(1));
    let url = format!("{}{}", mock.http_base(), discord("1"));
    let request = http
        .post(&url)
        .header("Authorization", "Bot t")
        .json(&json!({"content": "x"}));
    let error = request.timeout(QUIET).send().await.unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert!(mock.posts().is_empty());
    let [hung] = mock.send_attempts().try_into().unwrap();
    assert_eq!(
        (hung.status, hung.recorded, hung.fault),
        (None, false, Some("send-hang"))
    );
    let next = post(
        &http,
        &mock,
        &discord("1"),
        "Bot t",
        json!({"content": "x"}),
    )
    .await;
    assert_eq!(next.status(), 200);
}

#[tokio::test]
async fn after_processing_faults_record_the_post_and_give_no_answer() {
    let mock = platform().await;
    let http = client();
    let url = format!("{}{}", mock.http_base(), discord("1"));
    let send = |content: &str| {
        http.post(&url)
            .header("Authorization", "Bot t")
            .json(&json!({"content": content}))
            .timeout(QUIET)
            .send()
    };

    mock.set_send_fault(Platform::Discord, SendFault::ResetAfterProcessing(1));
    let error = within("the reset", send("reset")).await.unwrap_err();
    assert!(!error.is_timeout(), "a reset, not a timeout: {error}");
    mock.set_send_fault(Platform::Discord, SendFault::HangAfterProcessing(1));
    let error = send("hang").await.unwrap_err();
    assert!(error.is_timeout(), "{error}");

    let contents: Vec<String> = mock.posts().into_iter().map(|p| p.content).collect();
    assert_eq!(contents, ["reset", "hang"], "both were processed");
    let attempts = mock.send_attempts();
    assert!(attempts.iter().all(|a| a.recorded && a.status.is_none()));
    assert_eq!(attempts[0].fault, Some("send-reset-after-processing"));
    assert_eq!(attempts[1].fault, Some("send-hang-after-processing"));
    assert_eq!(
        post(
            &http,
            &mock,
            &discord("1"),
            "Bot t",
            json!({"content": "x"})
        )
        .await
        .status(),
        200
    );
}

#[tokio::test]
async fn send_down_answers_503_until_the_outage_ends_or_is_cleared() {
    let mock = platform().await;
    let http = client();
    let auth = qq_auth(&http, &mock).await;
    let text = json!({"content": "x", "msg_type": 0});
    let started = Instant::now();
    let outage = Duration::from_millis(400);
    mock.set_send_fault(Platform::Qq, SendFault::Down(outage));
    let status = post(&http, &mock, "/v2/users/U/messages", &auth, text.clone())
        .await
        .status();
    assert_eq!(status, 503);
    tokio::time::sleep(outage.saturating_sub(started.elapsed()) + Duration::from_millis(50)).await;
    let status = post(&http, &mock, "/v2/users/U/messages", &auth, text.clone())
        .await
        .status();
    assert_eq!(status, 200, "the outage is over");

    mock.set_send_fault(Platform::Qq, SendFault::Down(Duration::from_secs(3600)));
    assert_eq!(
        post(&http, &mock, "/dms/D/messages", &auth, text.clone())
            .await
            .status(),
        503
    );
    mock.clear_send_fault(Platform::Qq);
    assert_eq!(
        post(&http, &mock, "/dms/D/messages", &auth, text)
            .await
            .status(),
        200
    );
    assert_eq!(mock.posts().len(), 2);
}

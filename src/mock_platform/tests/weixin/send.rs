//! `sendmessage`: the record, the `client_id` dedupe, the `context_token` rule, refusals and
//! the shared send faults in iLink's shapes.

use super::*;
use crate::mock_platform::{Platform, SendFault, Target};

/// A text send as hermes-agent builds it.
pub(super) fn text_to(to: &str, text: &str, client_id: &str, context: Option<&str>) -> Value {
    let mut msg = json!({
        "from_user_id": "",
        "to_user_id": to,
        "client_id": client_id,
        "message_type": 2,
        "message_state": 2,
        "item_list": [{"type": 1, "text_item": {"text": text}}],
    });
    if let Some(context) = context {
        msg["context_token"] = json!(context);
    }
    json!({"msg": msg})
}

async fn send_text(
    http: &reqwest::Client,
    mock: &MockPlatform,
    body: Value,
) -> (StatusCode, Value) {
    call(http, mock, "sendmessage", &default_token(), body).await
}

#[tokio::test]
async fn a_repeated_client_id_posts_once_and_succeeds_twice() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let body = text_to(MOCK_PEER, "hello", "hermes-weixin-1", None);
    for _ in 0..2 {
        let (status, answer) = send_text(&http, &mock, body.clone()).await;
        assert_eq!(
            (status.as_u16(), answer),
            (200, json!({"ret": 0, "errmsg": ""}))
        );
    }
    let other = text_to(MOCK_PEER, "hello", "hermes-weixin-2", None);
    assert_eq!(send_text(&http, &mock, other).await.1["ret"], 0);
    let posts = mock.posts();
    assert_eq!(posts.len(), 2);
    let post = &posts[0];
    assert_eq!(
        (post.platform, post.target),
        (Platform::Weixin, Target::Peer)
    );
    assert_eq!(
        (post.target_id.as_str(), post.content.as_str()),
        (MOCK_PEER, "hello")
    );
    assert_eq!(post.nonce.as_deref(), Some("hermes-weixin-1"));
    let attempts = mock.send_attempts();
    let recorded: Vec<bool> = attempts.iter().map(|a| a.recorded).collect();
    assert_eq!(recorded, [true, false, true]);
    assert_eq!(attempts[1].message_id, attempts[0].message_id);
    assert_eq!(mock.weixin_stats().sends, 3);
}

#[tokio::test]
async fn only_the_newest_context_token_is_taken_and_none_is_fine() {
    let mock = wx_mock(fast()).await;
    let http = client();
    mock.weixin_emit(1);
    let older = mock.weixin_context_token(MOCK_PEER).unwrap();
    mock.weixin_emit(1);
    let newest = mock.weixin_context_token(MOCK_PEER).unwrap();
    assert_ne!(older, newest);
    let stale = text_to(MOCK_PEER, "a", "c-1", Some(&older));
    let expired = json!({"ret": -14, "errcode": -14, "errmsg": "session timeout"});
    assert_eq!(send_text(&http, &mock, stale).await.1, expired);
    // What hermes-agent does next: the same send without the token.
    let bare = text_to(MOCK_PEER, "a", "c-1", None);
    assert_eq!(send_text(&http, &mock, bare).await.1["ret"], 0);
    let fresh = text_to(MOCK_PEER, "b", "c-2", Some(&newest));
    assert_eq!(send_text(&http, &mock, fresh).await.1["ret"], 0);
    // A peer that never wrote has no token to echo.
    let stranger = text_to("stranger@im.wechat", "c", "c-3", Some(&newest));
    assert_eq!(send_text(&http, &mock, stranger).await.1, expired);
    let contents: Vec<String> = mock.posts().into_iter().map(|p| p.content).collect();
    assert_eq!(contents, ["a", "b"]);
    let stats = mock.weixin_stats();
    assert_eq!((stats.stale_context_tokens, stats.expired_answers), (2, 2));
}

#[tokio::test]
async fn malformed_and_overlong_sends_are_refused() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let limit = "字".repeat(2000);
    assert_eq!(
        send_text(&http, &mock, text_to(MOCK_PEER, &limit, "c-1", None))
            .await
            .1["ret"],
        0
    );
    let long = format!("{limit}x");
    let (status, refused) = send_text(&http, &mock, text_to(MOCK_PEER, &long, "c-2", None)).await;
    assert_eq!((status.as_u16(), &refused["ret"]), (200, &json!(-1)));
    assert!(refused["errmsg"].as_str().unwrap().contains("2000"));
    let no_text = json!({"msg": {"to_user_id": MOCK_PEER, "item_list": [{"type": 2}]}});
    let no_target = text_to("", "x", "c-3", None);
    for body in [json!({}), no_text, no_target] {
        assert_eq!(send_text(&http, &mock, body).await.1["ret"], -1);
    }
    assert_eq!(mock.posts().len(), 1);
}

#[tokio::test]
async fn send_faults_answer_in_ilinks_shapes() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let body = |id: &str| text_to(MOCK_PEER, "x", id, None);
    let limit = SendFault::RateLimited {
        posts: 1,
        retry_after: Duration::from_secs(1),
    };
    mock.set_send_fault(Platform::Weixin, limit);
    let (status, limited) = send_text(&http, &mock, body("c-1")).await;
    assert_eq!(
        (status.as_u16(), limited),
        (
            200,
            json!({"ret": -2, "errcode": -2, "errmsg": "freq limit"})
        )
    );
    mock.set_send_fault(Platform::Weixin, SendFault::ServerError(1));
    assert_eq!(send_text(&http, &mock, body("c-1")).await.0, 500);
    mock.set_send_fault(Platform::Weixin, SendFault::Down(DEADLINE));
    assert_eq!(send_text(&http, &mock, body("c-1")).await.0, 502);
    mock.clear_send_fault(Platform::Weixin);
    assert!(mock.posts().is_empty());
    // Recorded, then the connection resets: the retry with the same client_id is absorbed.
    mock.set_send_fault(Platform::Weixin, SendFault::ResetAfterProcessing(1));
    let mut request = body("c-9");
    request["base_info"] = json!({"channel_version": "2.2.0"});
    let lost = ilink(&http, &mock, "sendmessage", &default_token())
        .json(&request)
        .send();
    assert!(within("a reset", lost).await.is_err());
    assert_eq!(send_text(&http, &mock, body("c-9")).await.1["ret"], 0);
    assert_eq!(mock.posts().len(), 1);
    let faults: Vec<Option<&str>> = mock.send_attempts().iter().map(|a| a.fault).collect();
    assert_eq!(
        faults,
        [
            Some("send-429"),
            Some("send-500"),
            Some("send-down"),
            Some("send-reset-after-processing"),
            None
        ]
    );
    let stats = mock.weixin_stats();
    assert_eq!((stats.rate_limited, stats.server_errors), (1, 2));
}

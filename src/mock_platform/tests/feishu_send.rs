//! Feishu's token and message endpoints against a real HTTP client (reqwest) over loopback:
//! answers, validation, the uuid dedupe, the record, and the shared send faults.

use super::feishu::*;
use super::*;
use crate::mock_platform::{FeishuConfig, FeishuMessage, Platform, SendFault, Target};

const CHAT: &str = "oc_sendchat0001";
const TOKEN_PATH: &str = "/open-apis/auth/v3/tenant_access_token/internal";

fn create(kind: &str) -> String {
    format!("/open-apis/im/v1/messages?receive_id_type={kind}")
}

fn text(receive_id: &str, text: &str, uuid: &str) -> Value {
    json!({
        "receive_id": receive_id,
        "msg_type": "text",
        "content": json!({"text": text}).to_string(),
        "uuid": uuid,
    })
}

async fn token_answer(
    http: &reqwest::Client,
    mock: &MockPlatform,
    body: Value,
) -> (StatusCode, Value) {
    let url = format!("{}{TOKEN_PATH}", mock.http_base());
    answer(
        within("a token", http.post(url).json(&body).send())
            .await
            .unwrap(),
    )
    .await
}

/// A fresh `Authorization` value.
pub(super) async fn bearer(http: &reqwest::Client, mock: &MockPlatform) -> String {
    let config = FeishuConfig::default();
    let body = json!({"app_id": config.app_id, "app_secret": config.app_secret});
    let (status, token) = token_answer(http, mock, body).await;
    assert_eq!(status, 200, "{token}");
    format!("Bearer {}", token["tenant_access_token"].as_str().unwrap())
}

#[tokio::test]
async fn the_token_endpoint_answers_as_documented() {
    let mock = feishu_mock(fast()).await;
    let http = client();
    let config = FeishuConfig::default();
    let good = json!({"app_id": config.app_id, "app_secret": config.app_secret});
    let (status, first) = token_answer(&http, &mock, good.clone()).await;
    assert_eq!(
        (status.as_u16(), &first["code"], &first["expire"]),
        (200, &json!(0), &json!(7200))
    );
    let token = first["tenant_access_token"].as_str().unwrap();
    assert!(token.starts_with("t-"), "{token}");
    // Asked again with most of its life left: the same token.
    let (_, again) = token_answer(&http, &mock, good).await;
    assert_eq!(again["tenant_access_token"], token);
    assert_eq!(mock.feishu_tokens_issued(), 1);

    let wrong = json!({"app_id": config.app_id, "app_secret": "nope"});
    let (status, body) = token_answer(&http, &mock, wrong).await;
    assert_eq!(
        (status.as_u16(), &body["code"]),
        (400, &json!(10014)),
        "{body}"
    );
    let unknown = json!({"app_id": "cli_other", "app_secret": "nope"});
    let (status, body) = token_answer(&http, &mock, unknown).await;
    assert_eq!(
        (status.as_u16(), &body["code"]),
        (400, &json!(10003)),
        "{body}"
    );
}

#[tokio::test]
async fn create_answers_the_message_and_records_the_post() {
    let mock = feishu_mock(fast()).await;
    let http = client();
    let auth = bearer(&http, &mock).await;
    let response = post(
        &http,
        &mock,
        &create("chat_id"),
        &auth,
        text(CHAT, "hi 飞书", "u-1"),
    )
    .await;
    let (status, body) = answer(response).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["code"], &body["msg"]),
        (&json!(0), &json!("success"))
    );
    let data = &body["data"];
    let message_id = data["message_id"].as_str().unwrap();
    assert!(
        message_id.starts_with("om_") && message_id.len() == 35,
        "{message_id}"
    );
    assert_eq!(
        (&data["chat_id"], &data["msg_type"]),
        (&json!(CHAT), &json!("text"))
    );
    assert_eq!(data["sender"]["sender_type"], "app");
    assert_eq!(
        data["body"]["content"],
        json!({"text": "hi 飞书"}).to_string()
    );

    let response = post(
        &http,
        &mock,
        &create("open_id"),
        &auth,
        text("ou_user1", "dm", "u-2"),
    )
    .await;
    let (status, body) = answer(response).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["chat_id"], "oc_p2p_user1");

    let posts = mock.posts();
    assert_eq!(posts.len(), 2);
    let first = &posts[0];
    assert_eq!(
        (first.platform, first.target),
        (Platform::Feishu, Target::ChatId)
    );
    assert_eq!(
        (first.target_id.as_str(), first.content.as_str()),
        (CHAT, "hi 飞书")
    );
    assert_eq!(
        (first.nonce.as_deref(), first.message_id.as_str()),
        (Some("u-1"), message_id)
    );
    assert_eq!(
        (posts[1].target, posts[1].target_id.as_str()),
        (Target::OpenId, "ou_user1")
    );
    let attempts = mock.send_attempts();
    assert_eq!(attempts[1].target_id, "ou_user1");
}

#[tokio::test]
async fn a_repeated_uuid_gets_the_first_message_and_records_nothing() {
    let mock = feishu_mock(fast()).await;
    let http = client();
    let auth = bearer(&http, &mock).await;
    let path = create("chat_id");
    let (_, first) =
        answer(post(&http, &mock, &path, &auth, text(CHAT, "once", "same")).await).await;
    let (status, repeat) =
        answer(post(&http, &mock, &path, &auth, text(CHAT, "once", "same")).await).await;
    assert_eq!(status, 200);
    assert_eq!(repeat, first);
    // A refreshed token is the same app: still a repeat.
    mock.expire_feishu_tokens();
    let auth = bearer(&http, &mock).await;
    let (_, again) =
        answer(post(&http, &mock, &path, &auth, text(CHAT, "once", "same")).await).await;
    assert_eq!(again["data"]["message_id"], first["data"]["message_id"]);
    let (_, other) =
        answer(post(&http, &mock, &path, &auth, text(CHAT, "once", "other")).await).await;
    assert_ne!(other["data"]["message_id"], first["data"]["message_id"]);
    assert_eq!(mock.posts().len(), 2);
    let recorded: Vec<bool> = mock.send_attempts().iter().map(|a| a.recorded).collect();
    assert_eq!(recorded, [true, false, false, true]);
}

#[tokio::test]
async fn a_reply_targets_a_known_message() {
    let mock = feishu_mock(fast()).await;
    let http = client();
    let auth = bearer(&http, &mock).await;
    mock.feishu_emit_message(FeishuMessage::text(CHAT, "question"));
    let parent = mock.feishu_events()[0].message_id.clone().unwrap();
    let body = json!({"msg_type": "text", "content": "{\"text\":\"answer\"}", "uuid": "r-1"});
    let path = format!("/open-apis/im/v1/messages/{parent}/reply");
    let (status, reply) = answer(post(&http, &mock, &path, &auth, body.clone()).await).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        (&reply["data"]["parent_id"], &reply["data"]["chat_id"]),
        (&json!(parent), &json!(CHAT))
    );
    let post_ = mock.posts().remove(0);
    assert_eq!(
        (post_.target, post_.reply_to.as_deref()),
        (Target::Reply, Some(parent.as_str()))
    );
    // The bot's own message can be replied to as well; an unknown id cannot.
    let own = reply["data"]["message_id"].as_str().unwrap();
    let path = format!("/open-apis/im/v1/messages/{own}/reply");
    let body2 = json!({"msg_type": "text", "content": "{\"text\":\"more\"}"});
    assert_eq!(
        post(&http, &mock, &path, &auth, body2.clone())
            .await
            .status(),
        200
    );
    let path = "/open-apis/im/v1/messages/om_unknown/reply";
    let (status, unknown) = answer(post(&http, &mock, path, &auth, body2).await).await;
    assert_eq!(
        (status.as_u16(), &unknown["code"]),
        (400, &json!(230001)),
        "{unknown}"
    );
}

#[tokio::test]
async fn requests_are_checked_as_the_platform_checks_them() {
    let mock = feishu_mock(fast()).await;
    let http = client();
    let auth = bearer(&http, &mock).await;
    let long = "x".repeat(150 * 1024);
    let cases = [
        ("/open-apis/im/v1/messages", text(CHAT, "t", ""), 99992402),
        (&*create("email"), text(CHAT, "t", ""), 99992402),
        (
            &*create("chat_id"),
            json!({"msg_type": "text", "content": "{}"}),
            99992402,
        ),
        (&*create("chat_id"), text("ou_not_a_chat", "t", ""), 230001),
        (&*create("chat_id"), text(CHAT, " ", ""), 230001),
        (
            &*create("chat_id"),
            json!({"receive_id": CHAT, "msg_type": "text", "content": "hi"}),
            230001,
        ),
        (
            &*create("chat_id"),
            text(CHAT, "t", &"u".repeat(51)),
            99992402,
        ),
        (&*create("chat_id"), text(CHAT, &long, ""), 230025),
    ];
    for (path, body, code) in cases {
        let (status, answer) = answer(post(&http, &mock, path, &auth, body).await).await;
        assert_eq!(
            (status.as_u16(), &answer["code"]),
            (400, &json!(code)),
            "{path}: {answer}"
        );
    }
    let violation = answer(post(&http, &mock, &create("chat_id"), &auth, json!({})).await)
        .await
        .1;
    assert!(
        violation["error"]["field_violations"][0]["field"].is_string(),
        "{violation}"
    );
    let (status, missing) =
        answer(post(&http, &mock, &create("chat_id"), "", text(CHAT, "t", "")).await).await;
    assert_eq!((status.as_u16(), &missing["code"]), (400, &json!(99991661)));
    mock.expire_feishu_tokens();
    let (_, stale) =
        answer(post(&http, &mock, &create("chat_id"), &auth, text(CHAT, "t", "")).await).await;
    assert_eq!(stale["code"], 99991663);
    assert!(mock.posts().is_empty());
}

#[tokio::test]
async fn send_faults_act_on_feishu_posts() {
    let mock = feishu_mock(fast()).await;
    let http = client();
    let auth = bearer(&http, &mock).await;
    let path = create("chat_id");
    mock.set_send_fault(Platform::Feishu, SendFault::ServerError(1));
    assert_eq!(
        post(&http, &mock, &path, &auth, text(CHAT, "a", "f-1"))
            .await
            .status(),
        500
    );
    assert_eq!(
        post(&http, &mock, &path, &auth, text(CHAT, "a", "f-1"))
            .await
            .status(),
        200
    );

    let wait = Duration::from_millis(1500);
    mock.set_send_fault(
        Platform::Feishu,
        SendFault::RateLimited {
            posts: 1,
            retry_after: wait,
        },
    );
    let response = post(&http, &mock, &path, &auth, text(CHAT, "b", "f-2")).await;
    assert_eq!(response.headers()["x-ogw-ratelimit-reset"], "2");
    let (status, limited) = answer(response).await;
    assert_eq!((status.as_u16(), &limited["code"]), (429, &json!(99991400)));
    assert_eq!(mock.send_attempts().last().unwrap().retry_after, Some(wait));

    // Processed, then the connection reset: the retry with the same uuid gets the first one.
    mock.set_send_fault(Platform::Feishu, SendFault::ResetAfterProcessing(1));
    let url = format!("{}{path}", mock.http_base());
    let lost = http
        .post(&url)
        .header("Authorization", &auth)
        .json(&text(CHAT, "c", "f-3"))
        .send()
        .await;
    assert!(lost.is_err());
    let (status, retried) =
        answer(post(&http, &mock, &path, &auth, text(CHAT, "c", "f-3")).await).await;
    assert_eq!(status, 200);
    let posts = mock.posts();
    assert_eq!(posts.iter().filter(|p| p.content == "c").count(), 1);
    assert_eq!(
        retried["data"]["message_id"],
        posts.last().unwrap().message_id.as_str()
    );
    assert!(posts.iter().all(|p| p.platform == Platform::Feishu));
}

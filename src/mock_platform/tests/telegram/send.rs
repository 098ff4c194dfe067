//! `sendMessage`: answers, checks, replies, the record, and the shared send faults in
//! Telegram's shape.

use super::*;
use crate::mock_platform::{Platform, SendFault, Target};

async fn send(http: &reqwest::Client, mock: &MockPlatform, body: Value) -> (u16, Value) {
    call(http, mock, "sendMessage", body).await
}

#[tokio::test]
async fn a_message_is_answered_and_recorded() {
    let mock = platform().await;
    let http = client();
    let (status, body) = send(&http, &mock, json!({"chat_id": 1001, "text": "  hello  "})).await;
    assert_eq!(status, 200, "{body}");
    let message = &body["result"];
    assert_eq!(message["message_id"], 1);
    assert_eq!(message["chat"]["id"], 1001);
    assert_eq!(message["chat"]["type"], "private");
    assert_eq!(message["from"]["is_bot"], true);
    assert_eq!(message["from"]["id"], 123456);
    assert_eq!(message["text"], "hello");
    assert!(message["date"].as_u64().is_some());
    // Form-encoded, with the chat id as a string: the next id in the chat.
    let request = http
        .post(method_url(&mock, "sendmessage"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("chat_id=1001&text=second+one");
    let (status, body) = answer(within("a form send", request.send()).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), &body["result"]["message_id"]),
        (200, &json!(2))
    );
    let posts = mock.posts();
    assert_eq!(posts.len(), 2);
    let post = &posts[0];
    assert_eq!(
        (post.platform, post.target),
        (Platform::Telegram, Target::Chat)
    );
    assert_eq!(
        (post.target_id.as_str(), post.content.as_str()),
        ("1001", "hello")
    );
    assert_eq!(
        (post.message_id.as_str(), &post.reply_to, &post.nonce),
        ("1", &None, &None)
    );
    assert_eq!(posts[1].content, "second one");
    let attempts = mock.send_attempts();
    assert!(attempts
        .iter()
        .all(|a| a.status == Some(200) && a.recorded && a.platform == Platform::Telegram));
    let url = format!("{}/_posts", mock.http_base());
    let record: Value = within("the record", http.get(url).send())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(record["posts"][0]["platform"], "telegram");
    assert_eq!(record["posts"][0]["target"], "chat");
}

#[tokio::test]
async fn text_must_be_1_to_4096_characters() {
    let mock = platform().await;
    let http = client();
    for (text, description) in [
        ("   ".to_owned(), "Bad Request: message text is empty"),
        ("é".repeat(4097), "Bad Request: message is too long"),
    ] {
        let (status, body) = send(&http, &mock, json!({"chat_id": 1001, "text": text})).await;
        assert_eq!((status, &body["description"]), (400, &json!(description)));
    }
    let (status, _) = send(&http, &mock, json!({"chat_id": 1001})).await;
    assert_eq!(status, 400);
    let (status, _) = send(
        &http,
        &mock,
        json!({"chat_id": 1001, "text": "é".repeat(4096)}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(mock.posts().len(), 1);
    assert_eq!(mock.send_attempts().len(), 4);
}

#[tokio::test]
async fn only_known_chats_can_be_written_to() {
    let mock = platform().await;
    let http = client();
    for chat in [json!(999), json!("@nobody"), json!("abc")] {
        let (status, body) = send(&http, &mock, json!({"chat_id": chat, "text": "x"})).await;
        assert_eq!(
            (status, &body["description"]),
            (400, &json!("Bad Request: chat not found"))
        );
    }
    let (status, body) = send(&http, &mock, json!({"chat_id": "", "text": "x"})).await;
    assert_eq!(
        (status, &body["description"]),
        (400, &json!("Bad Request: chat_id is empty"))
    );
    // A chat an update came from is known from then on.
    mock.telegram_emit_text(999, "hi bot");
    let (status, body) = send(&http, &mock, json!({"chat_id": "999", "text": "hi"})).await;
    assert_eq!((status, &body["result"]["message_id"]), (200, &json!(2)));
    // A public chat by its username.
    let (status, body) = send(
        &http,
        &mock,
        json!({"chat_id": "@mockchannel", "text": "x"}),
    )
    .await;
    assert_eq!(
        (status, &body["result"]["chat"]["id"]),
        (200, &json!(-1_001_000_000_001i64))
    );
    assert_eq!(body["result"]["chat"]["type"], "supergroup");
    let targets: Vec<String> = mock.posts().into_iter().map(|p| p.target_id).collect();
    assert_eq!(targets, ["999", "-1001000000001"]);
}

#[tokio::test]
async fn replies_need_the_message_they_answer() {
    let mock = platform().await;
    let http = client();
    mock.telegram_emit_text(1001, "question");
    let reply = json!({"chat_id": 1001, "text": "answer", "reply_parameters": {"message_id": 1}});
    let (status, body) = send(&http, &mock, reply).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["reply_to_message"]["text"], "question");
    assert_eq!(body["result"]["message_id"], 2);
    // The legacy parameter, to the bot's own message.
    let legacy = json!({"chat_id": 1001, "text": "again", "reply_to_message_id": 2});
    let (status, body) = send(&http, &mock, legacy).await;
    assert_eq!(
        (status, &body["result"]["reply_to_message"]["text"]),
        (200, &json!("answer"))
    );
    let missing = json!({"chat_id": 1001, "text": "lost", "reply_parameters": {"message_id": 99}});
    let (status, body) = send(&http, &mock, missing).await;
    assert_eq!(
        (status, &body["description"]),
        (400, &json!("Bad Request: message to be replied not found"))
    );
    let lenient = json!({"chat_id": 1001, "text": "lost", "reply_parameters": {"message_id": 99, "allow_sending_without_reply": true}});
    let (status, body) = send(&http, &mock, lenient).await;
    assert_eq!(status, 200);
    assert!(body["result"].get("reply_to_message").is_none(), "{body}");
    let replies: Vec<Option<String>> = mock.posts().into_iter().map(|p| p.reply_to).collect();
    assert_eq!(replies, [Some("1".to_owned()), Some("2".to_owned()), None]);
}

#[tokio::test]
async fn send_faults_answer_in_telegrams_shape() {
    let mock = platform().await;
    let http = client();
    let body = json!({"chat_id": 1001, "text": "x"});
    let wait = Duration::from_millis(1500);
    mock.set_send_fault(
        Platform::Telegram,
        SendFault::RateLimited {
            posts: 1,
            retry_after: wait,
        },
    );
    let (status, answer) = send(&http, &mock, body.clone()).await;
    assert_eq!(status, 429);
    assert_eq!(answer["description"], "Too Many Requests: retry after 2");
    assert_eq!(answer["parameters"], json!({"retry_after": 2}));
    mock.set_send_fault(Platform::Telegram, SendFault::ServerError(1));
    let (status, answer) = send(&http, &mock, body.clone()).await;
    assert_eq!(
        (status, &answer["description"]),
        (500, &json!("Internal Server Error"))
    );
    mock.set_send_fault(Platform::Telegram, SendFault::Down(Duration::from_secs(60)));
    let (status, answer) = send(&http, &mock, body.clone()).await;
    assert_eq!(
        (status, &answer["description"]),
        (502, &json!("Bad Gateway"))
    );
    mock.clear_send_fault(Platform::Telegram);
    let (status, _) = send(&http, &mock, body).await;
    assert_eq!(status, 200);
    let attempts = mock.send_attempts();
    let seen: Vec<_> = attempts
        .iter()
        .map(|a| (a.status, a.fault, a.recorded))
        .collect();
    assert_eq!(
        seen,
        [
            (Some(429), Some("send-429"), false),
            (Some(500), Some("send-500"), false),
            (Some(502), Some("send-down"), false),
            (Some(200), None, true),
        ]
    );
    assert_eq!(attempts[0].retry_after, Some(Duration::from_secs(2)));
    assert_eq!(mock.posts().len(), 1);
}

#[tokio::test]
async fn a_wrong_token_is_401_and_logged_as_an_attempt() {
    let mock = platform().await;
    let http = client();
    let url = format!("{}/bot123456:revoked/sendMessage", mock.http_base());
    let request = http
        .post(url)
        .json(&json!({"chat_id": 1001, "text": "x"}))
        .send();
    let (status, body) = answer(within("a send", request).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), &body),
        (
            401,
            &json!({"ok": false, "error_code": 401, "description": "Unauthorized"})
        )
    );
    assert!(mock.posts().is_empty());
    let attempts = mock.send_attempts();
    assert_eq!(
        (attempts.len(), attempts[0].status, attempts[0].recorded),
        (1, Some(401), false)
    );
}

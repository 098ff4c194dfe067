//! The message-send endpoints against a real HTTP client (reqwest) over loopback: each
//! endpoint's answer and record, authorisation, validation and both platforms' dedupe rules.

use reqwest::StatusCode;

use super::*;
use crate::mock_platform::{Platform, Post, Target};

#[tokio::test]
async fn qq_endpoints_answer_as_documented_and_record_each_post() {
    let mock = platform().await;
    let http = client();
    let auth = qq_auth(&http, &mock).await;
    let text = json!({"content": "hi", "msg_type": 0});
    for (path, target, id) in [
        ("/v2/groups/G1/messages", Target::Group, "G1"),
        ("/v2/users/U1/messages", Target::User, "U1"),
    ] {
        let (status, body) = answer(post(&http, &mock, path, &auth, text.clone()).await).await;
        assert_eq!(status, 200, "{body}");
        assert!(
            body["id"].is_string() && body["timestamp"].is_u64(),
            "{body}"
        );
        let recorded = mock.posts().last().cloned().unwrap();
        assert_eq!((recorded.target, recorded.target_id.as_str()), (target, id));
        assert_eq!(recorded.message_id, body["id"].as_str().unwrap());
    }
    let reply = json!({"content": "re", "msg_id": "M1"});
    for path in ["/channels/C1/messages", "/dms/D1/messages"] {
        let (status, body) = answer(post(&http, &mock, path, &auth, reply.clone()).await).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["content"], "re");
        assert!(
            body["timestamp"].as_str().unwrap().ends_with("+08:00"),
            "{body}"
        );
    }
    let posts = mock.posts();
    assert_eq!(posts.len(), 4);
    let channel = &posts[2];
    assert_eq!(channel.platform, Platform::Qq);
    assert_eq!(
        (channel.target, channel.target_id.as_str()),
        (Target::Channel, "C1")
    );
    assert_eq!(channel.reply_to.as_deref(), Some("M1"));
    assert_eq!(posts[3].target, Target::Dm);
    assert!(posts
        .windows(2)
        .all(|w| w[0].received_at <= w[1].received_at));

    // The record over HTTP, for benchmarks outside the process.
    let record: Value = http
        .get(format!("{}/_posts", mock.http_base()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(record["posts"].as_array().unwrap().len(), 4);
    assert_eq!(record["posts"][0]["platform"], "qq");
    assert_eq!(record["posts"][0]["target"], "group");
    assert_eq!(record["attempts"].as_array().unwrap().len(), 4);
    assert_eq!(record["attempts"][0]["status"], 200);
}

#[tokio::test]
async fn discord_create_message_returns_the_message_object() {
    let mock = platform().await;
    let http = client();
    let body = json!({
        "content": "hello",
        "nonce": "n-1",
        "message_reference": {"message_id": "111"},
    });
    let (status, message) = answer(post(&http, &mock, &discord("42"), "Bot t", body).await).await;
    assert_eq!(status, 200, "{message}");
    assert_eq!(message["channel_id"], "42");
    assert_eq!(message["content"], "hello");
    assert_eq!(message["nonce"], "n-1");
    assert_eq!(message["message_reference"]["message_id"], "111");
    let id: u64 = message["id"].as_str().unwrap().parse().unwrap();
    let [recorded] = mock.posts().try_into().unwrap();
    let expected = Post {
        platform: Platform::Discord,
        target: Target::Channel,
        target_id: "42".into(),
        content: "hello".into(),
        reply_to: Some("111".into()),
        msg_seq: None,
        nonce: Some("n-1".into()),
        message_id: id.to_string(),
        files: vec![],
        ..recorded.clone()
    };
    assert_eq!(recorded, expected);
    // A snowflake: its top bits are the post's time since Discord's epoch.
    assert_eq!((id >> 22) + 1_420_070_400_000, recorded.received_unix_ms);

    // An integer nonce is echoed as an integer and recorded in decimal.
    let body = json!({"content": "x", "nonce": 7});
    let (_, message) = answer(post(&http, &mock, &discord("42"), "Bot t", body).await).await;
    assert_eq!(message["nonce"], 7);
    assert_eq!(mock.posts()[1].nonce.as_deref(), Some("7"));
}

#[tokio::test]
async fn posts_without_valid_authorization_are_refused_and_not_recorded() {
    let mock = MockPlatform::start(MockConfig {
        expected_token: Some("right".into()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let http = client();
    let body = json!({"content": "hi", "msg_type": 0});
    for auth in ["Bot wrong", "right", "Bearer right", "Bot "] {
        let (status, error) =
            answer(post(&http, &mock, &discord("1"), auth, body.clone()).await).await;
        assert_eq!(status, 401, "{auth}");
        assert_eq!(error, json!({"message": "401: Unauthorized", "code": 0}));
    }
    let (status, _) =
        answer(post(&http, &mock, &discord("1"), "Bot right", body.clone()).await).await;
    assert_eq!(status, 200);

    let auth = qq_auth(&http, &mock).await;
    for bad in ["QQBot not-issued", "Bot right", ""] {
        let response = post(&http, &mock, "/v2/groups/G/messages", bad, body.clone()).await;
        assert!(response.headers().contains_key("x-tps-trace-id"));
        let (status, error) = answer(response).await;
        assert_eq!(status, 401, "{bad}");
        assert_eq!(error["code"], 11244);
    }
    mock.expire_access_tokens();
    let (status, _) = answer(post(&http, &mock, "/v2/users/U/messages", &auth, body).await).await;
    assert_eq!(status, 401, "an expired access token");
    assert_eq!(mock.posts().len(), 1);
    let refused = mock
        .send_attempts()
        .iter()
        .filter(|a| a.status == Some(401))
        .count();
    assert_eq!(refused, 8);
}

#[tokio::test]
async fn bodies_are_validated_as_the_docs_say() {
    let mock = platform().await;
    let http = client();
    let path = discord("1");
    let cases = [
        (json!({}), 50006),
        (json!({"content": ""}), 50006),
        (json!({"content": "é".repeat(2001)}), 50035),
        (json!({"content": "x", "nonce": "n".repeat(26)}), 50035),
        (json!({"content": "x", "enforce_nonce": "yes"}), 50035),
        (json!(["not", "an", "object"]), 50109),
    ];
    for (body, code) in cases {
        let (status, error) = answer(post(&http, &mock, &path, "Bot t", body.clone()).await).await;
        assert_eq!(
            (status.as_u16(), &error["code"]),
            (400, &json!(code)),
            "{body}"
        );
    }
    // The limits are inclusive and count characters, not bytes.
    let ok = json!({"content": "é".repeat(2000), "nonce": "n".repeat(25)});
    assert_eq!(post(&http, &mock, &path, "Bot t", ok).await.status(), 200);
    // Rich content makes a message non-empty without text.
    let embed = json!({"embeds": [{"title": "t"}]});
    assert_eq!(
        post(&http, &mock, &path, "Bot t", embed).await.status(),
        200
    );

    let auth = qq_auth(&http, &mock).await;
    let cases = [
        ("/v2/groups/G/messages", json!({"msg_type": 0}), 50006),
        ("/v2/groups/G/messages", json!({"content": "x"}), 12002),
        (
            "/v2/users/U/messages",
            json!({"content": "", "msg_type": 0}),
            50006,
        ),
        (
            "/v2/users/U/messages",
            json!({"content": "x", "msg_type": 0, "msg_seq": "1"}),
            12002,
        ),
        ("/channels/C/messages", json!({"msg_id": "m"}), 50006),
    ];
    for (path, body, code) in cases {
        let (status, error) = answer(post(&http, &mock, path, &auth, body.clone()).await).await;
        assert_eq!(
            (status.as_u16(), &error["code"]),
            (400, &json!(code)),
            "{path} {body}"
        );
    }
    assert_eq!(mock.posts().len(), 2);
}

#[tokio::test]
async fn discord_enforced_nonce_returns_the_first_message_and_records_one_post() {
    let mock = MockPlatform::start(MockConfig {
        nonce_window: Duration::from_millis(300),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let http = client();
    let enforced = json!({"content": "once", "nonce": "k", "enforce_nonce": true});
    let (first_status, first) =
        answer(post(&http, &mock, &discord("1"), "Bot a", enforced.clone()).await).await;
    let (again_status, again) =
        answer(post(&http, &mock, &discord("1"), "Bot a", enforced.clone()).await).await;
    assert_eq!(
        (first_status, again_status),
        (StatusCode::OK, StatusCode::OK)
    );
    assert_eq!(first, again, "the earlier message, unchanged");
    assert_eq!(mock.posts().len(), 1);
    let attempts = mock.send_attempts();
    assert!(attempts[0].recorded && !attempts[1].recorded);
    assert_eq!(attempts[1].message_id, attempts[0].message_id);

    // Another author, or the same nonce without enforce_nonce, makes a new message.
    post(&http, &mock, &discord("1"), "Bot b", enforced.clone()).await;
    let loose = json!({"content": "once", "nonce": "k"});
    post(&http, &mock, &discord("1"), "Bot a", loose).await;
    assert_eq!(mock.posts().len(), 3);

    // Past the window the nonce is forgotten.
    tokio::time::sleep(Duration::from_millis(350)).await;
    let (_, later) = answer(post(&http, &mock, &discord("1"), "Bot a", enforced).await).await;
    assert_ne!(later["id"], first["id"]);
    assert_eq!(mock.posts().len(), 4);
}

#[tokio::test]
async fn qq_repeated_passive_reply_is_refused_as_a_duplicate() {
    let mock = platform().await;
    let http = client();
    let auth = qq_auth(&http, &mock).await;
    let group = "/v2/groups/G/messages";
    let reply = json!({"content": "a", "msg_type": 0, "msg_id": "M", "msg_seq": 2});
    assert_eq!(
        post(&http, &mock, group, &auth, reply.clone())
            .await
            .status(),
        200
    );
    let (status, error) = answer(post(&http, &mock, group, &auth, reply).await).await;
    assert_eq!(status, 400);
    assert_eq!(error["code"], 40054005);
    assert_eq!(error["message"], "消息被去重，请检查请求msgseq");

    // A missing msg_seq is 1, so two replies without one collide; the next seq does not.
    let c2c = "/v2/users/U/messages";
    let bare = json!({"content": "b", "msg_type": 0, "msg_id": "N"});
    assert_eq!(
        post(&http, &mock, c2c, &auth, bare.clone()).await.status(),
        200
    );
    assert_eq!(post(&http, &mock, c2c, &auth, bare).await.status(), 400);
    let seq1 = json!({"content": "b", "msg_type": 0, "msg_id": "N", "msg_seq": 1});
    assert_eq!(post(&http, &mock, c2c, &auth, seq1).await.status(), 400);
    let seq3 = json!({"content": "b", "msg_type": 0, "msg_id": "N", "msg_seq": 3});
    assert_eq!(post(&http, &mock, c2c, &auth, seq3).await.status(), 200);

    // Active messages (no msg_id) are never deduplicated.
    let active = json!({"content": "c", "msg_type": 0, "msg_seq": 1});
    assert_eq!(
        post(&http, &mock, group, &auth, active.clone())
            .await
            .status(),
        200
    );
    assert_eq!(post(&http, &mock, group, &auth, active).await.status(), 200);
    let posts = mock.posts();
    assert_eq!(posts.len(), 5);
    assert_eq!(posts[0].msg_seq, Some(2));
    assert_eq!(posts[1].msg_seq, None);
}

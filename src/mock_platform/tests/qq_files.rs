//! QQ's rich-media upload and media messages against a real HTTP client over loopback: the
//! upload takes `file_data` base64 and answers `{file_uuid, file_info, ttl}`; a media message
//! posts a `file_info` only to the kind of chat it was uploaded for, only with `content`, and
//! the passive-reply dedupe holds for it as for text.

use base64::Engine;

use super::*;
use crate::mock_platform::Target;

#[tokio::test]
async fn a_file_uploaded_for_a_chat_posts_there_once_as_a_media_message() {
    let mock = platform().await;
    let http = client();
    let auth = qq_auth(&http, &mock).await;
    let png = b"\x89PNG\r\n\x1a\n0123456789".to_vec();
    let data = base64::engine::general_purpose::STANDARD.encode(&png);
    let upload = json!({"file_type": 1, "file_data": data, "srv_send_msg": false});
    let (status, users) =
        answer(post(&http, &mock, "/v2/users/U1/files", &auth, upload.clone()).await).await;
    assert_eq!(status, 200, "{users}");
    assert!(
        users["file_uuid"].is_string() && users["ttl"].is_u64(),
        "{users}"
    );
    let (_, groups) = answer(post(&http, &mock, "/v2/groups/G1/files", &auth, upload).await).await;
    assert_eq!(mock.qq_uploads(), 2);
    assert!(mock.posts().is_empty(), "srv_send_msg false posts nothing");

    let media = |info: &Value, content: &str, seq: u64| {
        json!({"msg_type": 7, "media": {"file_info": info}, "content": content,
               "msg_id": "M1", "msg_seq": seq})
    };
    let to_user = |body| post(&http, &mock, "/v2/users/U1/messages", &auth, body);
    // The group's file_info, an unknown one, an empty content, no media.
    for (body, code) in [
        (media(&groups["file_info"], " ", 1), 304082),
        (media(&json!("nope"), " ", 1), 304082),
        (media(&users["file_info"], "", 1), 50006),
        (
            json!({"msg_type": 7, "content": " ", "msg_id": "M1"}),
            12002,
        ),
    ] {
        let (status, error) = answer(to_user(body.clone()).await).await;
        assert_eq!(
            (status.as_u16(), &error["code"]),
            (400, &json!(code)),
            "{body}"
        );
    }
    let (status, sent) = answer(to_user(media(&users["file_info"], " ", 1)).await).await;
    assert_eq!(status, 200, "{sent}");
    // The same msg_id + msg_seq again: refused as a duplicate, whatever it carries.
    let (status, dup) = answer(to_user(media(&users["file_info"], "again", 1)).await).await;
    assert_eq!((status.as_u16(), &dup["code"]), (400, &json!(40054005)));

    let posts = mock.posts();
    assert_eq!(posts.len(), 1);
    let p = &posts[0];
    assert_eq!(
        (p.target, p.content.as_str(), p.msg_seq),
        (Target::User, " ", Some(1))
    );
    assert_eq!(p.message_id, sent["id"].as_str().unwrap());
    assert_eq!(p.files.len(), 1);
    assert_eq!(
        (p.files[0].field.as_str(), p.files[0].bytes),
        ("image", png.len() as u64)
    );
}

#[tokio::test]
async fn an_upload_without_the_bytes_or_in_the_wrong_format_is_refused() {
    let mock = platform().await;
    let http = client();
    let auth = qq_auth(&http, &mock).await;
    let pdf = base64::engine::general_purpose::STANDARD.encode(b"%PDF-1.4 x");
    for body in [
        json!({"file_type": 1, "srv_send_msg": false}),
        json!({"file_type": 1, "url": "https://example.com/a.png", "srv_send_msg": false}),
        json!({"file_type": 1, "file_data": pdf, "srv_send_msg": false}),
    ] {
        let (status, error) =
            answer(post(&http, &mock, "/v2/users/U1/files", &auth, body.clone()).await).await;
        assert_eq!(status, 400, "{body}");
        assert!(
            error["code"].is_u64() && error["message"].is_string(),
            "{error}"
        );
    }
    let as_file = json!({"file_type": 4, "file_data": pdf, "srv_send_msg": false,
                         "file_name": "a.pdf"});
    let (status, _) = answer(post(&http, &mock, "/v2/users/U1/files", &auth, as_file).await).await;
    assert_eq!(status, 200, "a PDF goes as a file");
    let (status, error) =
        answer(post(&http, &mock, "/v2/users/U1/files", "QQBot nope", json!({})).await).await;
    assert_eq!((status.as_u16(), &error["code"]), (401, &json!(11244)));
    assert_eq!(mock.qq_uploads(), 1);
}

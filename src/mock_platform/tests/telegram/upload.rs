//! The upload methods (`sendPhoto`, `sendDocument`, ...) with reqwest's multipart forms: the
//! file recorded with its digest, the caption and the reply; the documented refusals; the
//! send faults and the file server, shared with `sendMessage`.

use reqwest::multipart::{Form, Part};
use sha2::{Digest, Sha256};

use super::*;
use crate::mock_platform::{Platform, SendFault};

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn file(field_bytes: &[u8], name: &str, mime: &str) -> Part {
    Part::bytes(field_bytes.to_vec())
        .file_name(name.to_owned())
        .mime_str(mime)
        .unwrap()
}

async fn upload(
    http: &reqwest::Client,
    mock: &MockPlatform,
    method: &str,
    form: Form,
) -> (u16, Value) {
    let request = http.post(method_url(mock, method)).multipart(form).send();
    let (status, body) = answer(within(method, request).await.unwrap()).await;
    envelope(status.as_u16(), &body);
    (status.as_u16(), body)
}

#[tokio::test]
async fn a_photo_is_answered_recorded_with_its_digest_and_served_back() {
    let mock = platform().await;
    let http = client();
    mock.telegram_emit_text(1001, "show me");
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let form = Form::new()
        .text("chat_id", "1001")
        .text("caption", "  the cat  ")
        .text("reply_parameters", r#"{"message_id":1}"#)
        .part("photo", file(&bytes, "cat.jpg", "image/jpeg"));
    let (status, body) = upload(&http, &mock, "sendPhoto", form).await;
    assert_eq!(status, 200, "{body}");
    let message = &body["result"];
    assert_eq!(message["caption"], "the cat");
    assert_eq!(message["reply_to_message"]["text"], "show me");
    let photo = &message["photo"][0];
    assert_eq!(photo["file_size"], bytes.len());
    let [post] = mock.posts().try_into().unwrap();
    assert_eq!(
        (post.platform, post.content.as_str()),
        (Platform::Telegram, "the cat")
    );
    assert_eq!(
        (post.target_id.as_str(), post.reply_to.as_deref()),
        ("1001", Some("1"))
    );
    assert_eq!(post.message_id, message["message_id"].to_string());
    let [posted] = post.files.try_into().unwrap();
    assert_eq!(
        (posted.field.as_str(), posted.bytes),
        ("photo", bytes.len() as u64)
    );
    assert_eq!(posted.filename.as_deref(), Some("cat.jpg"));
    assert_eq!(posted.content_type.as_deref(), Some("image/jpeg"));
    assert_eq!(posted.sha256, sha256(&bytes));
    // The uploaded file is the chat's like any other: getFile and the file server give it back.
    let (_, file) = call(
        &http,
        &mock,
        "getFile",
        json!({"file_id": photo["file_id"]}),
    )
    .await;
    let path = file["result"]["file_path"].as_str().unwrap().to_owned();
    assert!(
        path.starts_with("photos/") && path.ends_with(".jpg"),
        "{path}"
    );
    let url = format!(
        "{}/file/bot{}/{path}",
        mock.http_base(),
        TelegramConfig::default().token
    );
    let served = within("the file", http.get(url).send()).await.unwrap();
    assert_eq!(served.bytes().await.unwrap().as_ref(), bytes.as_slice());
}

#[tokio::test]
async fn a_document_carries_its_name_and_type_and_repeats_are_two_messages() {
    let mock = platform().await;
    let http = client();
    let bytes = b"%PDF-1.7 not really".to_vec();
    for _ in 0..2 {
        let form = Form::new()
            .text("chat_id", "1001")
            .part("document", file(&bytes, "report.pdf", "application/pdf"));
        let (status, body) = upload(&http, &mock, "senddocument", form).await;
        assert_eq!(status, 200, "{body}");
        let document = &body["result"]["document"];
        assert_eq!(document["file_name"], "report.pdf");
        assert_eq!(document["mime_type"], "application/pdf");
        assert!(body["result"].get("caption").is_none(), "{body}");
    }
    // Telegram has no dedupe key: the same upload twice is two messages.
    let posts = mock.posts();
    assert_eq!(posts.len(), 2);
    assert!(posts.iter().all(|p| p.content.is_empty()
        && p.files.len() == 1
        && p.files[0].field == "document"
        && p.files[0].sha256 == sha256(&bytes)));
    assert_ne!(posts[0].message_id, posts[1].message_id);
}

#[tokio::test]
async fn refusals_are_the_bot_apis_and_record_nothing() {
    let mock = platform().await;
    let http = client();
    let photo = || file(b"jpeg", "a.jpg", "image/jpeg");
    let long = Form::new()
        .text("chat_id", "1001")
        .text("caption", "é".repeat(1025))
        .part("photo", photo());
    let cases = [
        (long, "Bad Request: message caption is too long"),
        (
            Form::new().text("chat_id", "1001"),
            "Bad Request: there is no photo in the request",
        ),
        (
            Form::new()
                .text("chat_id", "1001")
                .text("photo", "AgACAgIAAxkBAAI-unknown"),
            "Bad Request: wrong file identifier/HTTP URL specified",
        ),
        (
            Form::new()
                .text("chat_id", "1001")
                .part("photo", file(b"", "a.jpg", "image/jpeg")),
            "Bad Request: file must be non-empty",
        ),
        (
            Form::new().text("chat_id", "5").part("photo", photo()),
            "Bad Request: chat not found",
        ),
    ];
    for (form, description) in cases {
        let (status, body) = upload(&http, &mock, "sendPhoto", form).await;
        assert_eq!((status, &body["description"]), (400, &json!(description)));
    }
    // Exactly 1024 characters is still a caption.
    let form = Form::new()
        .text("chat_id", "1001")
        .text("caption", "é".repeat(1024))
        .part("photo", photo());
    assert_eq!(upload(&http, &mock, "sendPhoto", form).await.0, 200);
    assert_eq!(mock.posts().len(), 1);
    // A body that is not the multipart form it declares.
    let request = http
        .post(method_url(&mock, "sendPhoto"))
        .header("Content-Type", "multipart/form-data; boundary=x")
        .body("--x\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n1001");
    let (status, body) = answer(within("a torn form", request.send()).await.unwrap()).await;
    assert_eq!(status, 400);
    let description = body["description"].as_str().unwrap();
    assert!(description.starts_with("Bad Request: "), "{body}");
}

#[tokio::test]
async fn size_limits_are_the_documented_ones() {
    let mock = platform().await;
    let http = client();
    let big = vec![7u8; 10_000_001];
    let form = Form::new()
        .text("chat_id", "1001")
        .part("photo", file(&big, "big.jpg", "image/jpeg"));
    let (status, _) = upload(&http, &mock, "sendPhoto", form).await;
    assert_eq!(status, 400);
    // The same bytes are a fine document (up to 50 MB).
    let form = Form::new().text("chat_id", "1001").part(
        "document",
        file(&big, "big.bin", "application/octet-stream"),
    );
    let (status, body) = upload(&http, &mock, "sendDocument", form).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(mock.posts()[0].files[0].bytes, 10_000_001);
    // A body over what an upload may be is refused from its head, unread.
    let path = format!("/bot{}/sendVideo", TelegramConfig::default().token);
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: mock\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: {}\r\n\r\n",
        65 * 1024 * 1024
    );
    let (status, body) = super::super::http(mock.addr(), head).await;
    assert_eq!(
        (status, &body["description"]),
        (413, &json!("Request Entity Too Large"))
    );
    envelope(status, &body);
}

#[tokio::test]
async fn send_faults_apply_to_uploads() {
    let mock = platform().await;
    let http = client();
    mock.set_send_fault(Platform::Telegram, SendFault::ServerError(1));
    let form = || {
        Form::new()
            .text("chat_id", "1001")
            .part("voice", file(b"OggS", "v.ogg", "audio/ogg"))
    };
    let (status, _) = upload(&http, &mock, "sendVoice", form()).await;
    assert_eq!(status, 500);
    let (status, body) = upload(&http, &mock, "sendVoice", form()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["voice"]["mime_type"], "audio/ogg");
    let attempts = mock.send_attempts();
    let statuses: Vec<_> = attempts.iter().map(|a| (a.status, a.recorded)).collect();
    assert_eq!(statuses, [(Some(500), false), (Some(200), true)]);
    assert_eq!(mock.posts().len(), 1);
}

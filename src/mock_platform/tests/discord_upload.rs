//! Discord's Create Message with files (`multipart/form-data`, `payload_json` and `files[n]`)
//! against reqwest's multipart forms: the files recorded with their digests and served from
//! the mock's CDN, the enforced nonce's dedupe, and the documented limits.

use reqwest::multipart::{Form, Part};
use sha2::{Digest, Sha256};

use super::*;

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn file(bytes: &[u8], name: &str, mime: &str) -> Part {
    Part::bytes(bytes.to_vec())
        .file_name(name.to_owned())
        .mime_str(mime)
        .unwrap()
}

async fn create(mock: &MockPlatform, channel: &str, auth: &str, form: Form) -> (u16, Value) {
    let url = format!("{}{}", mock.http_base(), discord(channel));
    let request = client()
        .post(url)
        .header("Authorization", auth)
        .multipart(form);
    let (status, body) = answer(within("a create message", request.send()).await.unwrap()).await;
    (status.as_u16(), body)
}

#[tokio::test]
async fn two_files_are_recorded_once_and_a_repeated_nonce_answers_the_first_message() {
    let mock = platform().await;
    let png: Vec<u8> = (0..40_000u32).map(|n| (n * 7) as u8).collect();
    let text = b"plain text file".to_vec();
    let payload = json!({
        "content": "two files",
        "nonce": "up-1",
        "enforce_nonce": true,
        "message_reference": {"message_id": "111"},
        "attachments": [
            {"id": 0, "filename": "chart.png", "description": "a chart"},
            {"id": 1, "filename": "notes.txt"},
        ],
    });
    let form = || {
        Form::new()
            .part(
                "payload_json",
                Part::text(payload.to_string())
                    .mime_str("application/json")
                    .unwrap(),
            )
            .part("files[0]", file(&png, "chart.png", "image/png"))
            .part("files[1]", file(&text, "notes.txt", "text/plain"))
    };
    let (status, first) = create(&mock, "42", "Bot t", form()).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        (&first["content"], &first["nonce"]),
        (&json!("two files"), &json!("up-1"))
    );
    let attachments = first["attachments"].as_array().unwrap();
    assert_eq!(attachments.len(), 2);
    assert_eq!(attachments[0]["filename"], "chart.png");
    assert_eq!(attachments[0]["description"], "a chart");
    assert_eq!(
        (&attachments[0]["size"], &attachments[1]["size"]),
        (&json!(png.len()), &json!(text.len()))
    );
    assert_eq!(attachments[1]["content_type"], "text/plain");
    // Each file is on the mock's CDN, byte for byte.
    for (attachment, bytes) in attachments.iter().zip([&png, &text]) {
        let url = attachment["url"].as_str().unwrap();
        assert!(
            url.starts_with(&format!("{}/attachments/42/", mock.http_base())),
            "{url}"
        );
        let served = within("the attachment", client().get(url).send())
            .await
            .unwrap();
        assert_eq!(served.bytes().await.unwrap().as_ref(), bytes.as_slice());
    }
    let [post] = mock.posts().try_into().unwrap();
    assert_eq!(
        (post.content.as_str(), post.reply_to.as_deref()),
        ("two files", Some("111"))
    );
    assert_eq!(post.message_id, first["id"].as_str().unwrap());
    let fields: Vec<_> = post
        .files
        .iter()
        .map(|f| (f.field.as_str(), f.sha256.clone(), f.bytes))
        .collect();
    assert_eq!(
        fields,
        [
            ("files[0]", sha256(&png), png.len() as u64),
            ("files[1]", sha256(&text), text.len() as u64)
        ]
    );
    assert_eq!(post.files[0].content_type.as_deref(), Some("image/png"));
    // A benchmark outside the process reads the same from `GET /_posts`.
    let url = format!("{}/_posts", mock.http_base());
    let response = within("the record", client().get(url).send())
        .await
        .unwrap();
    let record: Value = response.json().await.unwrap();
    let files = &record["posts"][0]["files"];
    assert_eq!(
        (&files[1]["field"], &files[1]["sha256"]),
        (&json!("files[1]"), &json!(sha256(&text)))
    );

    // The same upload again with the enforced nonce: the first message, nothing recorded.
    let (status, again) = create(&mock, "42", "Bot t", form()).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again, first, "the earlier message, unchanged");
    assert_eq!(mock.posts().len(), 1);
    let recorded: Vec<bool> = mock.send_attempts().iter().map(|a| a.recorded).collect();
    assert_eq!(recorded, [true, false]);
}

#[tokio::test]
async fn files_need_no_content_and_no_payload_json() {
    let mock = platform().await;
    let form = Form::new().part("files[0]", file(b"GIF89a", "a.gif", "image/gif"));
    let (status, message) = create(&mock, "7", "Bot t", form).await;
    assert_eq!(status, 200, "{message}");
    assert_eq!(message["content"], "");
    assert_eq!(message["attachments"][0]["filename"], "a.gif");
    // The JSON params as plain fields work too.
    let form = Form::new()
        .text("content", "hi")
        .part("files[0]", file(b"x", "x.bin", "application/octet-stream"));
    let (status, message) = create(&mock, "7", "Bot t", form).await;
    assert_eq!((status, &message["content"]), (200, &json!("hi")));
    assert_eq!(mock.posts().len(), 2);
}

#[tokio::test]
async fn refusals_are_discords_and_record_nothing() {
    let mock = platform().await;
    let eleven = (0..11).fold(Form::new(), |form, n| {
        form.part(format!("files[{n}]"), file(b"x", "x.txt", "text/plain"))
    });
    let (status, body) = create(&mock, "7", "Bot t", eleven).await;
    assert_eq!((status, &body["code"]), (400, &json!(30015)), "{body}");
    let big = vec![0u8; 10 * 1024 * 1024 + 1];
    let form = Form::new().part(
        "files[0]",
        file(&big, "big.bin", "application/octet-stream"),
    );
    let (status, body) = create(&mock, "7", "Bot t", form).await;
    assert_eq!((status, &body["code"]), (413, &json!(40005)), "{body}");
    let form = Form::new().text("payload_json", "{not json");
    let (status, body) = create(&mock, "7", "Bot t", form).await;
    assert_eq!((status, &body["code"]), (400, &json!(50109)), "{body}");
    let form = Form::new().part("files[0]", file(b"x", "x.txt", "text/plain"));
    let (status, _) = create(&mock, "7", "Bearer nope", form).await;
    assert_eq!(status, 401);
    // A form torn before its closing boundary: JSON error 0, a malformed body.
    let url = format!("{}{}", mock.http_base(), discord("7"));
    let torn = client()
        .post(url)
        .header("Authorization", "Bot t")
        .header("Content-Type", "multipart/form-data; boundary=x")
        .body("--x\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\nhi");
    let (status, body) = answer(within("a torn form", torn.send()).await.unwrap()).await;
    assert_eq!((status.as_u16(), &body["code"]), (400, &json!(0)), "{body}");
    // A request over Create Message's 25 MiB is refused from its head, unread.
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: mock\r\nAuthorization: Bot t\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: {}\r\n\r\n",
        discord("7"),
        25 * 1024 * 1024 + 1
    );
    let (status, body) = http(mock.addr(), head).await;
    assert_eq!((status, &body["code"]), (413, &json!(40005)), "{body}");
    assert!(mock.posts().is_empty());
}

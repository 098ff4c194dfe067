//! The upload endpoints as a client sees them over HTTP: Feishu's refusals of an empty or
//! too large file and of a bad form, and a message taken only with a key of the right kind.

use reqwest::multipart::{Form, Part};
use serde_json::{json, Value};

use crate::mock_platform::{FeishuConfig, MockConfig, MockPlatform};

struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    async fn new(mock: &MockPlatform) -> Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let base = mock.http_base();
        let config = FeishuConfig::default();
        let body = json!({"app_id": config.app_id, "app_secret": config.app_secret});
        let url = format!("{base}/open-apis/auth/v3/tenant_access_token/internal");
        let answer: Value = http
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let token = answer["tenant_access_token"].as_str().unwrap().to_owned();
        Client { http, base, token }
    }

    async fn upload(&self, path: &str, form: Form) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .multipart(form)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    async fn post(&self, msg_type: &str, content: Value) -> (u16, Value) {
        let body = json!({
            "receive_id": FeishuConfig::default().chat_id,
            "msg_type": msg_type,
            "content": content.to_string(),
        });
        let url = format!(
            "{}/open-apis/im/v1/messages?receive_id_type=chat_id",
            self.base
        );
        let r = self
            .http
            .post(url)
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }
}

fn image(bytes: Vec<u8>) -> Form {
    let part = Part::bytes(bytes).file_name("a.png");
    Form::new()
        .text("image_type", "message")
        .part("image", part)
}

fn file(file_type: &str, bytes: Vec<u8>) -> Form {
    let part = Part::bytes(bytes).file_name("x.bin");
    Form::new()
        .text("file_type", file_type.to_owned())
        .text("file_name", "report.pdf")
        .part("file", part)
}

fn code(answer: &(u16, Value)) -> (u16, i64) {
    (answer.0, answer.1["code"].as_i64().unwrap())
}

#[tokio::test]
async fn empty_too_large_and_malformed_uploads_are_refused_in_feishus_shape() {
    let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
    let c = Client::new(&mock).await;
    let images = super::IMAGES_PATH;
    assert_eq!(code(&c.upload(images, image(vec![])).await), (400, 234010));
    let big = vec![7u8; super::MAX_IMAGE + 1];
    assert_eq!(code(&c.upload(images, image(big)).await), (400, 234006));
    let no_type = Form::new().part("image", Part::bytes(vec![1]).file_name("a.png"));
    assert_eq!(code(&c.upload(images, no_type).await), (400, 234001));
    let files = super::FILES_PATH;
    assert_eq!(
        code(&c.upload(files, file("docx", vec![1])).await),
        (400, 234001)
    );
    let big = vec![7u8; super::MAX_FILE + 1];
    assert_eq!(
        code(&c.upload(files, file("stream", big)).await),
        (400, 234006)
    );
    assert_eq!(mock.feishu_stats().uploads, 0);
    assert!(mock.posts().is_empty());
}

#[tokio::test]
async fn a_message_is_taken_only_with_a_key_of_the_right_kind() {
    let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
    let c = Client::new(&mock).await;
    let (status, answer) = c
        .upload(super::FILES_PATH, file("pdf", b"%PDF".to_vec()))
        .await;
    assert_eq!(status, 200);
    let key = answer["data"]["file_key"].as_str().unwrap().to_owned();
    let unknown = c
        .post("image", json!({"image_key": "img_v3_nothing"}))
        .await;
    assert_eq!(code(&unknown), (400, 230001));
    // A pdf is no voice note.
    assert_eq!(
        code(&c.post("audio", json!({"file_key": key})).await),
        (400, 230001)
    );
    assert!(mock.posts().is_empty());
    let (status, _) = c.post("file", json!({"file_key": key})).await;
    assert_eq!(status, 200);
    let posts = mock.posts();
    let f = &posts[0].files[0];
    assert_eq!(
        (f.field.as_str(), f.filename.as_deref(), f.bytes),
        ("file", Some("report.pdf"), 4)
    );
}

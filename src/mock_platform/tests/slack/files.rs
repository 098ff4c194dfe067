//! The external upload flow against a real client (docs.slack.dev,
//! `files.getUploadURLExternal`, `files.completeUploadExternal`): a URL and a file id, the
//! bytes raw or as a form to the URL, then one post with every file, its comment and its
//! thread; a completed file cannot be completed again, a size that is not the one given is
//! refused, and a private completion posts nothing.

use sha2::{Digest, Sha256};

use super::*;

fn bot() -> String {
    SlackConfig::default().bot_token
}

fn channel() -> String {
    SlackConfig::default().channels[0].clone()
}

/// Step 1 as a form, as the method's older page lists only that content type.
async fn get_url(mock: &MockPlatform, name: &str, length: usize) -> Value {
    let url = format!("{}/api/files.getUploadURLExternal", mock.http_base());
    let form = format!("filename={}&length={length}", name.replace(' ', "+"));
    let request = client()
        .post(url)
        .bearer_auth(bot())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form);
    let answer = within("a URL", request.send()).await.unwrap();
    answer.json().await.unwrap()
}

async fn put(url: &str, request: reqwest::RequestBuilder) -> (u16, String) {
    let answer = within(url, request.send()).await.unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn two_files_uploaded_raw_and_as_a_form_are_shared_as_one_post_with_their_bytes() {
    let mock = slack_mock(SlackConfig::default()).await;
    let png = b"\x89PNG mock chart".to_vec();
    let pdf = b"%PDF-1.4 mock report".to_vec();
    let first = get_url(&mock, "chart one.png", png.len()).await;
    assert_eq!(first["ok"], true, "{first}");
    let (url1, id1) = (
        first["upload_url"].as_str().unwrap(),
        first["file_id"].as_str().unwrap(),
    );
    assert!(url1.starts_with(&mock.http_base()), "{url1}");
    let raw = client()
        .post(url1)
        .header("content-type", "image/png")
        .body(png.clone());
    assert_eq!(put(url1, raw).await, (200, format!("OK - {}", png.len())));
    let second = get_url(&mock, "report.pdf", pdf.len()).await;
    let (url2, id2) = (
        second["upload_url"].as_str().unwrap(),
        second["file_id"].as_str().unwrap(),
    );
    let part = reqwest::multipart::Part::bytes(pdf.clone())
        .file_name("report.pdf")
        .mime_str("application/pdf")
        .unwrap();
    let form = reqwest::multipart::Form::new().part("filename", part);
    assert_eq!(put(url2, client().post(url2).multipart(form)).await.0, 200);

    let files = json!([{"id": id1, "title": "chart one.png"}, {"id": id2}]);
    let body = json!({"files": files, "channel_id": channel(), "initial_comment": "two files",
                      "thread_ts": "1700000000.000100"});
    let (status, _, answer) =
        call(&mock, "files.completeUploadExternal", &bot(), body.clone()).await;
    assert_eq!((status, &answer["ok"]), (200, &json!(true)), "{answer}");
    assert_eq!(
        answer["files"][0],
        json!({"id": id1, "title": "chart one.png"})
    );
    let posts = mock.posts();
    assert_eq!(posts.len(), 1);
    let post = &posts[0];
    assert_eq!(
        (
            post.platform,
            post.target_id.as_str(),
            post.content.as_str()
        ),
        (Platform::Slack, channel().as_str(), "two files")
    );
    assert_eq!(post.reply_to.as_deref(), Some("1700000000.000100"));
    let got: Vec<(&str, Option<&str>, Option<&str>, &str)> = post
        .files
        .iter()
        .map(|f| {
            let name = f.filename.as_deref();
            (
                f.field.as_str(),
                name,
                f.content_type.as_deref(),
                f.sha256.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                id1,
                Some("chart one.png"),
                Some("image/png"),
                hex(&png).as_str()
            ),
            (
                id2,
                Some("report.pdf"),
                Some("application/pdf"),
                hex(&pdf).as_str()
            ),
        ]
    );
    // Completed once: the same files again are not found, and nothing more is posted.
    let (_, _, again) = call(&mock, "files.completeUploadExternal", &bot(), body).await;
    assert_eq!(again["error"], "file_not_found");
    assert_eq!(mock.posts().len(), 1);
    let echo = mock.slack_events();
    assert!(echo.iter().any(|e| e.own && e.text == "two files"));
    let stats = mock.slack_stats();
    assert_eq!(
        (stats.upload_urls, stats.uploads, stats.files_shared),
        (2, 2, 2)
    );
}

#[tokio::test]
async fn refusals_come_before_anything_is_posted_and_a_private_file_posts_nothing() {
    let mock = slack_mock(SlackConfig::default()).await;
    let zero = get_url(&mock, "empty.txt", 0).await;
    assert_eq!(zero["error"], "missing_argument");
    let url = format!("{}/api/files.getUploadURLExternal", mock.http_base());
    let anonymous = client().post(url).body("filename=a&length=1");
    let anonymous: Value = within("a URL", anonymous.send())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(anonymous["error"], "not_authed");

    let got = get_url(&mock, "a.txt", 3).await;
    let (upload_url, id) = (
        got["upload_url"].as_str().unwrap(),
        got["file_id"].as_str().unwrap(),
    );
    // Not the length given; and nothing to complete until the bytes arrive.
    assert_eq!(
        put(upload_url, client().post(upload_url).body("four"))
            .await
            .0,
        400
    );
    let files = json!([{"id": id}]);
    let early = json!({"files": files, "channel_id": channel()});
    let (_, _, early) = call(&mock, "files.completeUploadExternal", &bot(), early).await;
    assert_eq!(early["error"], "file_not_found");
    assert_eq!(
        put(upload_url, client().post(upload_url).body("abc"))
            .await
            .0,
        200
    );
    let elsewhere = json!({"files": files, "channel_id": "C0NOTHERE"});
    let (_, _, elsewhere) = call(&mock, "files.completeUploadExternal", &bot(), elsewhere).await;
    assert_eq!(elsewhere["error"], "channel_not_found");
    // A fault before processing leaves the file to complete later.
    mock.set_send_fault(Platform::Slack, SendFault::ServerError(1));
    let struck = json!({"files": files, "channel_id": channel()});
    let (_, _, struck) = call(&mock, "files.completeUploadExternal", &bot(), struck).await;
    assert_eq!(struck["error"], "internal_error");
    // Without a channel the file stays private: completed, and no post.
    let private = json!({"files": files});
    let (_, _, private) = call(&mock, "files.completeUploadExternal", &bot(), private).await;
    assert_eq!(private["ok"], true, "{private}");
    assert!(mock.posts().is_empty());
    let attempts = mock.send_attempts();
    assert_eq!(attempts.len(), 4, "every completion is an attempt");
    assert!(attempts.iter().all(|a| !a.recorded));
}

//! Files a user shares, against a real client (api.slack.com/types/file, "Authentication"
//! and "Slack Connect files"; `files.info`): the `file_share` event's file objects, their
//! bytes only to the bot token with `files:read` (Slack's HTML sign-in page with a 200 to
//! anyone else), and `files.info` for a Slack Connect file's stub.

use super::*;
use crate::mock_platform::SlackFile;

/// `GET url` with `token` (none for `None`): the status, `Content-Type`,
/// `Content-Disposition` and body.
async fn get(url: &str, token: Option<&str>) -> (u16, String, Option<String>, Vec<u8>) {
    let mut request = client().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer = within(url, request.send()).await.unwrap();
    let header = |name: &str| {
        answer
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (kind, disposition) = (
        header("content-type").unwrap_or_default(),
        header("content-disposition"),
    );
    let status = answer.status().as_u16();
    (
        status,
        kind,
        disposition,
        answer.bytes().await.unwrap().to_vec(),
    )
}

async fn files_info(mock: &MockPlatform, token: &str, id: &str) -> Value {
    let url = format!("{}/api/files.info?file={id}", mock.http_base());
    let answer = within("files.info", client().get(url).bearer_auth(token).send()).await;
    answer.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn a_shared_file_is_served_to_the_bot_token_and_a_sign_in_page_to_anyone_else() {
    let mock = slack_mock(fast()).await;
    let (mut ws, _) = slack_connect(&mock).await;
    let png = b"\x89PNG\r\n\x1a\nsome pixels".to_vec();
    let channel = SlackConfig::default().channels[0].clone();
    let file = SlackFile::new("a shot.png", "image/png", png.clone());
    mock.slack_emit_files(&channel, "look", vec![file]);
    let envelope = next_json(&mut ws).await;
    let event = &envelope["payload"]["event"];
    assert_eq!(
        (&event["subtype"], &event["text"]),
        (&json!("file_share"), &json!("look"))
    );
    let f = &event["files"][0];
    assert_eq!(
        (&f["name"], &f["mimetype"], &f["size"]),
        (&json!("a shot.png"), &json!("image/png"), &json!(png.len()))
    );
    let download = f["url_private_download"].as_str().unwrap();
    assert!(
        download.contains("/files-pri/T0MOCKTEAM-") && download.ends_with("/download/a%20shot.png"),
        "{download}"
    );

    let config = SlackConfig::default();
    let (status, kind, disposition, bytes) = get(download, Some(&config.bot_token)).await;
    assert_eq!(
        (status, kind.as_str(), bytes),
        (200, "image/png", png.clone())
    );
    assert_eq!(
        disposition.as_deref(),
        Some("attachment; filename=\"a shot.png\"")
    );
    let private = f["url_private"].as_str().unwrap();
    let (_, _, disposition, bytes) = get(private, Some(&config.bot_token)).await;
    assert_eq!((disposition, bytes), (None, png));
    for token in [
        None,
        Some(config.app_token.as_str()),
        Some("xoxb-not-this-one"),
    ] {
        let (status, kind, _, page) = get(download, token).await;
        assert_eq!(
            (status, kind.as_str()),
            (200, "text/html; charset=utf-8"),
            "{token:?}"
        );
        assert!(String::from_utf8(page).unwrap().contains("Sign in"));
    }
    // Without files:read the bot token gets the page too.
    mock.slack_set_files_read(false);
    let (_, kind, _, _) = get(download, Some(&config.bot_token)).await;
    assert!(kind.starts_with("text/html"), "{kind}");
    let stats = mock.slack_stats();
    assert_eq!(
        (stats.file_downloads, stats.sign_in_pages),
        (2, 4),
        "{stats:?}"
    );
}

#[tokio::test]
async fn a_slack_connect_file_comes_as_a_stub_and_files_info_gives_the_rest() {
    let mock = slack_mock(fast()).await;
    let (mut ws, _) = slack_connect(&mock).await;
    let channel = SlackConfig::default().channels[0].clone();
    let file = SlackFile::new("terms.pdf", "application/pdf", b"%PDF-1.4\n".to_vec()).connect();
    mock.slack_emit_files(&channel, "", vec![file]);
    let envelope = next_json(&mut ws).await;
    let stub = &envelope["payload"]["event"]["files"][0];
    assert_eq!(
        (&stub["mode"], &stub["file_access"]),
        (&json!("file_access"), &json!("check_file_info"))
    );
    assert!(stub["url_private"].is_null(), "{stub}");
    let id = stub["id"].as_str().unwrap();

    let bot = SlackConfig::default().bot_token;
    let info = files_info(&mock, &bot, id).await;
    assert_eq!(info["ok"], true, "{info}");
    assert_eq!(
        (&info["file"]["id"], &info["file"]["name"]),
        (&json!(id), &json!("terms.pdf"))
    );
    assert!(info["file"]["url_private_download"].is_string(), "{info}");
    assert_eq!(
        files_info(&mock, &bot, "F0NOTHERE").await["error"],
        "file_not_found"
    );
    assert_eq!(
        files_info(&mock, "xoxb-other", id).await["error"],
        "invalid_auth"
    );
    mock.slack_set_files_read(false);
    let refused = files_info(&mock, &bot, id).await;
    assert_eq!(
        (&refused["error"], &refused["needed"]),
        (&json!("missing_scope"), &json!("files:read"))
    );
}

//! Files against the mock Slack (`mock_platform/slack/files.rs`, written from Slack's docs):
//! every file uploaded, then shared in one post with the text and the thread; a refused or
//! rate-limited share starts again from the uploads and posts once; a lost answer to the
//! share is unknown, since Slack has no key to repeat it safely; an upload URL off Slack's
//! hosts is never followed.

use std::path::Path;


use super::*;
use crate::config::Secret;
use crate::gateway::send::Post;
use crate::mock_platform::{MockConfig, MockPlatform, Platform, SendFault, SlackConfig};

fn sender(mock: &MockPlatform) -> Sender {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let token = Secret::new(SlackConfig::default().bot_token);
    Sender::new(http, &mock.http_base(), token)
}

fn file(dir: &Path, name: &str, mime: &str, bytes: &[u8]) -> OutFile {
    OutFile::written(dir, name, mime, bytes)
}

fn hex(bytes: &[u8]) -> String {
    OutFile::sha256(bytes)
}

fn message(files: Vec<OutFile>) -> Outgoing<Target> {
    Outgoing {
        id: "01JSLACKFILES".into(),
        target: Target(SlackConfig::default().channels[0].clone()),
        text: "two files".into(),
        reply_to: Some("1700000000.000100".into()),
        seq: None,
        files,
    }
}

#[tokio::test]
async fn every_file_is_uploaded_then_shared_in_one_post_with_the_text_and_the_thread() {
    let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let png: Vec<u8> = (0..90_000u32).map(|i| (i % 253) as u8).collect();
    let pdf = b"%PDF-1.4 report".to_vec();
    let msg = message(vec![
        file(dir.path(), "chart one.png", "image/png", &png),
        file(dir.path(), "report.pdf", "application/pdf", &pdf),
    ]);
    let sl = sender(&mock);
    assert!(!sl.dedupes(&msg), "no key makes a repeat safe");
    let (answer, _) = sl.send(&msg).await;
    assert_eq!(answer, Answer::Sent { platform_id: None });
    let posts = mock.posts();
    assert_eq!(posts.len(), 1);
    let post = &posts[0];
    assert_eq!(
        (post.platform, post.content.as_str(), post.reply_to.as_deref()),
        (Platform::Slack, "two files", Some("1700000000.000100"))
    );
    let got: Vec<(Option<&str>, Option<&str>, &str)> = post
        .files
        .iter()
        .map(|f| {
            let name = f.filename.as_deref();
            (name, f.content_type.as_deref(), f.sha256.as_str())
        })
        .collect();
    assert_eq!(
        got,
        [
            (Some("chart one.png"), Some("image/png"), hex(&png).as_str()),
            (Some("report.pdf"), Some("application/pdf"), hex(&pdf).as_str())
        ]
    );
}

#[tokio::test]
async fn a_refused_share_starts_again_from_the_uploads_and_a_lost_one_is_unknown() {
    let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let msg = message(vec![file(dir.path(), "a.png", "image/png", b"\x89PNG a")]);
    let sl = sender(&mock);
    let limited = SendFault::RateLimited {
        posts: 1,
        retry_after: std::time::Duration::from_secs(2),
    };
    mock.set_send_fault(Platform::Slack, limited);
    let (answer, _) = sl.send(&msg).await;
    assert!(
        matches!(answer, Answer::Retry { after: Some(d), .. } if d.as_secs() == 2),
        "{answer:?}"
    );
    assert!(mock.posts().is_empty());
    assert!(matches!(sl.send(&msg).await.0, Answer::Sent { .. }));
    assert_eq!(mock.posts().len(), 1);
    let stats = mock.slack_stats();
    assert_eq!(
        (stats.uploads, stats.files_shared),
        (2, 1),
        "the retry uploaded again; Slack discards the upload never completed"
    );

    // Shared, and the answer lost: Slack has no key, so this is unknown.
    mock.set_send_fault(Platform::Slack, SendFault::ResetAfterProcessing(1));
    let (lost, _) = sl.send(&msg).await;
    assert!(matches!(lost, Answer::Unknown(_)), "{lost:?}");
    assert_eq!(mock.posts().len(), 2);
}

#[test]
fn upload_urls_are_followed_only_to_slacks_hosts_or_the_api_base() {
    let origins = upload_origins("http://127.0.0.1:9000");
    for ok in [
        "https://files.slack.com/upload/v1/abc",
        "http://127.0.0.1:9000/upload/v1/abc",
    ] {
        assert!(origins.allows(&Url::parse(ok).unwrap()), "{ok}");
    }
    for bad in [
        "http://files.slack.com/upload/v1/abc",
        "https://files.slack.com.evil.example/x",
        "http://127.0.0.1:9001/upload",
        "http://169.254.169.254/latest/meta-data",
        "https://user:pw@files.slack.com/x",
    ] {
        assert!(!origins.allows(&Url::parse(bad).unwrap()), "{bad}");
    }
}

#[test]
fn a_lost_answer_while_uploading_is_retried_and_forms_are_encoded() {
    let retried = nothing_posted(Answer::Unknown("timed out".into()));
    assert!(matches!(retried, Answer::Retry { after: None, .. }), "{retried:?}");
    let failed = Answer::Failed(local("no"));
    assert_eq!(nothing_posted(failed.clone()), failed);
    assert_eq!(
        form(&[("filename", "chart one&two.png"), ("length", "5")]),
        "filename=chart+one%26two.png&length=5"
    );
}

//! Files against the mock Feishu (`mock_platform/feishu/uploads.rs`, written from the open
//! platform's pages): the text, then each file uploaded and posted as its own message with
//! its bytes; a lost answer retried by this process uploads nothing twice; a new process (a
//! crash) uploads again, orphans, and posts no second message.

use std::path::Path;


use super::*;
use crate::config::Secret;
use crate::gateway::adapter::proxy::ProxyEnv;
use crate::gateway::adapter::Shared;
use crate::gateway::send::progress::Done;
use crate::gateway::send::Post;
use crate::mock_platform::{FeishuConfig, MockConfig, MockPlatform, Platform, SendFault};
use crate::platform::feishu::token::FeishuToken;

fn sender(mock: &MockPlatform) -> Sender {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shared = Shared::new(ProxyEnv::default()).unwrap();
    let config = FeishuConfig::default();
    let base = mock.http_base();
    let token = FeishuToken::new(&base, &config.app_id, Secret::new(config.app_secret));
    Sender::new(shared, &base, token)
}

fn file(dir: &Path, name: &str, mime: &str, bytes: &[u8]) -> OutFile {
    OutFile::written(dir, name, mime, bytes)
}

fn hex(bytes: &[u8]) -> String {
    OutFile::sha256(bytes)
}

fn message(text: &str, files: Vec<OutFile>) -> Outgoing<Target> {
    Outgoing {
        id: "01JFEISHUFILES".into(),
        target: Target::Chat(FeishuConfig::default().chat_id),
        text: text.into(),
        reply_to: None,
        seq: None,
        files,
    }
}

/// An Ogg page holding an Opus identification header (RFC 7845 §3), one segment.
fn opus() -> Vec<u8> {
    let mut page = b"OggS\0\x02".to_vec();
    page.extend([0u8; 20]);
    page.push(1);
    page.push(19);
    page.extend(b"OpusHead\x01\x01\x38\x01\x80\xbb\0\0\0\0\0");
    page
}

#[tokio::test]
async fn kinds_pick_the_upload_and_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let route = |name: &str, mime: &str, bytes: &[u8]| {
        let f = file(dir.path(), name, mime, bytes);
        async move { Route::of(&f, is_opus(&f.path).await) }
    };
    let file_of = |file_type, msg_type| Route::File { file_type, msg_type };
    assert_eq!(route("a.png", "image/png", b"\x89PNG").await, Route::Image);
    assert_eq!(route("r.pdf", "application/pdf", b"%PDF").await, file_of("pdf", "file"));
    assert_eq!(route("v.ogg", "audio/ogg", &opus()).await, file_of("opus", "audio"));
    let vorbis = b"OggS\0\x02\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x01\x1e\x01vorbis";
    assert_eq!(route("v.ogg", "audio/ogg", vorbis).await, file_of("stream", "file"));
    assert_eq!(route("s.mp3", "audio/mpeg", b"ID3").await, file_of("stream", "file"));
    assert_eq!(route("m.mp4", "video/mp4", b"\0\0\0\x20ftypisom").await, file_of("mp4", "file"));
    assert_eq!(route("z.zip", "application/zip", b"PK\x03\x04").await, file_of("stream", "file"));
    // A photo past the image endpoint's 10 MB goes as a file.
    let mut big = file(dir.path(), "b.png", "image/png", b"\x89PNG");
    big.bytes = MAX_IMAGE + 1;
    assert_eq!(Route::of(&big, false), file_of("stream", "file"));
    assert!(!is_opus(&dir.path().join("missing")).await);
    assert_eq!(file_key("m1", 2), "m1.file2");
}

#[tokio::test]
async fn the_text_then_each_file_as_its_own_message_with_its_bytes() {
    let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let png: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let pdf = b"%PDF-1.4 report".to_vec();
    let msg = message(
        "two files",
        vec![
            file(dir.path(), "chart.png", "image/png", &png),
            file(dir.path(), "report.pdf", "application/pdf", &pdf),
        ],
    );
    let (sent, _) = sender(&mock).send(&msg).await;
    let posts = mock.posts();
    assert_eq!(posts.len(), 3, "{posts:?}");
    assert!(posts.iter().all(|p| p.platform == Platform::Feishu));
    assert_eq!((posts[0].content.as_str(), posts[0].files.len()), ("two files", 0));
    let files: Vec<(&str, Option<&str>, &str)> = posts[1..]
        .iter()
        .map(|p| {
            let f = &p.files[0];
            (f.field.as_str(), f.filename.as_deref(), f.sha256.as_str())
        })
        .collect();
    assert_eq!(
        files,
        [
            ("image", Some("chart.png"), hex(&png).as_str()),
            ("file", Some("report.pdf"), hex(&pdf).as_str())
        ]
    );
    // Each piece under a uuid of its own.
    let nonces: Vec<_> = posts.iter().map(|p| p.nonce.clone().unwrap()).collect();
    assert_eq!(nonces[0], super::super::uuid(&msg.id));
    assert_eq!(nonces[2], super::super::uuid("01JFEISHUFILES.file1"));
    assert_eq!(
        sent,
        Answer::Sent {
            platform_id: Some(posts[0].message_id.clone())
        }
    );
    assert_eq!(mock.feishu_stats().uploads, 2);
}

#[tokio::test]
async fn a_lost_answer_is_retried_without_a_second_upload_and_a_crash_costs_an_orphan() {
    let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let msg = message(
        "",
        vec![
            file(dir.path(), "a.png", "image/png", b"\x89PNG one"),
            file(dir.path(), "b.pdf", "application/pdf", b"%PDF two"),
        ],
    );
    let fs = sender(&mock);
    // File 0's message is posted and its answer lost.
    mock.set_send_fault(Platform::Feishu, SendFault::ResetAfterProcessing(1));
    let (lost, _) = fs.send(&msg).await;
    assert!(matches!(lost, Answer::Unknown(_)), "{lost:?}");
    assert!(fs.dedupes(&msg), "the uuids make the retry safe");
    assert_eq!(fs.progress.get(&msg.id, 2).uploads.iter().flatten().count(), 1);
    let (sent, _) = fs.send(&msg).await;
    assert!(matches!(sent, Answer::Sent { platform_id: Some(_) }), "{sent:?}");
    assert_eq!(mock.feishu_stats().uploads, 2, "no second upload");
    assert_eq!(mock.posts().len(), 2, "one message per file");
    assert_eq!(fs.progress.get(&msg.id, 2), Done { uploads: vec![None, None], posted: 0, first: None });

    // A new process knows none of it: both files are uploaded again (orphans) and both
    // messages answered with the ones Feishu made.
    let (again, _) = sender(&mock).send(&msg).await;
    assert_eq!(again, sent);
    assert_eq!(mock.feishu_stats().uploads, 4);
    assert_eq!(mock.posts().len(), 2);
}

#[tokio::test]
async fn a_refused_upload_fails_with_feishus_words_and_posts_nothing() {
    let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let msg = message("", vec![file(dir.path(), "empty.pdf", "application/pdf", b"")]);
    let fs = sender(&mock);
    match fs.send(&msg).await.0 {
        Answer::Failed(reply) => assert_eq!(reply.code, Some(234010), "{reply}"),
        other => panic!("{other:?}"),
    }
    assert!(mock.posts().is_empty());
    assert_eq!(fs.progress.get(&msg.id, 1), Done { uploads: vec![None], posted: 0, first: None });
}

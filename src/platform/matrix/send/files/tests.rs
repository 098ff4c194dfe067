//! Files against the mock homeserver (`mock_platform/matrix`, written from the spec): each
//! file uploaded and posted as its own event with its bytes, the text the first one's
//! caption; a lost answer retried by this process uploads nothing twice; a new process (a
//! crash) uploads again, an orphan, and posts no second event.

use std::path::Path;


use super::*;
use crate::config::Secret;
use crate::gateway::send::progress::Done;
use crate::gateway::send::Post;
use crate::mock_platform::{MatrixConfig, MockConfig, MockPlatform, Platform, SendFault};
use crate::platform::matrix::api::Api;

const ROOM: &str = "!room1:mock.test";

fn sender(mock: &MockPlatform) -> Sender {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let token = Secret::new(MatrixConfig::default().access_token);
    Sender::new(Api::new(http, &mock.http_base(), &token))
}

fn file(dir: &Path, name: &str, mime: &str, bytes: &[u8]) -> OutFile {
    OutFile::written(dir, name, mime, bytes)
}

fn hex(bytes: &[u8]) -> String {
    OutFile::sha256(bytes)
}

fn message(files: Vec<OutFile>) -> Outgoing<Target> {
    Outgoing {
        id: "01JMATRIXFILES".into(),
        target: Target(ROOM.into()),
        text: "two files".into(),
        reply_to: Some("$asked:mock.test".into()),
        seq: None,
        files,
    }
}

#[test]
fn the_first_event_has_the_caption_and_the_reply_and_kinds_pick_the_msgtype() {
    let dir = tempfile::tempdir().unwrap();
    let png = file(dir.path(), "a.png", "image/png", b"png");
    let ogg = file(dir.path(), "v.ogg", "audio/ogg", b"ogg");
    let msg = message(vec![png.clone(), ogg.clone()]);
    let first = content(&msg, 0, &png, "mxc://hs/a");
    assert_eq!(
        (&first["msgtype"], &first["body"], &first["filename"]),
        (&json!("m.image"), &json!("two files"), &json!("a.png"))
    );
    assert_eq!(first["info"], json!({"mimetype": "image/png", "size": 3}));
    assert_eq!(first["m.relates_to"]["m.in_reply_to"]["event_id"], "$asked:mock.test");
    let second = content(&msg, 1, &ogg, "mxc://hs/v");
    assert_eq!((&second["msgtype"], &second["body"]), (&json!("m.audio"), &json!("v.ogg")));
    assert!(second.get("m.relates_to").is_none());
    assert_eq!(msgtype(FileKind::Video), "m.video");
    assert_eq!(msgtype(FileKind::Document), "m.file");
    assert_eq!(txn_id("m1", 1), "m1.file1");
}

#[tokio::test]
async fn each_file_is_one_upload_and_one_event_with_its_bytes() {
    let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let png: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let pdf = b"%PDF-1.4 report".to_vec();
    let msg = message(vec![
        file(dir.path(), "chart.png", "image/png", &png),
        file(dir.path(), "report.pdf", "application/pdf", &pdf),
    ]);
    let (first_try, _) = sender(&mock).send(&msg).await;
    let posts = mock.posts();
    assert!(matches!(first_try, Answer::Sent { .. }), "{first_try:?}");
    assert_eq!(posts.len(), 2);
    let sent: Vec<(&str, &str, &str)> = posts
        .iter()
        .map(|p| {
            let f = &p.files[0];
            (p.content.as_str(), f.field.as_str(), f.sha256.as_str())
        })
        .collect();
    assert_eq!(
        sent,
        [
            ("two files", "m.image", hex(&png).as_str()),
            ("", "m.file", hex(&pdf).as_str())
        ]
    );
    assert_eq!(posts[0].reply_to.as_deref(), Some("$asked:mock.test"));
    assert_eq!(
        first_try,
        Answer::Sent {
            platform_id: Some(posts[0].message_id.clone())
        }
    );
    assert_eq!(mock.matrix_stats().uploaded, 2);
}

#[tokio::test]
async fn a_lost_answer_is_retried_without_a_second_upload_or_event_and_a_crash_costs_an_orphan() {
    let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let msg = message(vec![
        file(dir.path(), "a.png", "image/png", b"\x89PNG one"),
        file(dir.path(), "b.pdf", "application/pdf", b"%PDF two"),
    ]);
    let mx = sender(&mock);
    // File 0's event is posted and its answer lost.
    mock.set_send_fault(Platform::Matrix, SendFault::ResetAfterProcessing(1));
    let (lost, _) = mx.send(&msg).await;
    assert!(matches!(lost, Answer::Unknown(_)), "{lost:?}");
    assert!(mx.dedupes(&msg), "the transaction ids make the retry safe");
    assert_eq!(mx.progress.get(&msg.id, 2).uploads.iter().flatten().count(), 1);
    let (sent, _) = mx.send(&msg).await;
    assert!(matches!(sent, Answer::Sent { platform_id: Some(_) }), "{sent:?}");
    let stats = mock.matrix_stats();
    assert_eq!((stats.uploaded, stats.txn_hits), (2, 1), "no second upload");
    assert_eq!(mock.posts().len(), 2, "one event per file");
    assert_eq!(mx.progress.get(&msg.id, 2), Done { uploads: vec![None, None], posted: 0, first: None });

    // A new process knows none of it: both files are uploaded again (orphans) and both
    // events answered with the ones the homeserver has.
    let (again, _) = sender(&mock).send(&msg).await;
    assert_eq!(again, sent);
    let stats = mock.matrix_stats();
    assert_eq!((stats.uploaded, stats.txn_hits), (4, 3));
    assert_eq!(mock.posts().len(), 2);
}

#[tokio::test]
async fn a_refused_upload_fails_with_the_homeservers_words() {
    let mock = MockPlatform::start(MockConfig {
        matrix: MatrixConfig {
            max_upload: 4,
            ..MatrixConfig::default()
        },
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let msg = message(vec![file(dir.path(), "big.bin", "application/zip", b"12345")]);
    let mx = sender(&mock);
    match mx.send(&msg).await.0 {
        Answer::Failed(reply) => assert!(reply.to_string().contains("M_TOO_LARGE"), "{reply}"),
        other => panic!("{other:?}"),
    }
    assert!(mock.posts().is_empty());
    assert_eq!(mx.progress.get(&msg.id, 1), Done { uploads: vec![None], posted: 0, first: None });
}

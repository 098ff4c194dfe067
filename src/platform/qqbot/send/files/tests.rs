use base64::Engine;

use super::*;
use crate::gateway::send::FileKind;

fn out_file(path: std::path::PathBuf, name: &str, mime: &str, bytes: u64) -> OutFile {
    OutFile {
        path,
        name: name.into(),
        mime: mime.into(),
        kind: FileKind::of(mime),
        bytes,
    }
}

fn bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 256) as u8).collect()
}

#[tokio::test]
async fn the_upload_body_is_json_of_the_length_it_says_with_the_bytes_in_base64() {
    let dir = tempfile::tempdir().unwrap();
    for (name, mime, len, file_type, named) in [
        ("chart.png", "image/png", 70_001, 1, false),
        ("report.pdf", "application/pdf", 2, 4, true),
        ("clip.mp4", "video/mp4", 3, 2, false),
        ("note.ogg", "audio/ogg", 0, 4, true),
        ("pic.webp", "image/webp", 9, 4, true),
    ] {
        let data = bytes(len);
        let path = dir.path().join(name);
        std::fs::write(&path, &data).unwrap();
        let file = out_file(path, name, mime, len as u64);
        let ft = FileType::of(&file);
        let (body, length) = upload_body(&file, ft).await.unwrap();
        let mut stream = Box::pin(body);
        let mut sent = Vec::new();
        while let Some(piece) = stream.next().await {
            sent.extend_from_slice(&piece.unwrap());
        }
        assert_eq!(sent.len() as u64, length, "{name}");
        let v: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(v["file_type"], file_type, "{name}");
        assert_eq!(v["srv_send_msg"], false);
        assert_eq!(v.get("url"), None);
        let want_name = named.then(|| json!(name));
        assert_eq!(v.get("file_name").cloned(), want_name, "{name}");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(v["file_data"].as_str().unwrap())
            .unwrap();
        assert_eq!(decoded, data, "{name}");
    }
}

#[tokio::test]
async fn a_copy_that_cannot_be_read_fails_the_message() {
    let file = out_file("/nonexistent/x.png".into(), "x.png", "image/png", 1);
    let Err(answer) = upload_body(&file, FileType::Image).await else {
        panic!("read a missing file")
    };
    assert!(matches!(answer, Answer::Failed(_)), "{answer:?}");
}

fn msg(files: usize, text: &str, reply_to: Option<&str>) -> Outgoing<Target> {
    let f = out_file("/x".into(), "x.png", "image/png", 1);
    Outgoing {
        id: "m1".into(),
        target: Target::User("U".into()),
        text: text.into(),
        reply_to: reply_to.map(Into::into),
        seq: Some(7),
        files: vec![f; files],
    }
}

#[test]
fn each_file_is_a_media_reply_under_its_own_msg_seq_the_first_with_the_caption() {
    let m = msg(3, "two files", Some("MSG"));
    assert_eq!(
        media_body(&m, 0, "INFO0"),
        json!({"msg_type": 7, "media": {"file_info": "INFO0"}, "content": "two files",
               "msg_id": "MSG", "msg_seq": 7})
    );
    assert_eq!(
        media_body(&m, 2, "INFO2"),
        json!({"msg_type": 7, "media": {"file_info": "INFO2"}, "content": " ",
               "msg_id": "MSG", "msg_seq": 9})
    );
    // No caption: a space, which QQ wants; no reply: no msg_id and no msg_seq.
    let active = msg(1, "", None);
    assert_eq!(
        media_body(&active, 0, "I"),
        json!({"msg_type": 7, "media": {"file_info": "I"}, "content": " "})
    );
}

#[test]
fn guild_targets_have_no_upload_and_a_ttl_of_zero_never_lapses() {
    assert_eq!(chat(&Target::User("U".into())), Some("users"));
    assert_eq!(chat(&Target::Group("G".into())), Some("groups"));
    assert_eq!(chat(&Target::Channel("C".into())), None);
    assert_eq!(chat(&Target::Dm("D".into())), None);
    assert_eq!(lapses(&json!(0)), None);
    assert_eq!(lapses(&Value::Null), None);
    let soon = Uploaded {
        file_info: "I".into(),
        lapses: lapses(&json!(10)),
    };
    assert!(!soon.fresh(), "within the margin: uploaded again");
    let later = Uploaded {
        file_info: "I".into(),
        lapses: lapses(&json!(3600)),
    };
    assert!(later.fresh());
}

/// A sender against the mock's QQ side (`mock_platform/qqbot`, written from the docs).
fn sender(mock: &crate::mock_platform::MockPlatform) -> Sender {
    use crate::gateway::adapter::proxy::ProxyEnv;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shared = crate::gateway::adapter::Shared::new(ProxyEnv::default()).unwrap();
    let base = mock.http_base();
    let token_url = format!("{base}/app/getAppAccessToken");
    let secret = crate::config::Secret::new("s".into());
    let token = std::sync::Arc::new(super::super::QqToken::new("1", &token_url, Some(secret)));
    Sender::new(shared, base, token)
}

fn reply_with(dir: &std::path::Path, target: Target) -> Outgoing<Target> {
    let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &bytes(5000)].concat();
    let pdf = b"%PDF-1.4 report".to_vec();
    let mut files = vec![];
    for (name, mime, data) in [("a.png", "image/png", png), ("b.pdf", "application/pdf", pdf)] {
        let path = dir.join(name);
        std::fs::write(&path, &data).unwrap();
        files.push(out_file(path, name, mime, data.len() as u64));
    }
    Outgoing {
        id: "m1".into(),
        target,
        text: "two files".into(),
        reply_to: Some("MSG1".into()),
        seq: Some(7),
        files,
    }
}

/// A post whose answer is lost is retried by this process without uploading again, its
/// repeat dropped by QQ (40054005); a new process (a crash) uploads both files again,
/// orphans, and posts nothing twice.
#[tokio::test]
async fn a_lost_answer_is_retried_without_a_second_upload_and_a_crash_costs_orphans() {
    use crate::gateway::send::Post;
    use crate::mock_platform::{MockConfig, MockPlatform, Platform, SendFault};
    let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let msg = reply_with(dir.path(), Target::Group("G1".into()));
    let qq = sender(&mock);
    assert!(qq.dedupes(&msg), "a reply's msg_seq makes the retry safe");
    mock.set_send_fault(Platform::Qq, SendFault::ResetAfterProcessing(1));
    let (lost, _) = qq.send(&msg).await;
    assert!(matches!(lost, Answer::Unknown(_)), "{lost:?}");
    assert_eq!(mock.qq_uploads(), 1);
    let (sent, _) = qq.send(&msg).await;
    // The first file's post was the lost one: confirmed by 40054005, which names no id.
    assert_eq!(sent, Answer::Sent { platform_id: None });
    assert_eq!(mock.qq_uploads(), 2, "no second upload of the first file");
    let posts = mock.posts();
    let seqs: Vec<Option<u64>> = posts.iter().map(|p| p.msg_seq).collect();
    assert_eq!(seqs, [Some(7), Some(8)], "one post per file");
    assert_eq!(posts[1].files[0].filename.as_deref(), Some("b.pdf"));

    let (again, _) = sender(&mock).send(&msg).await;
    assert_eq!(again, Answer::Sent { platform_id: None });
    assert_eq!(mock.qq_uploads(), 4, "uploaded again: two orphan file_infos");
    assert_eq!(mock.posts().len(), 2);
}

#[tokio::test]
async fn a_guild_channel_s_files_fail_and_a_refused_upload_keeps_nothing() {
    use crate::gateway::send::Post;
    use crate::mock_platform::{MockConfig, MockPlatform};
    let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let qq = sender(&mock);
    let channel = reply_with(dir.path(), Target::Channel("C1".into()));
    assert!(!Sender::takes_files(&channel.target));
    assert!(matches!(qq.send(&channel).await.0, Answer::Failed(_)));
    // A PNG that is not one: the mock refuses the upload as not in the image format.
    let mut msg = reply_with(dir.path(), Target::User("U1".into()));
    std::fs::write(&msg.files[0].path, b"not a png").unwrap();
    msg.files[0].bytes = 9;
    match qq.send(&msg).await.0 {
        Answer::Failed(reply) => assert_eq!(reply.code, Some(12002), "{reply}"),
        other => panic!("{other:?}"),
    }
    assert!(mock.posts().is_empty());
    assert!(qq.progress.is_empty(), "forgotten");
}

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

/// The pieces joined, however the file was read, are the encoding of the whole.
#[tokio::test]
async fn base64_pieces_join_to_the_encoding_of_the_whole() {
    let engine = base64::engine::general_purpose::STANDARD;
    for (len, sizes) in [
        (0, vec![]),
        (1, vec![1]),
        (5, vec![1, 1, 1, 1, 1]),
        (10, vec![4, 2, 4]),
        (100_000, vec![65_536, 34_464]),
        (7, vec![3, 0, 4]),
    ] {
        let data = bytes(len);
        let mut at = 0;
        let chunks: Vec<io::Result<Bytes>> = sizes
            .iter()
            .map(|n| {
                let c = Bytes::copy_from_slice(&data[at..at + n]);
                at += n;
                Ok(c)
            })
            .collect();
        let pieces: Vec<io::Result<Bytes>> =
            base64_pieces(futures_util::stream::iter(chunks)).collect().await;
        let joined: Vec<u8> = pieces
            .into_iter()
            .flat_map(|p| p.unwrap().to_vec())
            .collect();
        assert_eq!(joined, engine.encode(&data).into_bytes(), "{len} {sizes:?}");
    }
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

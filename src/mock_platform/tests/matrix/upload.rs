//! The content repository's upload side and file events, as the spec has them
//! (`content-repo.yaml`, `m.room.message$m.file.yaml`, "Media captions"): an upload answers
//! an `mxc://` URI that the download endpoint serves back, every upload is new content, a
//! body over the limit is 413 `M_TOO_LARGE`, and an `m.image` or `m.file` event naming the
//! content is recorded with its bytes and its caption.

use sha2::{Digest, Sha256};

use super::*;

async fn upload(mock: &MockPlatform, name: &str, kind: &str, bytes: &[u8]) -> Answered {
    let url = format!(
        "{}/_matrix/media/v3/upload?filename={}",
        mock.http_base(),
        encode(name)
    );
    let request = client()
        .post(url)
        .bearer_auth(TOKEN)
        .header("content-type", kind)
        .body(bytes.to_vec());
    call("an upload", request).await
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn an_upload_is_served_back_and_a_file_event_records_it_with_its_caption() {
    let mock = matrix_mock(MatrixConfig::default()).await;
    let png = b"\x89PNG\r\n\x1a\nmock image".to_vec();
    let uploaded = upload(&mock, "chart one.png", "image/png", &png).await;
    assert_eq!(uploaded.status, 200, "{}", uploaded.text);
    let uri = uploaded.json()["content_uri"].as_str().unwrap().to_owned();
    let (server, id) = uri.strip_prefix("mxc://").unwrap().split_once('/').unwrap();
    assert_eq!(server, "mock.test");
    let download = format!(
        "{}/_matrix/client/v1/media/download/{server}/{id}",
        mock.http_base()
    );
    let served = client()
        .get(download)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(served.bytes().await.unwrap().as_ref(), png.as_slice());
    // The same bytes again are new content, under a new URI.
    let again = upload(&mock, "chart one.png", "image/png", &png).await;
    assert_ne!(again.json()["content_uri"], uri.as_str());

    let image = json!({"msgtype": "m.image", "body": "the chart", "filename": "chart one.png",
                       "url": uri, "info": {"mimetype": "image/png", "size": png.len()}});
    assert_eq!(send(&mock, &send_path(ROOM, "f1"), image).await.status, 200);
    // Without a caption `body` is the file's name.
    let file = json!({"msgtype": "m.file", "body": "chart one.png", "url": uri});
    assert_eq!(send(&mock, &send_path(ROOM, "f2"), file).await.status, 200);
    let posts = mock.posts();
    assert_eq!(posts.len(), 2);
    assert_eq!(posts[0].content, "the chart");
    assert_eq!(posts[1].content, "");
    for (post, field) in posts.iter().zip(["m.image", "m.file"]) {
        let f = &post.files[..];
        assert_eq!(f.len(), 1, "{post:?}");
        assert_eq!(f[0].field, field);
        assert_eq!(f[0].filename.as_deref(), Some("chart one.png"));
        assert_eq!(f[0].content_type.as_deref(), Some("image/png"));
        assert_eq!(
            (f[0].bytes, f[0].sha256.as_str()),
            (png.len() as u64, hex(&png).as_str())
        );
    }
    let stats = mock.matrix_stats();
    assert_eq!((stats.uploads, stats.uploaded), (2, 2));
}

#[tokio::test]
async fn uploads_need_the_token_and_stay_under_the_advertised_size() {
    let mock = matrix_mock(MatrixConfig {
        max_upload: 10,
        ..MatrixConfig::default()
    })
    .await;
    let config = format!("{}/_matrix/client/v1/media/config", mock.http_base());
    let config = call("the config", client().get(config).bearer_auth(TOKEN)).await;
    assert_eq!(config.json()["m.upload.size"], 10);
    let big = upload(&mock, "big.bin", "application/octet-stream", &[7; 11]).await;
    assert_eq!(big.error(), (413, "M_TOO_LARGE".into()));
    let url = format!("{}/_matrix/media/v3/upload", mock.http_base());
    let anonymous = call("an upload", client().post(url).body(vec![1u8])).await;
    assert_eq!(anonymous.error(), (401, "M_MISSING_TOKEN".into()));
    // A file event whose content the repository does not hold is posted, with no file.
    let elsewhere = json!({"msgtype": "m.file", "body": "x.bin", "url": "mxc://other.example/abc"});
    assert_eq!(
        send(&mock, &send_path(ROOM, "f3"), elsewhere).await.status,
        200
    );
    assert!(mock.posts()[0].files.is_empty());
    let stats = mock.matrix_stats();
    assert_eq!((stats.uploads, stats.uploaded), (2, 0));
}

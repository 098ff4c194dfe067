//! A download into the store against a raw HTTP server on loopback that misbehaves on request:
//! a body longer than announced, one past the cap, one that stalls, a redirect off the origin.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use reqwest::header::HeaderMap;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::download::{self, DownloadError, Limits, Origins};
use super::store::{Store, StoreError};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0\x90wS\xde";

/// Serve each request by its path: `/png`, `/liar` (announces 10 bytes, sends 1,000), `/big`
/// (1 MiB, unannounced), `/stall` (headers, then nothing), `/away` (a redirect to `other`).
async fn serve(listener: TcpListener, other: u16) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            let n = socket.read(&mut buf).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]).to_string();
            let path = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let head = |len: &str| format!("HTTP/1.1 200 OK\r\n{len}connection: close\r\n\r\n");
            let _ = match path.as_str() {
                "/png" => {
                    let h = head(&format!("content-length: {}\r\n", PNG.len()));
                    let _ = socket.write_all(h.as_bytes()).await;
                    socket.write_all(PNG).await
                }
                "/liar" => {
                    let _ = socket
                        .write_all(head("content-length: 10\r\n").as_bytes())
                        .await;
                    socket.write_all(&[b'a'; 1000]).await
                }
                "/big" => {
                    let _ = socket.write_all(head("").as_bytes()).await;
                    socket.write_all(&vec![b'b'; 1 << 20]).await
                }
                "/stall" => {
                    let _ = socket
                        .write_all(head("content-length: 100\r\n").as_bytes())
                        .await;
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    Ok(())
                }
                "/away" => {
                    let to = format!(
                        "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{other}/png\r\ncontent-length: 0\r\n\r\n"
                    );
                    socket.write_all(to.as_bytes()).await
                }
                "/here" => {
                    let to = "HTTP/1.1 301 Moved\r\nlocation: /png\r\ncontent-length: 0\r\n\r\n";
                    socket.write_all(to.as_bytes()).await
                }
                _ => {
                    socket
                        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                        .await
                }
            };
        });
    }
}

#[tokio::test]
async fn a_file_is_stored_whole_and_only_from_its_origin_within_its_limits() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let other = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_port = other.local_addr().unwrap().port();
    tokio::spawn(serve(listener, other_port));
    tokio::spawn(serve(other, other_port));

    let dir = crate::gateway::spool::tests::temp_dir("media-store");
    let store = Store::open(&dir.join("media")).unwrap();
    let http = download::client().unwrap();
    let origins = Origins::of([format!("http://127.0.0.1:{port}").as_str()]);
    let limits = Limits {
        max_bytes: 64 * 1024,
        timeout: Duration::from_secs(2),
    };
    let base = format!("http://127.0.0.1:{port}");
    let get = |path: &str| {
        let url = format!("{base}{path}");
        let (http, origins) = (http.clone(), origins.clone());
        async move { download::get(&http, &url, HeaderMap::new(), &origins, limits).await }
    };

    // A photo: the same bytes, typed by them, named KIND_ID_NAME, 0640.
    let stored = store
        .put("photo", "AgAC1", None, get("/png").await.unwrap())
        .await
        .unwrap();
    assert_eq!(stored.name, "photo_AgAC1_file.png");
    assert_eq!(stored.mime, "image/png");
    let on_disk = std::fs::read(&stored.path).unwrap();
    assert_eq!(on_disk, PNG);
    assert_eq!(
        stored.sha256,
        Sha256::digest(PNG)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let mode = std::fs::metadata(&stored.path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode & !0o640, 0, "{mode:o}");
    // A redirect within the origin is followed.
    assert!(get("/here").await.is_ok());

    // What must not be stored, and leaves nothing behind.
    let put = |path: &'static str| {
        let store = &store;
        let get = &get;
        async move {
            store
                .put(
                    "document",
                    path.trim_start_matches('/'),
                    Some("x.txt"),
                    get(path).await?,
                )
                .await
        }
    };
    let err = |r: Result<_, StoreError>| match r {
        Err(StoreError::Download(e)) => e,
        other => panic!("{:?}", other.map(|s: super::store::Stored| s.name)),
    };
    assert!(matches!(
        err(put("/big").await),
        DownloadError::TooLarge { .. }
    ));
    assert!(matches!(
        err(put("/stall").await),
        DownloadError::Timeout(_)
    ));
    assert!(matches!(
        err(put("/away").await),
        DownloadError::Origin { .. }
    ));
    assert!(matches!(
        err(put("/missing").await),
        DownloadError::Status(404)
    ));
    // A server that sends more than it announced is cut off at what it announced.
    let liar = put("/liar").await.unwrap();
    assert_eq!(std::fs::read(&liar.path).unwrap(), [b'a'; 10]);
    std::fs::remove_file(&liar.path).unwrap();
    let left: Vec<String> = std::fs::read_dir(store.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        left,
        ["photo_AgAC1_file.png"],
        "no half file, no temporary file"
    );

    // The quota removes the oldest files first, never one a message waits on.
    for i in 0..5 {
        store
            .put("photo", &format!("p{i}"), None, get("/png").await.unwrap())
            .await
            .unwrap();
    }
    let each = PNG.len() as u64;
    let held = store
        .evict(3 * each, |name| name == "photo_AgAC1_file.png")
        .unwrap();
    assert!(held <= 3 * each, "{held}");
    assert!(store.path().join("photo_AgAC1_file.png").exists(), "kept");
    assert!(
        store.path().join("photo_p4_file.png").exists(),
        "the newest stays"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The pieces joined, however the file was read, are the encoding of the whole.
#[tokio::test]
async fn base64_pieces_join_to_the_encoding_of_the_whole() {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    for (len, sizes) in [
        (0, vec![]),
        (1, vec![1]),
        (5, vec![1, 1, 1, 1, 1]),
        (10, vec![4, 2, 4]),
        (100_000, vec![65_536, 34_464]),
        (7, vec![3, 0, 4]),
    ] {
        let data: Vec<u8> = (0..len).map(|i| (i * 31 % 256) as u8).collect();
        let mut at = 0;
        let chunks: Vec<std::io::Result<axum::body::Bytes>> = sizes
            .iter()
            .map(|n| {
                let c = axum::body::Bytes::copy_from_slice(&data[at..at + n]);
                at += n;
                Ok(c)
            })
            .collect();
        let pieces: Vec<std::io::Result<axum::body::Bytes>> = futures_util::StreamExt::collect(
            super::base64_pieces(futures_util::stream::iter(chunks)),
        )
        .await;
        let joined: Vec<u8> = pieces
            .into_iter()
            .flat_map(|p| p.unwrap().to_vec())
            .collect();
        assert_eq!(joined, engine.encode(&data).into_bytes(), "{len} {sizes:?}");
    }
}

/// The store lists its directory only when it may be over its quota: it counts what it puts,
/// with every `Store` of the same directory (the API opens one per request), and an evict
/// that removes anything brings it down to 9/10 of the quota, so the next listing is a tenth
/// of the quota away.
#[tokio::test]
async fn the_quota_is_kept_from_a_count_shared_by_every_store_of_the_directory() {
    use super::download::InMemory;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("media");
    let (a, b) = (Store::open(&path).unwrap(), Store::open(&path).unwrap());
    let each = 1000u64;
    async fn put(store: &Store, i: usize) {
        let body = InMemory(Some(vec![i as u8; 1000].into()));
        let id = format!("d{i}");
        store.put("document", &id, None, body).await.unwrap();
    }
    for i in 0..5 {
        put(&a, i).await;
    }
    assert_eq!(a.evict(100 * each, |_| false).unwrap(), 5 * each);
    // A file the store did not put is not seen until the count says the store may be full.
    std::fs::write(path.join("stray"), vec![0u8; each as usize]).unwrap();
    assert_eq!(
        a.evict(6 * each, |_| false).unwrap(),
        5 * each,
        "no listing"
    );
    // The other store's put is counted: now over 5.5 files' worth, so the directory is
    // listed (the stray file too) and the oldest go until at most 9/10 of it is held.
    put(&b, 5).await;
    let held = a.evict(5 * each + each / 2, |_| false).unwrap();
    let left = std::fs::read_dir(&path).unwrap().count() as u64;
    assert_eq!(held, left * each);
    assert!(held <= (5 * each + each / 2) / 10 * 9, "{held}");
    let newest = std::fs::read_dir(&path)
        .unwrap()
        .any(|e| e.unwrap().file_name().to_string_lossy().contains("d5"));
    assert!(newest, "the newest stays");
}

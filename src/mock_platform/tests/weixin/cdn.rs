//! The CDN: an upload is taken only with the announced length, key and MD5, its download
//! parameter comes back in `x-encrypted-param`, and a send's media item names it with the key
//! as base64 of its hex.

use md5::{Digest, Md5};

use super::*;
use crate::mock_platform::weixin::cdn::{encrypt, hex_of};

/// `getuploadurl` for `plain` under `key`; the `upload_param`.
async fn announce(
    http: &reqwest::Client,
    mock: &MockPlatform,
    plain: &[u8],
    key: &[u8; 16],
) -> String {
    let body = json!({
        "filekey": "fk1", "media_type": 1, "to_user_id": MOCK_PEER,
        "rawsize": plain.len(), "rawfilemd5": hex_of(&Md5::digest(plain)),
        "filesize": (plain.len() / 16 + 1) * 16, "no_need_thumb": true, "aeskey": hex_of(key),
    });
    let (status, answer) = call(http, mock, "getuploadurl", &default_token(), body).await;
    assert_eq!(
        (status.as_u16(), &answer["ret"]),
        (200, &json!(0)),
        "{answer}"
    );
    answer["upload_param"].as_str().unwrap().to_owned()
}

async fn upload(
    http: &reqwest::Client,
    mock: &MockPlatform,
    param: &str,
    body: Vec<u8>,
) -> reqwest::Response {
    let url = format!(
        "{}/c2c/upload?encrypted_query_param={}&filekey=fk1",
        mock.http_base(),
        escape(param)
    );
    let request = http
        .post(url)
        .header("Content-Type", "application/octet-stream")
        .body(body)
        .send();
    within("the CDN's answer", request).await.unwrap()
}

fn escape(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn an_upload_must_match_its_announcement_and_a_send_names_it_by_the_hex_key() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let key = [7u8; 16];
    let plain = b"sixteen bytes!!!".to_vec();
    let param = announce(&http, &mock, &plain, &key).await;

    // The wrong key, then a body one block short: refused, and said in x-error-message.
    for body in [
        encrypt(&[8u8; 16], &plain),
        encrypt(&key, &plain)[..16].to_vec(),
    ] {
        let refused = upload(&http, &mock, &param, body).await;
        assert_eq!(refused.status().as_u16(), 400);
        assert!(refused.headers().contains_key("x-error-message"));
    }
    let cipher = encrypt(&key, &plain);
    assert_eq!(cipher.len(), 32, "a whole block of padding");
    let taken = upload(&http, &mock, &param, cipher.clone()).await;
    assert_eq!(taken.status().as_u16(), 200);
    let eqp = taken.headers()["x-encrypted-param"]
        .to_str()
        .unwrap()
        .to_owned();
    let stats = mock.weixin_stats();
    assert_eq!((stats.uploads, stats.upload_refusals), (1, 2), "{stats:?}");

    let download = format!("{}/c2c/download", mock.http_base());
    let download = format!("{download}?encrypted_query_param={}", escape(&eqp));
    let served = http.get(download).send();
    let served = within("the download", served).await.unwrap();
    assert_eq!(served.bytes().await.unwrap().to_vec(), cipher);

    let image = |aes_key: String| {
        json!({"msg": {"to_user_id": MOCK_PEER, "client_id": aes_key.clone(), "message_type": 2,
            "message_state": 2, "item_list": [{"type": 2, "image_item": {"mid_size": 32,
            "media": {"encrypt_query_param": eqp, "aes_key": aes_key, "encrypt_type": 1}}}]}})
    };
    // Base64 of the raw key is a grey box on the phones: refused.
    let raw = image(codec::base64_encode(&key));
    assert_eq!(
        call(&http, &mock, "sendmessage", &default_token(), raw)
            .await
            .1["ret"],
        -1
    );
    let hex = image(codec::base64_encode(hex_of(&key).as_bytes()));
    assert_eq!(
        call(&http, &mock, "sendmessage", &default_token(), hex)
            .await
            .1["ret"],
        0
    );
    let posts = mock.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].files[0].field, "image_item");
    assert_eq!(posts[0].files[0].bytes, 16);
}

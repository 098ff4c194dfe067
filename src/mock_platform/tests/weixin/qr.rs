//! The QR login: the code, the scripted statuses, redirect, expiry and the credentials a
//! confirmed login hands out.

use super::*;
use crate::mock_platform::weixin::QrStep;

/// GETs as hermes-agent sends them: no bot token, no UIN.
async fn get(http: &reqwest::Client, base: &str, path: &str) -> Value {
    let request = http
        .get(format!("{base}/ilink/bot/{path}"))
        .header("iLink-App-Id", "bot")
        .header("iLink-App-ClientVersion", "131584")
        .send();
    let (status, body) = answer(within("a QR answer", request).await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn fetch_code(http: &reqwest::Client, mock: &MockPlatform) -> String {
    let code = get(http, &mock.http_base(), "get_bot_qrcode?bot_type=3").await;
    assert_eq!(code["ret"], 0);
    let qrcode = code["qrcode"].as_str().unwrap().to_owned();
    assert!(qrcode.chars().all(|c| c.is_ascii_hexdigit()) && !qrcode.is_empty());
    let img = code["qrcode_img_content"].as_str().unwrap();
    assert!(img.starts_with("https://liteapp.weixin.qq.com/"), "{img}");
    qrcode
}

async fn status(http: &reqwest::Client, base: &str, qrcode: &str) -> Value {
    get(http, base, &format!("get_qrcode_status?qrcode={qrcode}")).await
}

#[tokio::test]
async fn the_default_script_waits_is_scanned_and_confirms_with_a_working_token() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let base = mock.http_base();
    let qrcode = fetch_code(&http, &mock).await;
    assert_eq!(status(&http, &base, &qrcode).await["status"], "wait");
    assert_eq!(status(&http, &base, &qrcode).await["status"], "scaned");
    let confirmed = status(&http, &base, &qrcode).await;
    assert_eq!(confirmed["status"], "confirmed");
    let config = WeixinConfig::default();
    assert_eq!(confirmed["ilink_bot_id"], config.bot_id.as_str());
    assert_eq!(confirmed["ilink_user_id"], config.user_id.as_str());
    assert_eq!(confirmed["baseurl"], base.as_str());
    let token = confirmed["bot_token"].as_str().unwrap().to_owned();
    assert_ne!(token, default_token());
    // The last step repeats, with the same credentials.
    assert_eq!(status(&http, &base, &qrcode).await, confirmed);
    mock.weixin_expire_session();
    assert_eq!(poll(&http, &mock, &default_token(), "").await["ret"], -14);
    mock.weixin_set_qr_script(vec![QrStep::Confirmed]);
    let next = fetch_code(&http, &mock).await;
    let renewed = status(&http, &base, &next).await["bot_token"]
        .as_str()
        .unwrap()
        .to_owned();
    mock.weixin_emit(1);
    assert_eq!(
        poll(&http, &mock, &renewed, "").await["msgs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let stats = mock.weixin_stats();
    assert_eq!(
        (stats.qr_fetches, stats.qr_status_polls, stats.tokens_issued),
        (2, 5, 2)
    );
}

#[tokio::test]
async fn the_script_redirects_expires_and_continues_on_a_fresh_code() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let base = mock.http_base();
    mock.weixin_set_qr_script(vec![
        QrStep::Wait,
        QrStep::Redirect,
        QrStep::Expired,
        QrStep::Scanned,
        QrStep::Confirmed,
    ]);
    let first = fetch_code(&http, &mock).await;
    assert_eq!(status(&http, &base, &first).await["status"], "wait");
    let redirect = status(&http, &base, &first).await;
    assert_eq!(redirect["status"], "scaned_but_redirect");
    let host = redirect["redirect_host"].as_str().unwrap();
    assert_eq!(host, mock.addr().to_string());
    let redirected = format!("http://{host}");
    assert_eq!(
        status(&http, &redirected, &first).await["status"],
        "expired"
    );
    // A dead code stays dead without using up the script; so does a code never given.
    assert_eq!(
        status(&http, &redirected, &first).await["status"],
        "expired"
    );
    assert_eq!(status(&http, &base, "0123abcd").await["status"], "expired");
    let second = fetch_code(&http, &mock).await;
    assert_ne!(second, first);
    assert_eq!(status(&http, &base, &second).await["status"], "scaned");
    let confirmed = status(&http, &base, &second).await;
    assert_eq!(confirmed["status"], "confirmed");
    let token = confirmed["bot_token"].as_str().unwrap();
    assert_eq!(poll(&http, &mock, token, "").await["ret"], 0);
}

#[tokio::test]
async fn the_code_can_be_fetched_with_post_as_the_newer_plugin_does() {
    let mock = wx_mock(fast()).await;
    let http = client();
    let url = format!("{}/ilink/bot/get_bot_qrcode?bot_type=3", mock.http_base());
    let request = http.post(url).json(&json!({"local_token_list": []})).send();
    let (status, body) = answer(within("a QR code", request).await.unwrap()).await;
    assert_eq!(status, 200);
    assert!(body["qrcode"].as_str().is_some_and(|q| !q.is_empty()));
}

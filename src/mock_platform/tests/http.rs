//! The HTTP endpoints a client discovers the gateway through: the token endpoint and
//! gateway discovery.

use super::*;

#[tokio::test]
async fn token_endpoint_checks_the_secret() {
    let mock = MockPlatform::start(MockConfig {
        expected_secret: Some("s3cret".into()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let path = "/app/getAppAccessToken";
    let (status, body) = http(
        mock.addr(),
        post_json(path, &json!({"appId": "1", "clientSecret": "s3cret"})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"access_token": "mock-access-1", "expires_in": "7200"})
    );

    // QQ answers a wrong secret with HTTP 200 and the error in the body.
    let (status, body) = http(
        mock.addr(),
        post_json(path, &json!({"appId": "1", "clientSecret": "nope"})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"code": 100016, "message": "invalid appid or secret"})
    );
    assert_eq!(mock.stats().http_requests, 2);
}

#[tokio::test]
async fn gateway_endpoints_advertise_the_ws_url() {
    let mock = platform().await;
    assert_eq!(mock.http_base(), format!("http://{}", mock.addr()));
    let path = "/app/getAppAccessToken";
    let (_, token) = http(
        mock.addr(),
        post_json(path, &json!({"appId": "1", "clientSecret": "s"})),
    )
    .await;
    let auth = format!("QQBot {}", token["access_token"].as_str().unwrap());
    let (status, body) = http(mock.addr(), get("/gateway", &auth)).await;
    assert_eq!((status, body), (200, json!({"url": mock.ws_url()})));
    // A token the platform no longer honours is refused.
    mock.expire_access_tokens();
    let (status, _) = http(mock.addr(), get("/gateway/bot", &auth)).await;
    assert_eq!(status, 401);

    mock.set_advertised_ws_url("ws://127.0.0.1:1/ws".into());
    let (status, body) = http(mock.addr(), get("/gateway/bot", "Bot t")).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({
            "url": "ws://127.0.0.1:1/ws",
            "shards": 1,
            "session_start_limit": {"total": 1000, "remaining": 1000, "reset_after": 86_400_000, "max_concurrency": 1},
        })
    );

    let (status, _) = http(mock.addr(), get("/nope", "Bot t")).await;
    assert_eq!(status, 404);
}

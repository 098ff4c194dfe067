//! The mock homeserver's faults against a real client: rate limits on sends and syncs, hung
//! syncs, a half body, refused tokens, an unreadable `since`, a repeated batch.

use super::*;

#[tokio::test]
async fn a_rate_limit_carries_both_retry_hints_on_sends_and_syncs() {
    let mock = matrix_mock(MatrixConfig::default()).await;
    let limit = SendFault::RateLimited {
        posts: 1,
        retry_after: Duration::from_millis(1500),
    };
    mock.set_send_fault(Platform::Matrix, limit);
    let limited = send(
        &mock,
        &send_path(ROOM, "t1"),
        json!({"msgtype": "m.text", "body": "x"}),
    )
    .await;
    assert_eq!(limited.error(), (429, "M_LIMIT_EXCEEDED".into()));
    assert_eq!(limited.json()["retry_after_ms"], 1500);
    assert_eq!(limited.header("retry-after"), Some("2"));
    let attempt = &mock.send_attempts()[0];
    assert_eq!(
        (attempt.status, attempt.retry_after),
        (Some(429), Some(Duration::from_millis(1500)))
    );
    assert!(mock.posts().is_empty());

    mock.matrix_set_fault_for(
        MatrixFault::RateLimited {
            retry_after_ms: Some(1500),
            header_secs: Some(2),
        },
        1,
    );
    let both = sync_call(&mock, &[]).await;
    assert_eq!(both.error(), (429, "M_LIMIT_EXCEEDED".into()));
    assert_eq!(
        (
            both.json()["retry_after_ms"].as_u64(),
            both.header("retry-after")
        ),
        (Some(1500), Some("2"))
    );
    mock.matrix_set_fault_for(
        MatrixFault::RateLimited {
            retry_after_ms: None,
            header_secs: Some(3),
        },
        1,
    );
    let header_only = sync_call(&mock, &[]).await;
    assert_eq!(header_only.status, 429);
    assert!(header_only.json().get("retry_after_ms").is_none());
    assert_eq!(header_only.header("retry-after"), Some("3"));
    assert_eq!(sync_call(&mock, &[]).await.status, 200);
    assert_eq!(mock.matrix_stats().refused, 2);
}

#[tokio::test]
async fn hung_syncs_are_never_answered() {
    let mock = matrix_mock(MatrixConfig::default()).await;
    mock.matrix_set_fault(MatrixFault::HangSyncs);
    let request = client()
        .get(v3(&mock, "sync"))
        .bearer_auth(TOKEN)
        .timeout(QUIET);
    let error = within("a hung sync to time out", request.send())
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error}");
    mock.matrix_clear_fault();
    sync(&mock, &[]).await;
    let stats = mock.matrix_stats();
    assert_eq!((stats.syncs, stats.hung, stats.syncs_answered), (2, 1, 1));
}

#[tokio::test]
async fn a_half_body_sends_the_headers_and_stalls_inside_the_json() {
    let mock = matrix_mock(MatrixConfig::default()).await;
    mock.matrix_emit(3);
    mock.matrix_set_fault(MatrixFault::HalfBody);
    let mut stream = TcpStream::connect(mock.addr()).await.unwrap();
    let request = format!("GET /_matrix/client/v3/sync HTTP/1.1\r\nHost: mock\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    // Read until the mock falls silent; it never closes.
    while let Ok(read) = timeout(QUIET, stream.read(&mut buf)).await {
        let n = read.unwrap();
        assert!(n > 0, "the mock closed the connection");
        raw.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole head");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("Content-Length: "))
        .and_then(|n| n.parse().ok())
        .expect("content-length");
    assert!(
        !body.is_empty() && body.len() < length,
        "{} of {length}",
        body.len()
    );
    assert!(serde_json::from_str::<Value>(body).is_err());
    assert_eq!(mock.matrix_stats().refused, 1);
}

#[tokio::test]
async fn an_unknown_token_fault_and_a_revoked_token_are_refused() {
    let mock = matrix_mock(MatrixConfig::default()).await;
    mock.matrix_set_fault_for(MatrixFault::UnknownToken { soft_logout: true }, 1);
    let soft = sync_call(&mock, &[]).await;
    assert_eq!(
        (soft.error(), &soft.json()["soft_logout"]),
        ((401, "M_UNKNOWN_TOKEN".into()), &json!(true))
    );
    assert_eq!(sync_call(&mock, &[]).await.status, 200);

    mock.matrix_revoke_token();
    for answered in [
        get(&mock, "account/whoami").await,
        sync_call(&mock, &[]).await,
        send(&mock, &send_path(ROOM, "t"), json!({"body": "x"})).await,
        get(&mock, "joined_rooms").await,
    ] {
        assert_eq!(answered.error(), (401, "M_UNKNOWN_TOKEN".into()));
        assert_eq!(answered.json()["soft_logout"], false);
    }
    assert!(mock.posts().is_empty());
    mock.matrix_restore_token();
    assert_eq!(get(&mock, "account/whoami").await.status, 200);
    assert_eq!(mock.matrix_stats().refused, 2);
}

#[tokio::test]
async fn an_unreadable_since_is_refused_and_counted_faults_clear_themselves() {
    let mock = matrix_mock(MatrixConfig::default()).await;
    let garbage = sync_call(&mock, &[("since", "garbage")]).await;
    assert_eq!(garbage.error(), (400, "M_UNKNOWN".into()));
    assert_eq!(garbage.json()["error"], "Invalid stream token");

    mock.matrix_set_fault_for(MatrixFault::InvalidSince, 1);
    // A sync without `since` is not what the fault acts on, nor does it use it up.
    let since = initial(&mock).await;
    let refused = sync_call(&mock, &[("since", &since)]).await;
    assert_eq!(refused.error(), (400, "M_UNKNOWN".into()));
    assert_eq!(sync_call(&mock, &[("since", &since)]).await.status, 200);

    mock.matrix_set_fault_for(
        MatrixFault::ServerError {
            status: 502,
            html: true,
        },
        2,
    );
    for _ in 0..2 {
        let page = sync_call(&mock, &[]).await;
        assert_eq!(
            (page.status, page.header("content-type")),
            (502, Some("text/html"))
        );
        assert!(page.text.contains("502 Bad Gateway"), "{}", page.text);
    }
    mock.matrix_set_fault_for(
        MatrixFault::ServerError {
            status: 503,
            html: false,
        },
        1,
    );
    let empty = sync_call(&mock, &[]).await;
    assert_eq!(
        (
            empty.status,
            empty.text.as_str(),
            empty.header("content-type")
        ),
        (503, "", None)
    );
    assert_eq!(sync_call(&mock, &[]).await.status, 200);
    assert_eq!(mock.matrix_stats().refused, 5);
}

#[tokio::test]
async fn a_repeated_batch_is_the_last_one_again_once() {
    let mock = matrix_mock(MatrixConfig::default()).await;
    mock.matrix_emit(2);
    let first = sync(&mock, &[]).await;
    let since = first["next_batch"].as_str().unwrap().to_owned();
    mock.matrix_set_fault(MatrixFault::RepeatBatch);
    assert_eq!(sync(&mock, &[("since", &since)]).await, first);
    let after = sync(&mock, &[("since", &since)]).await;
    assert_eq!(
        (&after["next_batch"], after.get("rooms")),
        (&json!(since), None)
    );
}

//! Each Feishu long-connection fault against a real client over loopback: what the client
//! sees, and what the platform goes on doing.

use super::feishu::*;
use super::*;
use crate::mock_platform::{ClientConfig, FeishuConfig, FeishuFault, Refusal};
use crate::platform::feishu::pbbp2::{header, Frame};

#[tokio::test]
async fn half_open_goes_quiet_both_ways_and_the_event_comes_back_on_a_new_connection() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, service) = feishu_connect(&mock).await;
    mock.set_feishu_fault(FeishuFault::HalfOpen);
    send_frame(&mut ws, &Frame::ping(service)).await;
    let event_id = mock.feishu_emit(1).remove(0);
    assert_eq!(
        mock.feishu_events()[0].deliveries,
        1,
        "pushed into the void"
    );
    // No pong, no push, and no close either: the socket just stays open.
    assert_quiet(&mut ws).await;
    assert_eq!(mock.feishu_stats().live_connections, 1);

    // A fresh connection is healthy and gets the event once its ack has timed out.
    let (mut fresh, service) = feishu_connect(&mock).await;
    ping(&mut fresh, service).await;
    let (frame, payload) = next_event(&mut fresh).await;
    assert_eq!(payload["header"]["event_id"], event_id.as_str());
    ack(&mut fresh, &frame, 200).await;
    wait_until("the ack", || mock.feishu_unacked().is_empty()).await;
    // The quiet one is released when the client closes it.
    drop(ws);
    wait_until("the close", || mock.feishu_stats().live_connections == 1).await;
}

#[tokio::test]
async fn no_pong_ignores_pings_but_keeps_pushing_events() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, service) = feishu_connect(&mock).await;
    mock.set_feishu_fault(FeishuFault::NoPong);
    send_frame(&mut ws, &Frame::ping(service)).await;
    mock.feishu_emit(1);
    let (frame, _) = next_event(&mut ws).await;
    ack(&mut ws, &frame, 200).await;
    assert_quiet(&mut ws).await;
    let stats = mock.feishu_stats();
    assert_eq!((stats.pings, stats.pongs), (1, 0));
    mock.clear_feishu_faults();
    ping(&mut ws, service).await;
}

#[tokio::test]
async fn the_split_fault_splits_every_push_and_can_send_the_last_part_first() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, _) = feishu_connect(&mock).await;
    mock.set_feishu_fault(FeishuFault::Split {
        parts: 2,
        reversed: true,
    });
    let event_id = mock.feishu_emit(1).remove(0);
    let first = next_frame(&mut ws).await;
    assert_eq!(
        (first.header(header::SUM), first.header(header::SEQ)),
        (Some("2"), Some("1"))
    );
    let second = next_frame(&mut ws).await;
    assert_eq!(second.header(header::SEQ), Some("0"));
    let whole: Vec<u8> = [second.payload_bytes(), first.payload_bytes()].concat();
    let payload: Value = serde_json::from_slice(&whole).unwrap();
    assert_eq!(payload["header"]["event_id"], event_id.as_str());
    ack(&mut ws, &second, 200).await;
    mock.clear_feishu_faults();
    mock.feishu_emit(1);
    let (whole, _) = next_event(&mut ws).await;
    assert_eq!(whole.header(header::SUM), Some("1"));
}

#[tokio::test]
async fn duplicate_acked_pushes_an_acked_event_once_more() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, _) = feishu_connect(&mock).await;
    mock.set_feishu_fault(FeishuFault::DuplicateAcked(1));
    let ids = mock.feishu_emit(2);
    let (first, _) = next_event(&mut ws).await;
    let (second, _) = next_event(&mut ws).await;
    ack(&mut ws, &first, 200).await;
    let (duplicate, payload) = next_event(&mut ws).await;
    assert_eq!(payload["header"]["event_id"], ids[0].as_str());
    ack(&mut ws, &second, 200).await;
    ack(&mut ws, &duplicate, 200).await;
    wait_until("three acks", || mock.feishu_acks().len() == 3).await;
    // Used up: the second event's ack brought no duplicate.
    assert_quiet(&mut ws).await;
    let events = mock.feishu_events();
    assert_eq!(
        events.iter().map(|e| e.deliveries).collect::<Vec<_>>(),
        [2, 1]
    );
    assert!(mock.feishu_unacked().is_empty());
    assert_eq!(mock.feishu_acks()[2].delivery, 2);
}

#[tokio::test]
async fn refused_connects_at_the_endpoint_then_through() {
    let mock = feishu_mock(fast()).await;
    mock.set_feishu_fault(FeishuFault::RefuseConnects {
        n: 2,
        refusal: Refusal::busy(),
    });
    let config = FeishuConfig::default();
    for _ in 0..2 {
        let answer = discover_as(&mock, &config.app_id, &config.app_secret).await;
        assert_eq!(
            (answer["code"].as_i64(), answer["msg"].as_str()),
            (Some(1), Some("system busy"))
        );
    }
    feishu_connect(&mock).await;
    mock.set_feishu_fault(FeishuFault::RefuseConnects {
        n: 1,
        refusal: Refusal::EndpointHttp(503),
    });
    let url = format!("{}/callback/ws/endpoint", mock.http_base());
    let status = client()
        .post(url)
        .json(&json!({"AppID": config.app_id, "AppSecret": config.app_secret}))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 503);
    assert_eq!(mock.feishu_stats().refused, 3);
}

#[tokio::test]
async fn refused_upgrades_carry_the_handshake_headers() {
    let mock = feishu_mock(fast()).await;
    for (refusal, status, auth_code) in [
        (Refusal::conn_limit(), "514", Some("1000040350")),
        (Refusal::forbidden(), "403", None),
    ] {
        mock.set_feishu_fault(FeishuFault::RefuseConnects { n: 1, refusal });
        let url = discover(&mock).await;
        let refused = refused_upgrade(&url).await;
        let headers = refused.headers();
        assert_eq!(headers["Handshake-Status"], status);
        assert!(headers.contains_key("Handshake-Msg"));
        assert_eq!(
            headers
                .get("Handshake-Autherrcode")
                .map(|v| v.to_str().unwrap()),
            auth_code
        );
    }
    // Discovery was not refused; the next connect goes through.
    feishu_connect(&mock).await;
    assert_eq!(mock.feishu_stats().connections, 1);
}

#[tokio::test]
async fn the_connection_limit_refuses_discovery_beyond_it() {
    let mock = feishu_mock(FeishuConfig {
        max_connections: 1,
        ..fast()
    })
    .await;
    let (ws, _) = feishu_connect(&mock).await;
    let config = FeishuConfig::default();
    let answer = discover_as(&mock, &config.app_id, &config.app_secret).await;
    assert_eq!(answer["code"], 1_000_040_350, "{answer}");
    drop(ws);
    wait_until("the close", || mock.feishu_stats().live_connections == 0).await;
    feishu_connect(&mock).await;
}

#[tokio::test]
async fn a_new_client_config_rides_the_next_pong_and_later_discoveries() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, service) = feishu_connect(&mock).await;
    let changed = ClientConfig {
        reconnect_count: -1,
        reconnect_interval: 5,
        reconnect_nonce: 2,
        ping_interval: 7,
    };
    mock.set_feishu_fault(FeishuFault::ClientConfig(changed));
    let pong = ping(&mut ws, service).await;
    let carried: ClientConfig = serde_json::from_slice(pong.payload_bytes()).unwrap();
    assert_eq!(carried, changed);
    let config = FeishuConfig::default();
    let answer = discover_as(&mock, &config.app_id, &config.app_secret).await;
    assert_eq!(answer["data"]["ClientConfig"]["PingInterval"], 7);
}

#[tokio::test]
async fn close_all_closes_current_connections_with_a_close_frame() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, _) = feishu_connect(&mock).await;
    mock.set_feishu_fault(FeishuFault::CloseAll);
    assert_eq!(close_code(&mut ws).await, 1000);
    wait_until("the close", || mock.feishu_stats().live_connections == 0).await;
    feishu_connect(&mock).await;
}

//! The Feishu long connection against a real client over loopback: reqwest for discovery,
//! tokio-tungstenite for the WebSocket, pbbp2 frames built and read with [`crate::platform::feishu::pbbp2`]. The
//! client helpers here are shared with the fault and send tests.

use prost::Message as _;
use tokio_tungstenite::tungstenite::http::Response;

use super::*;
use crate::mock_platform::{FeishuConfig, FeishuMessage};
use crate::platform::feishu::pbbp2::{header, message_type, Frame, FrameKind};

/// Short enough for a test to watch a redelivery, long enough for a loaded box to ack first.
pub(super) const ACK_TIMEOUT: Duration = Duration::from_millis(400);

pub(super) async fn feishu_mock(feishu: FeishuConfig) -> MockPlatform {
    MockPlatform::start(MockConfig {
        feishu,
        ..MockConfig::default()
    })
    .await
    .unwrap()
}

pub(super) fn fast() -> FeishuConfig {
    FeishuConfig {
        ack_timeout: ACK_TIMEOUT,
        ..FeishuConfig::default()
    }
}

/// `POST /callback/ws/endpoint` with these credentials; the answer's JSON.
pub(super) async fn discover_as(mock: &MockPlatform, app_id: &str, secret: &str) -> Value {
    let url = format!("{}/callback/ws/endpoint", mock.http_base());
    let body = json!({"AppID": app_id, "AppSecret": secret});
    let response = within("discovery", client().post(url).json(&body).send())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// A connect URL from discovery with the mock's own credentials.
pub(super) async fn discover(mock: &MockPlatform) -> String {
    let config = FeishuConfig::default();
    let answer = discover_as(mock, &config.app_id, &config.app_secret).await;
    assert_eq!(answer["code"], 0, "{answer}");
    answer["data"]["URL"].as_str().unwrap().to_owned()
}

fn service_of(url: &str) -> i32 {
    let query = url.split_once('?').unwrap().1;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("service_id="))
        .unwrap()
        .parse()
        .unwrap()
}

/// Discovers and connects; returns the socket and the URL's service id.
pub(super) async fn feishu_connect(mock: &MockPlatform) -> (Client, i32) {
    let url = discover(mock).await;
    (connect(&url).await, service_of(&url))
}

/// The refused upgrade's HTTP response.
pub(super) async fn refused_upgrade(url: &str) -> Response<Option<Vec<u8>>> {
    match within("a refused upgrade", connect_async(url)).await {
        Err(tungstenite::Error::Http(response)) => *response,
        other => panic!("expected a refused upgrade, got {:?}", other.map(|_| ())),
    }
}

/// The next binary frame, skipping WebSocket pings and pongs.
pub(super) async fn next_frame(ws: &mut Client) -> Frame {
    within("a binary frame", async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Binary(bytes))) => return Frame::decode(bytes.as_ref()).unwrap(),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("expected a binary frame, got {other:?}"),
            }
        }
    })
    .await
}

pub(super) async fn send_frame(ws: &mut Client, frame: &Frame) {
    ws.send(Message::binary(frame.encode_to_vec()))
        .await
        .unwrap();
}

/// A ping as the SDKs send it; returns the pong.
pub(super) async fn ping(ws: &mut Client, service: i32) -> Frame {
    send_frame(ws, &Frame::ping(service)).await;
    let pong = next_frame(ws).await;
    assert_eq!(pong.kind(), Some(FrameKind::Control));
    assert_eq!(pong.message_type(), Some(message_type::PONG));
    pong
}

/// The ack as the SDKs send it: the frame as received, plus `biz_rt`, payload replaced.
pub(super) async fn ack(ws: &mut Client, frame: &Frame, code: i64) {
    let mut reply = frame.clone();
    reply.set_header(header::BIZ_RT, "3");
    reply.payload = Some(json!({"code": code}).to_string().into_bytes());
    send_frame(ws, &reply).await;
}

/// Reads one whole event (all its parts); returns the last part received and the payload.
pub(super) async fn next_event(ws: &mut Client) -> (Frame, Value) {
    let first = next_frame(ws).await;
    assert_eq!(first.kind(), Some(FrameKind::Data), "{first:?}");
    let sum = first.header_u32(header::SUM).unwrap();
    let mut parts = vec![first];
    while parts.len() < sum as usize {
        parts.push(next_frame(ws).await);
    }
    let last = parts.last().cloned().unwrap();
    parts.sort_by_key(|p| p.header_u32(header::SEQ));
    let bytes: Vec<u8> = parts
        .iter()
        .flat_map(|p| p.payload_bytes().to_vec())
        .collect();
    (last, serde_json::from_slice(&bytes).unwrap())
}

pub(super) async fn wait_until(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn discovery_answers_the_url_and_client_config_as_the_sdks_read_them() {
    let mock = feishu_mock(fast()).await;
    let config = FeishuConfig::default();
    let answer = discover_as(&mock, &config.app_id, &config.app_secret).await;
    assert_eq!(answer["code"], 0);
    let url = answer["data"]["URL"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("ws://{}/ws/v2?", mock.addr())),
        "{url}"
    );
    for param in ["device_id=", "service_id=", "ticket="] {
        assert!(url.contains(param), "{url}");
    }
    assert!(service_of(url) > 0);
    assert_eq!(
        answer["data"]["ClientConfig"],
        json!({"ReconnectCount": 3, "ReconnectInterval": 1, "ReconnectNonce": 0, "PingInterval": 1})
    );

    let wrong = discover_as(&mock, &config.app_id, "nope").await;
    assert_eq!(wrong["code"], 1_000_040_345, "{wrong}");
    assert!(wrong.get("data").is_none());
    let empty = discover_as(&mock, "", "").await;
    assert_eq!(empty["code"], 1_000_040_344, "{empty}");
    assert_eq!(mock.feishu_stats().endpoint_calls, 3);
}

#[tokio::test]
async fn a_connect_url_is_good_for_one_upgrade() {
    let mock = feishu_mock(fast()).await;
    let url = discover(&mock).await;
    let _ws = connect(&url).await;
    let refused = refused_upgrade(&url).await;
    assert_eq!(refused.status(), 514);
    assert_eq!(refused.headers()["Handshake-Status"], "514");
    assert!(refused.headers().contains_key("Handshake-Msg"));
    assert!(!refused.headers().contains_key("Handshake-Autherrcode"));
    let stats = mock.feishu_stats();
    assert_eq!((stats.connections, stats.live_connections), (1, 1));
}

#[tokio::test]
async fn a_ping_is_answered_with_a_pong_carrying_the_client_config() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, service) = feishu_connect(&mock).await;
    let pong = ping(&mut ws, service).await;
    assert_eq!(pong.service, service);
    let config: Value = serde_json::from_slice(pong.payload_bytes()).unwrap();
    assert_eq!(config["PingInterval"], 1);
    // A ping naming another service is still answered, and counted.
    ping(&mut ws, service.wrapping_add(1)).await;
    let stats = mock.feishu_stats();
    assert_eq!(
        (stats.pings, stats.pongs, stats.pings_wrong_service),
        (2, 2, 1)
    );
}

#[tokio::test]
async fn an_event_is_pushed_as_a_v2_payload_and_its_ack_is_recorded() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, service) = feishu_connect(&mock).await;
    let chat = "oc_testchat";
    let event_id = mock.feishu_emit_message(FeishuMessage::text(chat, "hello 飞书"));
    let (frame, payload) = next_event(&mut ws).await;
    assert_eq!(frame.service, service);
    assert_eq!(frame.message_type(), Some(message_type::EVENT));
    assert_eq!(frame.header(header::SUM), Some("1"));
    assert_eq!(frame.header(header::SEQ), Some("0"));
    assert!(frame
        .header(header::TRACE_ID)
        .is_some_and(|t| !t.is_empty()));
    assert_eq!(payload["schema"], "2.0");
    assert_eq!(payload["header"]["event_id"], event_id.as_str());
    assert_eq!(payload["header"]["event_type"], "im.message.receive_v1");
    let message = &payload["event"]["message"];
    assert_eq!(message["chat_id"], chat);
    let content: Value = serde_json::from_str(message["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["text"], "hello 飞书");
    assert!(message["message_id"].as_str().unwrap().starts_with("om_"));

    ack(&mut ws, &frame, 200).await;
    wait_until("the ack", || mock.feishu_unacked().is_empty()).await;
    let [acked] = mock.feishu_acks().try_into().unwrap();
    assert_eq!(acked.event_id.as_deref(), Some(event_id.as_str()));
    assert_eq!(
        (
            acked.code,
            acked.biz_rt.as_deref(),
            acked.echoed,
            acked.delivery
        ),
        (Some(200), Some("3"), true, 1)
    );
    let [event] = mock.feishu_events().try_into().unwrap();
    assert!(event.acked_at.unwrap() >= event.first_delivered_at.unwrap());
    // Acked in time: never pushed again.
    tokio::time::sleep(ACK_TIMEOUT * 2).await;
    assert_quiet(&mut ws).await;
    assert_eq!(mock.feishu_events()[0].deliveries, 1);
}

#[tokio::test]
async fn an_unacked_event_is_pushed_again_with_the_same_event_id() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, _) = feishu_connect(&mock).await;
    let event_id = mock.feishu_emit(1).remove(0);
    let (first, payload) = next_event(&mut ws).await;
    let started = Instant::now();
    let (again, repeated) = next_event(&mut ws).await;
    assert!(
        started.elapsed() >= ACK_TIMEOUT / 2,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(repeated, payload);
    assert_eq!(repeated["header"]["event_id"], event_id.as_str());
    // Each push has its own frame id; the event id is what stays.
    assert_ne!(
        first.header(header::MESSAGE_ID),
        again.header(header::MESSAGE_ID)
    );
    // A failed handler's ack (500) does not count either.
    ack(&mut ws, &again, 500).await;
    let (third, _) = next_event(&mut ws).await;
    ack(&mut ws, &third, 200).await;
    wait_until("the ack", || mock.feishu_unacked().is_empty()).await;
    let acks = mock.feishu_acks();
    assert_eq!(
        acks.iter()
            .map(|a| (a.code, a.delivery))
            .collect::<Vec<_>>(),
        [(Some(500), 2), (Some(200), 3)]
    );
    assert_eq!(mock.feishu_events()[0].deliveries, 3);
}

#[tokio::test]
async fn events_wait_for_a_connection_and_go_to_the_newest() {
    let mock = feishu_mock(fast()).await;
    let ids = mock.feishu_emit(2);
    let (mut old, _) = feishu_connect(&mock).await;
    for id in &ids {
        let (frame, payload) = next_event(&mut old).await;
        assert_eq!(payload["header"]["event_id"], id.as_str());
        ack(&mut old, &frame, 200).await;
    }
    let (mut new, _) = feishu_connect(&mock).await;
    wait_until("two connections", || {
        mock.feishu_stats().live_connections == 2
    })
    .await;
    let id = mock.feishu_emit(1).remove(0);
    let (frame, payload) = next_event(&mut new).await;
    assert_eq!(payload["header"]["event_id"], id.as_str());
    ack(&mut new, &frame, 200).await;
    assert_quiet(&mut old).await;
    wait_until("all acked", || mock.feishu_unacked().is_empty()).await;
}

#[tokio::test]
async fn a_split_event_comes_in_parts_under_one_message_id() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, _) = feishu_connect(&mock).await;
    let text = "长".repeat(100);
    let event_id = mock.feishu_emit_split(FeishuMessage::text("oc_x", &text), 3);
    let parts = [
        next_frame(&mut ws).await,
        next_frame(&mut ws).await,
        next_frame(&mut ws).await,
    ];
    let id = parts[0].header(header::MESSAGE_ID).unwrap();
    for (seq, part) in parts.iter().enumerate() {
        assert_eq!(part.header(header::MESSAGE_ID), Some(id));
        assert_eq!(part.header(header::SUM), Some("3"));
        assert_eq!(part.header_u32(header::SEQ), Some(seq as u32));
        assert!(!part.payload_bytes().is_empty());
    }
    let whole: Vec<u8> = parts
        .iter()
        .flat_map(|p| p.payload_bytes().to_vec())
        .collect();
    let payload: Value = serde_json::from_slice(&whole).unwrap();
    assert_eq!(payload["header"]["event_id"], event_id.as_str());
    // One ack, echoing the last part, covers the whole message.
    ack(&mut ws, &parts[2], 200).await;
    wait_until("the ack", || mock.feishu_unacked().is_empty()).await;
    assert!(mock.feishu_acks()[0].echoed);
    assert_eq!(mock.feishu_stats().frames_pushed, 3);
}

#[tokio::test]
async fn garbage_from_a_client_is_counted_not_fatal() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, service) = feishu_connect(&mock).await;
    ws.send(Message::binary(vec![0x2a, 0xff])).await.unwrap();
    ws.send(Message::text("{}")).await.unwrap();
    ping(&mut ws, service).await;
    assert_eq!(mock.feishu_stats().bad_frames, 2);
}

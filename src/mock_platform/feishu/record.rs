//! What the mock Feishu keeps for a test to read: every ack frame it received, every event it
//! generated and how it fared, and its counters. A leaf vocabulary, below the state that fills
//! it and the handle that hands it out.

use std::time::Instant;

/// One data frame a client sent back for a push: its ack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeishuAck {
    /// The event the acked push carried; `None` when the frame's `message_id` header named no
    /// push the platform made.
    pub event_id: Option<String>,
    /// The `message_id` header: the push's id, fresh for every (re)delivery.
    pub frame_message_id: String,
    pub conn_id: u64,
    pub at: Instant,
    /// `code` of the JSON payload (`{"code":200}` for success, 500 when the handler failed);
    /// `None` when the payload was not such JSON.
    pub code: Option<i64>,
    /// The `biz_rt` header the SDKs add (handling time in ms), as sent.
    pub biz_rt: Option<String>,
    /// Whether the frame echoed the push: method data, and `type`, `message_id`, `sum` and
    /// `trace_id` as pushed with a `seq` below `sum` (the SDKs send back the frame they got,
    /// plus `biz_rt`, with the payload replaced).
    pub echoed: bool,
    /// Which delivery of the event this push was: 1 for the first, more for redeliveries.
    pub delivery: u32,
}

/// One event the platform generated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeishuEventRecord {
    /// `header.event_id` of the v2 payload; stable across redeliveries.
    pub event_id: String,
    /// `event.message.message_id` (`om_…`), also stable; `None` for raw payloads.
    pub message_id: Option<String>,
    pub chat_id: Option<String>,
    pub text: Option<String>,
    pub emitted_at: Instant,
    /// Pushes made so far, redeliveries and duplicates included.
    pub deliveries: u32,
    pub first_delivered_at: Option<Instant>,
    /// When the first ack with code 200 arrived.
    pub acked_at: Option<Instant>,
}

/// Counters of the long connection and its discovery.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeishuStats {
    /// `POST /callback/ws/endpoint` requests, answered or refused.
    pub endpoint_calls: u64,
    /// WebSocket connections accepted.
    pub connections: u64,
    /// Connections the platform believes open: a half-open one counts until its TCP closes.
    pub live_connections: u64,
    /// Connects refused, at the endpoint or the handshake.
    pub refused: u64,
    pub pings: u64,
    pub pongs: u64,
    /// Pings whose `service` was not the connect URL's `service_id`.
    pub pings_wrong_service: u64,
    /// Client frames that were not pbbp2, had an unknown method, or came as text.
    pub bad_frames: u64,
    /// Data frames written (each part of a split push counts).
    pub frames_pushed: u64,
    /// When each connection was accepted, in order.
    pub connection_times: Vec<Instant>,
    /// Images and files taken by `im/v1/images` and `im/v1/files`.
    pub uploads: u64,
}

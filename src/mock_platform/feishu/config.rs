//! What a test asks of the mock Feishu when nothing is broken, and the ClientConfig the
//! platform hands its long-connection clients.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The connection parameters Feishu sends in the endpoint answer (`data.ClientConfig`) and may
/// send again in a pong's payload. All in whole seconds, as the SDKs read them: oapi-sdk-go
/// `ws/model.go` declares them `int` and multiplies by `time.Second`; node-sdk
/// `ws-client/index.ts` multiplies by 1000. `ReconnectCount` below zero means "forever" there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ClientConfig {
    pub reconnect_count: i64,
    pub reconnect_interval: u64,
    pub reconnect_nonce: u64,
    pub ping_interval: u64,
}

impl Default for ClientConfig {
    /// Test-friendly values, not the platform's: a finite ReconnectCount (what makes the
    /// SDKs give up), and one-second intervals so a test does not wait two minutes.
    fn default() -> Self {
        ClientConfig {
            reconnect_count: 3,
            reconnect_interval: 1,
            reconnect_nonce: 0,
            ping_interval: 1,
        }
    }
}

/// The Feishu part of [`MockConfig`](crate::mock_platform::MockConfig).
#[derive(Clone, Debug)]
pub struct FeishuConfig {
    /// The one self-built app the mock hosts. Endpoint discovery and the token endpoint accept
    /// only this pair.
    pub app_id: String,
    pub app_secret: String,
    pub tenant_key: String,
    /// What `GET /open-apis/bot/v3/info` says the app's bot is: its `app_name` and `open_id`
    /// (the id a mention of it carries).
    pub bot_name: String,
    pub bot_open_id: String,
    /// Where `emit` puts its messages unless told otherwise.
    pub chat_id: String,
    pub client_config: ClientConfig,
    /// How long an event push waits for its ack before the platform pushes it again. The docs
    /// ("使用长连接接收事件"): an event must be handled within 3 seconds "否则会触发超时重推机制".
    pub ack_timeout: Duration,
    /// Live long connections per app: "每个应用最多建立 50 个连接".
    pub max_connections: usize,
    /// `tenant_access_token` lifetime ("最大有效期是 2 小时").
    pub token_lifetime: Duration,
    /// "持有相同 uuid 的请求 1 小时内至多成功发送一条消息" (im/v1/messages create).
    pub uuid_window: Duration,
}

impl Default for FeishuConfig {
    fn default() -> Self {
        FeishuConfig {
            app_id: "cli_mock0000000000001".to_owned(),
            app_secret: "mock-app-secret".to_owned(),
            tenant_key: "mock-tenant".to_owned(),
            bot_name: "Mock Hermes".to_owned(),
            bot_open_id: "ou_mockbot0000000000000000000000001".to_owned(),
            chat_id: "oc_mockchat00000000000000000000001".to_owned(),
            client_config: ClientConfig::default(),
            ack_timeout: Duration::from_secs(3),
            max_connections: 50,
            token_lifetime: Duration::from_secs(7200),
            uuid_window: Duration::from_secs(60 * 60),
        }
    }
}

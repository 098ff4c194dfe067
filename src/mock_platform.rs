//! A loopback chat platform with fault switches, used by the tests, the benchmarks and
//! `hermes-svc demo`: QQ Bot and Discord (their shared op-code WebSocket gateway, token,
//! discovery and send endpoints), Feishu/Lark (its protobuf long connection), Slack (Socket
//! Mode and the Web API a Socket Mode bot calls), Telegram's Bot API and Weixin's iLink (their
//! long polls), and a Matrix homeserver's client-server API (its `/sync` long poll and
//! idempotent sends), all on one port on 127.0.0.1, because that is
//! how the real platforms look from a client: discover a URL over HTTP, then hold a WebSocket
//! or a long poll.
//!
//! Each platform's side lives in its own folder and registers with the shared server
//! (`side.rs`): the HTTP endpoints it serves, the WebSocket it upgrades, the task it runs,
//! and the methods it adds to [`MockPlatform`]. The shared files hold only the server
//! (`server.rs`, `http.rs`, `reply.rs`, `websocket.rs`), the faults (`fault.rs`) and the send
//! recorder (`post.rs`, `post_record.rs`, `send_attempt.rs`), which keeps what every platform's
//! send endpoints accept (`posts`) and every answer they give (`send_attempts`), so a test can
//! count deliveries and check a client's retries against the platform's dedupe rules and
//! rate-limit waits. `registry.rs` is the one place that names every platform.

mod ack_timer;
mod config;
pub mod dingtalk;
mod discord;
mod fault;
pub mod feishu;
mod handle;
mod http;
pub mod matrix;
pub mod mattermost;
mod multipart;
mod opcode_gateway;
mod post;
mod post_record;
pub(crate) mod proxy;
mod qqbot;
mod registry;
mod reply;
mod send_attempt;
mod server;
mod shutdown;
mod side;
pub mod slack;
mod stats;
pub mod telegram;
#[cfg(test)]
mod tests;
mod websocket;
pub mod wecom;
pub mod weixin;

pub use config::{MockConfig, SessionStartLimit};
pub use fault::{Fault, SendFault};
pub use feishu::{
    ClientConfig, FeishuAck, FeishuConfig, FeishuEventRecord, FeishuFault, FeishuMessage,
    FeishuStats, Refusal,
};
pub use handle::MockPlatform;
pub use matrix::{MatrixConfig, MatrixFault, MatrixStats};
pub use opcode_gateway::frames;
pub use post::{Platform, Post, PostedFile, SendAttempt, Target};
pub use proxy::BlackholeProxy;
pub use slack::{OpenRefusal, SlackConfig, SlackEventRecord, SlackFault, SlackFile, SlackStats};
pub use stats::{ConnectionSpan, MockStats};
pub use wecom::{WeComConfig, WeComEventRecord, WeComFault, WeComPost, WeComStats};

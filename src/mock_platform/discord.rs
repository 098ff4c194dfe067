//! The mock platform's Discord side: gateway discovery (`GET /gateway/bot`, with
//! `session_start_limit`), Create Message with its nonce dedupe, and the CDN's attachments
//! (`cdn.rs`). Its WebSocket is the op-code gateway it shares with QQ Bot (`opcode_gateway/`).

mod body;
mod cdn;
mod send;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::json;
use tokio::sync::watch;

use super::config::{MockConfig, SessionStartLimit};
use super::http::RequestHead;
use super::opcode_gateway::discovery;
use super::opcode_gateway::state::Gateway;
use super::post_record::PostRecord;
use super::reply::Reply;
use super::side::{at_once, Side};

pub(super) struct Discord {
    gateway: Arc<Gateway>,
    posts: Arc<PostRecord>,
    session_start_limit: SessionStartLimit,
    /// How long an enforced nonce is remembered.
    nonce_window: Duration,
    /// Message attachments, served as Discord's CDN serves them.
    cdn: cdn::Cdn,
}

impl Discord {
    pub(super) fn new(config: &MockConfig, gateway: Arc<Gateway>, posts: Arc<PostRecord>) -> Self {
        Discord {
            gateway,
            posts,
            session_start_limit: config.session_start_limit,
            nonce_window: config.nonce_window,
            cdn: cdn::Cdn::default(),
        }
    }
}

impl Side for Discord {
    fn serve<'a>(
        &'a self,
        head: &'a RequestHead,
        body: &'a [u8],
        _: &watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        if (head.method.as_str(), head.path.as_str()) == ("GET", "/gateway/bot") {
            let limit = self.session_start_limit;
            let answer = discovery::answer(&self.gateway, head, |body| {
                body["shards"] = json!(1);
                body["session_start_limit"] = json!({
                    "total": limit.total,
                    "remaining": limit.remaining,
                    "reset_after": limit.reset_after.as_millis() as u64,
                    "max_concurrency": limit.max_concurrency,
                });
            });
            return Some(at_once(Reply::Answer(answer)));
        }
        if let Some(answer) = self.cdn.serve(head) {
            return Some(at_once(Reply::Answer(answer)));
        }
        if let Some(channel) = send::typing_endpoint(head) {
            return Some(at_once(send::typing(
                &self.gateway,
                &self.posts,
                channel,
                head,
            )));
        }
        let channel_id = send::endpoint(head)?;
        let (gateway, posts) = (&self.gateway, &self.posts);
        let reply = send::handle(gateway, posts, self.nonce_window, channel_id, head, body);
        Some(at_once(reply))
    }
}

impl super::handle::MockPlatform {
    /// An attachment of `channel`, served as Discord's CDN serves one (on this mock's port):
    /// the Attachment object to put in a message's `attachments`. `valid_s` seconds until its
    /// signed URL expires; negative, already expired.
    pub fn discord_attachment(
        &self,
        channel: &str,
        filename: &str,
        content_type: &str,
        bytes: Vec<u8>,
        valid_s: i64,
    ) -> serde_json::Value {
        let base = self.http_base();
        self.side::<Discord>()
            .cdn
            .add(&base, channel, filename, content_type, bytes, valid_s)
    }
}

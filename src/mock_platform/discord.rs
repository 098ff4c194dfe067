//! The mock platform's Discord side: gateway discovery (`GET /gateway/bot`, with
//! `session_start_limit`), Create Message with its nonce dedupe, as JSON or with files
//! (`upload.rs`), and the CDN's attachments (`cdn.rs`), where uploaded files are served too.
//! Its WebSocket is the op-code gateway it shares with QQ Bot (`opcode_gateway/`).

mod body;
mod cdn;
mod send;
mod upload;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::json;
use tokio::sync::watch;

use super::config::{MockConfig, SessionStartLimit};
use super::http::RequestHead;
use super::multipart;
use super::opcode_gateway::discovery;
use super::opcode_gateway::state::Gateway;
use super::post_record::PostRecord;
use super::reply::Reply;
use super::side::{at_once, BodyLimit, Side};

/// How long an uploaded file's signed CDN URL stays valid. The docs give no figure ("a preset
/// expiry time"); a day outlives any test.
const UPLOAD_URL_VALID_S: i64 = 24 * 60 * 60;

pub(super) struct Discord {
    gateway: Arc<Gateway>,
    posts: Arc<PostRecord>,
    session_start_limit: SessionStartLimit,
    /// How long an enforced nonce is remembered.
    nonce_window: Duration,
    /// Message attachments, served as Discord's CDN serves them.
    cdn: cdn::Cdn,
    /// The mock's own `http://addr`, where its CDN is: an uploaded file's `url`.
    http_base: String,
}

impl Discord {
    pub(super) fn new(
        config: &MockConfig,
        gateway: Arc<Gateway>,
        posts: Arc<PostRecord>,
        http_base: String,
    ) -> Self {
        Discord {
            gateway,
            posts,
            session_start_limit: config.session_start_limit,
            nonce_window: config.nonce_window,
            cdn: cdn::Cdn::default(),
            http_base,
        }
    }

    /// Puts an uploaded file on the CDN as an attachment of `channel`: the Attachment object
    /// the created message carries.
    fn attach(&self, channel: &str, upload: upload::Upload) -> serde_json::Value {
        let part = upload.part;
        let content_type = part.content_type.as_deref();
        let content_type = content_type.unwrap_or("application/octet-stream");
        let mut attachment = self.cdn.add(
            &self.http_base,
            channel,
            &upload.filename,
            content_type,
            part.bytes,
            UPLOAD_URL_VALID_S,
        );
        if let Some(description) = upload.description {
            attachment["description"] = json!(description);
        }
        attachment
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
        Some(Box::pin(async move {
            let incoming = if multipart::is_multipart(head) {
                send::Incoming::Form(multipart::parse(head, body).await)
            } else {
                send::Incoming::Json(body)
            };
            send::handle(self, channel_id, head, incoming)
        }))
    }

    /// Create Message may carry files: its body is read up to the documented request size.
    fn body_limit(&self, head: &RequestHead) -> Option<BodyLimit> {
        send::endpoint(head)?;
        Some(BodyLimit {
            max: upload::MAX_REQUEST,
            too_large: upload::too_large,
        })
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

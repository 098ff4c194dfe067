//! The mock platform's QQ Bot side: the app access token, gateway discovery (`GET /gateway`),
//! the four send endpoints with their passive-reply dedupe, attachments (`media.rs`), and the
//! rich-media upload a media message names (`files.rs`). Its WebSocket is the op-code
//! gateway it shares with Discord (`opcode_gateway/`), which also keeps the access tokens,
//! because Identify checks them.

mod body;
mod files;
mod media;
mod send;
mod token;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::watch;

use super::config::MockConfig;
use super::handle::MockPlatform;
use super::http::RequestHead;
use super::opcode_gateway::discovery;
use super::opcode_gateway::state::Gateway;
use super::post_record::PostRecord;
use super::reply::Reply;
use super::side::{at_once, BodyLimit, Side};

pub(super) struct QqBot {
    gateway: Arc<Gateway>,
    posts: Arc<PostRecord>,
    /// When set, the token endpoint refuses any other `clientSecret`.
    expected_secret: Option<String>,
    /// What the token endpoint says in `expires_in`.
    token_lifetime: Duration,
    /// Message attachments, served as QQ's multimedia host serves them.
    media: media::Media,
    /// The bot's rich-media uploads, by `file_info`.
    files: files::Files,
}

impl QqBot {
    pub(super) fn new(config: &MockConfig, gateway: Arc<Gateway>, posts: Arc<PostRecord>) -> Self {
        QqBot {
            gateway,
            posts,
            expected_secret: config.expected_secret.clone(),
            token_lifetime: config.token_lifetime,
            media: media::Media::default(),
            files: files::Files::default(),
        }
    }
}

impl Side for QqBot {
    /// An upload's body holds the file in base64: read up to the mock's upload cap.
    fn body_limit(&self, head: &RequestHead) -> Option<BodyLimit> {
        files::is_upload(head).then_some(BodyLimit {
            max: super::http::MAX_UPLOAD_BODY,
            too_large: files::too_large,
        })
    }

    fn serve<'a>(
        &'a self,
        head: &'a RequestHead,
        body: &'a [u8],
        _: &watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        let gateway = &self.gateway;
        if let Some(answer) = self.media.serve(head, gateway) {
            return Some(at_once(Reply::Answer(answer)));
        }
        let answer = match (head.method.as_str(), head.path.as_str()) {
            ("POST", token::PATH) => {
                let secret = self.expected_secret.as_deref();
                token::access_token(gateway, secret, self.token_lifetime, body)
            }
            ("GET", "/gateway") => discovery::answer(gateway, head, |_| {}),
            _ if files::is_upload(head) => self.files.upload(gateway, head, body),
            _ => {
                let (target, id) = send::endpoint(head)?;
                let sides = send::Sides {
                    gateway,
                    posts: &self.posts,
                    files: &self.files,
                };
                let reply = send::handle(&sides, target, id, head, body);
                return Some(at_once(reply));
            }
        };
        Some(at_once(Reply::Answer(answer)))
    }
}

/// The QQ side of the handle.
impl MockPlatform {
    /// Stop honouring every access token issued so far, as the platform does once their
    /// lifetime has passed (while a client slept, say). New ones are issued as usual.
    pub fn expire_access_tokens(&self) {
        self.side::<Gateway>().expire_access_tokens();
    }

    /// Rich-media uploads the QQ side has taken (`POST /v2/{users|groups}/{id}/files`),
    /// those no message named included.
    pub fn qq_uploads(&self) -> u64 {
        self.side::<QqBot>().files.count()
    }

    /// An attachment served as QQ's multimedia host serves one (on this mock's port, for the
    /// bot's access token only): the object to put in an event's `attachments`.
    pub fn qq_attachment(
        &self,
        filename: &str,
        content_type: &str,
        bytes: Vec<u8>,
    ) -> serde_json::Value {
        let base = self.http_base();
        self.side::<QqBot>()
            .media
            .add(&base, filename, content_type, bytes)
    }
}

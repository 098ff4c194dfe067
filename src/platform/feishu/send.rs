//! Feishu/Lark: a text message to a chat or a user (`POST
//! /open-apis/im/v1/messages?receive_id_type=chat_id|open_id`), or a reply to a message
//! (`POST /open-apis/im/v1/messages/{message_id}/reply`), with `Authorization: Bearer
//! {tenant_access_token}`.
//!
//! Every request carries a `uuid` derived from the outbox's message id; the platform posts
//! at most one message per uuid within an hour, so a send whose answer was lost is sent
//! again with the same uuid and posted once. Past the hour (a message held back that long by
//! an outage) a repeat could post twice; the outbox gives up on a message after 24 h, and an
//! answer lost in the last of those hours is the only case left.
//!
//! A message with files is one message per piece (`files.rs`): the text first, then each
//! file, each with a uuid of its own fixed by the outbox message and the piece's place.
//!
//! Sources (open.feishu.cn / open.larksuite.com server docs): "发送消息" and "回复消息" (paths,
//! `receive_id_type`, `msg_type`, `content` as a JSON string, `uuid`: at most one message per
//! uuid within 1 hour, at most 50 characters; a text body up to 150 KB; 230020 "the operation
//! triggers the rate limit"); "频控策略" (429 or, on older APIs, 400 with code 99991400 and
//! `x-ogw-ratelimit-reset` in seconds); oapi-sdk-go `core` (99991663, 99991664 and 99991671:
//! the token is invalid, fetch another and retry); "如何解决 230001 错误" (230001: a bad
//! parameter, such as an invalid receive_id).

mod files;

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::token::FeishuToken;
use super::Target;
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::Shared;
use crate::gateway::platform_number::WaitKind;
use crate::gateway::send::classify::{self, header_wait, int, json, local};
use crate::gateway::send::exchange::exchange;
use crate::gateway::send::progress::Progress;
use crate::gateway::send::target::valid_id;
use crate::gateway::send::{Answer, FileLimits, Outgoing, Post};

/// Characters of text taken. A text message's body may be 150 KB; 30,000 characters of CJK
/// (3 bytes each in UTF-8) with the JSON around them fit with room to spare.
const MAX_TEXT: usize = 30_000;

/// The access token was refused (tenant, app, or any access token invalid, or missing): drop
/// it, fetch another, and retry.
pub(super) const TOKEN_REFUSED: &[i64] = &[99991661, 99991663, 99991664, 99991671];

/// Too fast: the gateway's frequency control (99991400) and the messaging API's own limits
/// (230020; 11232, the peak-hour limit the rate-limit page names).
const RATE_LIMITED: &[i64] = &[99991400, 230020, 11232];

/// The platform's own trouble, which a retry may fix: the internal errors of the server
/// error-code page (1500, 1503, 1551, 1557).
const TRANSIENT: &[i64] = &[1500, 1503, 1551, 1557];

pub struct Sender {
    shared: Shared,
    api_base: String,
    token: Arc<FeishuToken>,
    /// What each message with files has done so far (`files.rs`).
    /// Each unfinished message's uploaded keys and pieces posted.
    progress: Progress<String>,
}

impl Post for Sender {
    type Target = Target;

    fn max_text(&self) -> usize {
        MAX_TEXT
    }

    /// Always: the uuid makes every send safe to repeat, a reply or not, within the hour the
    /// platform remembers it.
    fn dedupes(&self, _msg: &Outgoing<Target>) -> bool {
        true
    }

    /// Files as `files.rs` chooses: its limits, each file a message of its own after the
    /// text's.
    const FILES: Option<FileLimits> = Some(files::LIMITS);

    async fn send(&self, msg: &Outgoing<Target>) -> (Answer, Option<Duration>) {
        if !msg.files.is_empty() {
            return (self.post_files(msg).await, None);
        }
        (self.post(msg).await, None)
    }
}

/// The access token an attempt's request goes with, and its `Authorization` header.
struct Auth {
    token: String,
    header: HeaderValue,
}

impl Sender {
    pub(super) fn new(shared: Shared, api_base: &str, token: FeishuToken) -> Self {
        Self {
            shared,
            api_base: api_base.trim_end_matches('/').to_owned(),
            token: Arc::new(token),
            progress: Progress::default(),
        }
    }

    async fn post(&self, msg: &Outgoing<Target>) -> Answer {
        let Some(path) = path(msg) else {
            return Answer::Failed(local(BAD_REPLY_TO));
        };
        let content = json!({ "text": msg.text }).to_string();
        let body = body(msg, "text", content, &msg.id);
        self.post_message(&path, &body).await
    }

    /// One create or reply request with `body` at `path`.
    async fn post_message(&self, path: &str, body: &Value) -> Answer {
        let auth = match self.auth().await {
            Ok(auth) => auth,
            Err(answer) => return answer,
        };
        let request = self
            .shared
            .http
            .post(format!("{}{path}", self.api_base))
            .header(AUTHORIZATION, auth.header.clone())
            .json(body);
        self.answer(&auth, request, "message_id").await
    }

    /// The tenant token, from the cache or fetched, as a header; or how the attempt ends.
    async fn auth(&self) -> Result<Auth, Answer> {
        let token = match self.token.get(&self.shared).await {
            Ok(t) => t,
            Err(PlatformError::Retry(m) | PlatformError::Unreachable(m)) => {
                return Err(Answer::Retry {
                    after: None,
                    reply: local(m),
                })
            }
            // A rejected App ID or secret: the adapter exits 78 on the same mistake.
            Err(PlatformError::Fatal(m)) => return Err(Answer::Failed(local(m))),
        };
        let Ok(mut header) = HeaderValue::from_str(&format!("Bearer {token}")) else {
            self.token.invalidate(&token);
            return Err(Answer::Retry {
                after: None,
                reply: local("the access token holds a character an HTTP header cannot carry"),
            });
        };
        header.set_sensitive(true);
        Ok(Auth { token, header })
    }

    /// `request`'s answer, read by [`read`] with `field` as the id `data` carries; a refused
    /// token is dropped, so that the retry fetches another.
    async fn answer(&self, auth: &Auth, request: reqwest::RequestBuilder, field: &str) -> Answer {
        let r = match exchange(request).await {
            Ok(r) => r,
            Err(answer) => return answer,
        };
        let (answer, token_refused) = read(r.status, &r.headers, &r.body, field);
        if token_refused {
            self.token.invalidate(&auth.token);
        }
        answer
    }
}

const BAD_REPLY_TO: &str = "reply_to is not a Feishu message id (om_...)";

/// The request's path and query: a reply by the message it answers, anything else by target.
fn path(msg: &Outgoing<Target>) -> Option<String> {
    if let Some(id) = &msg.reply_to {
        return valid_id(id).then(|| format!("/open-apis/im/v1/messages/{id}/reply"));
    }
    let kind = match msg.target {
        Target::Chat(_) => "chat_id",
        Target::User(_) => "open_id",
    };
    Some(format!("/open-apis/im/v1/messages?receive_id_type={kind}"))
}

/// A create or reply body: `content` is the JSON string the API takes, and the uuid is
/// derived from `key`, the same for every attempt of the piece.
fn body(msg: &Outgoing<Target>, msg_type: &str, content: String, key: &str) -> Value {
    let mut body = json!({"msg_type": msg_type, "content": content, "uuid": uuid(key)});
    if msg.reply_to.is_none() {
        body["receive_id"] = json!(msg.target.id());
    }
    body
}

/// The message's uuid: the same for every attempt of one outbox message, 36 characters
/// (within the platform's 50) in the usual 8-4-4-4-12 form, from 128 bits of a hash of the id.
fn uuid(id: &str) -> String {
    let d = Sha256::digest(id.as_bytes());
    let hex: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Classify Feishu's answer to a send; the second value says whether it refused the access
/// token.
#[cfg(test)]
fn classify(status: u16, headers: &HeaderMap, body: &[u8]) -> (Answer, bool) {
    read(status, headers, body, "message_id")
}

/// The longest id or key taken from an answer: Feishu's are a few dozen characters
/// (`om_` and 32 hex digits, `img_v2_…`, `file_v2_…`); anything longer is not one.
const MAX_ID: usize = 256;

/// Read Feishu's answer to a send or an upload, whose success carries its id or key in
/// `data.{field}`; the second value says whether it refused the access token. The body's
/// `code` decides before the status does: Feishu answers most errors with HTTP 400 and a
/// code, and a few with 200.
fn read(status: u16, headers: &HeaderMap, body: &[u8], field: &str) -> (Answer, bool) {
    let v = json(body);
    let code = int(&v["code"]);
    let ok = (200..300).contains(&status);
    if ok && code == Some(0) {
        let platform_id = classify::id(&v["data"][field]).filter(|id| id.len() <= MAX_ID);
        return (Answer::Sent { platform_id }, false);
    }
    let reply = classify::reply(status, code.filter(|&c| c != 0), v["msg"].as_str());
    let is = |set: &[i64]| code.is_some_and(|c| set.contains(&c));
    let after =
        header_wait(headers, "x-ogw-ratelimit-reset", WaitKind::Refusal).or_else(|| classify::retry_after(headers));
    if status == 401 || is(TOKEN_REFUSED) {
        return (Answer::Retry { after: None, reply }, true);
    }
    let answer = if status == 429 || is(RATE_LIMITED) || is(TRANSIENT) {
        Answer::Retry { after, reply }
    } else if ok || (code.is_some_and(|c| c != 0) && status < 500) {
        // A refusal with the platform's code (230001 a bad receive_id, 230002 the bot is not
        // in the chat, 230025 too long, ...): not posted, and not for retrying.
        Answer::Failed(reply)
    } else {
        classify::by_status(status, headers, reply)
    };
    (answer, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::send::PlatformReply;

    fn answer(status: u16, body: &str) -> Answer {
        classify(status, &HeaderMap::new(), body.as_bytes()).0
    }

    fn failed(status: u16, body: &str) -> PlatformReply {
        match answer(status, body) {
            Answer::Failed(r) => r,
            other => panic!("{status} {body}: {other:?}"),
        }
    }

    fn text_body(msg: &Outgoing<Target>) -> Value {
        body(msg, "text", json!({ "text": msg.text }).to_string(), &msg.id)
    }

    fn msg(target: Target, reply_to: Option<&str>) -> Outgoing<Target> {
        Outgoing {
            id: "m1".into(),
            target,
            text: "hi \"there\"\n".into(),
            reply_to: reply_to.map(Into::into),
            seq: None,
            files: vec![],
        }
    }

    #[test]
    fn a_posted_message_gives_its_id() {
        let a = answer(
            200,
            r#"{"code":0,"msg":"success","data":{"message_id":"om_dc13264520392913993dd051dba21dcf","chat_id":"oc_1"}}"#,
        );
        assert_eq!(
            a,
            Answer::Sent {
                platform_id: Some("om_dc13264520392913993dd051dba21dcf".into())
            }
        );
    }

    #[test]
    fn rate_limits_wait_as_long_as_the_platform_says() {
        let mut h = HeaderMap::new();
        h.insert("x-ogw-ratelimit-reset", HeaderValue::from_static("52"));
        for (status, code) in [(429, 99991400), (400, 99991400), (400, 230020)] {
            let body = format!(r#"{{"code":{code},"msg":"request trigger frequency limit"}}"#);
            let (a, refused) = classify(status, &h, body.as_bytes());
            assert!(!refused);
            match a {
                Answer::Retry { after, reply } => {
                    assert_eq!(after, Some(std::time::Duration::from_secs(52)));
                    assert_eq!(reply.code, Some(code));
                }
                other => panic!("{status} {code}: {other:?}"),
            }
        }
    }

    /// `x-ogw-ratelimit-reset` by the one rule (platform_number::platform_wait); one that
    /// is not given falls back to `Retry-After`, then to the outbox's backoff.
    #[test]
    fn the_reset_header_is_read_by_the_one_rule() {
        let hour = std::time::Duration::from_secs(3600);
        let after = |reset: Option<&'static str>| {
            let mut h = HeaderMap::new();
            if let Some(r) = reset {
                h.insert("x-ogw-ratelimit-reset", HeaderValue::from_static(r));
            }
            match classify(429, &h, br#"{"code":99991400,"msg":"limit"}"#).0 {
                Answer::Retry { after, .. } => after,
                other => panic!("{other:?}"),
            }
        };
        for (text, want) in [
            (Some("0"), Some(std::time::Duration::from_secs(1))),
            (Some("-1"), None),
            (Some("NaN"), None),
            (Some("1.5"), Some(std::time::Duration::from_millis(1500))),
            (Some("Wed, 21 Oct 2015 07:28:00 GMT"), None),
            (Some("86400"), Some(hour)),
            (Some("1e308"), Some(hour)),
            (Some("inf"), Some(hour)),
            (None, None),
        ] {
            assert_eq!(after(text), want, "{text:?}");
        }
    }

    #[test]
    fn a_refused_token_is_dropped_and_retried() {
        for code in [99991663, 99991664, 99991671, 99991661] {
            let body =
                format!(r#"{{"code":{code},"msg":"Invalid access token for authorization."}}"#);
            let (a, refused) = classify(400, &HeaderMap::new(), body.as_bytes());
            assert!(
                refused && matches!(a, Answer::Retry { .. }),
                "{code}: {a:?}"
            );
        }
        let (_, refused) = classify(500, &HeaderMap::new(), b"");
        assert!(!refused);
    }

    #[test]
    fn refusals_fail_with_the_platform_code_and_words() {
        let r = failed(
            400,
            r#"{"code":230001,"msg":"Your request contains an invalid request parameter, ext=invalid receive_id."}"#,
        );
        assert_eq!((r.status, r.code), (Some(400), Some(230001)));
        assert!(r.message.contains("invalid receive_id"), "{}", r.message);
        assert_eq!(
            failed(
                400,
                r#"{"code":230002,"msg":"Bot/User can NOT be out of the chat."}"#
            )
            .code,
            Some(230002)
        );
        // A 2xx that is not a success is not posted either.
        assert_eq!(
            failed(200, r#"{"code":230025,"msg":"too long"}"#).code,
            Some(230025)
        );
        assert_eq!(failed(404, "").message, "Not Found");
    }

    #[test]
    fn server_trouble_is_retried_and_a_gateway_timeout_is_unknown() {
        assert!(matches!(answer(500, "{}"), Answer::Retry { .. }));
        assert!(matches!(
            answer(502, r#"{"code":1,"msg":"x"}"#),
            Answer::Retry { .. }
        ));
        assert!(matches!(
            answer(400, r#"{"code":1500,"msg":"internal error"}"#),
            Answer::Retry { .. }
        ));
        assert!(matches!(answer(503, "<html>"), Answer::Retry { .. }));
        assert!(matches!(answer(504, ""), Answer::Unknown(_)));
    }

    #[test]
    fn bodies_and_paths_send_and_reply() {
        let chat = msg(Target::Chat("oc_1".into()), None);
        assert_eq!(
            path(&chat).unwrap(),
            "/open-apis/im/v1/messages?receive_id_type=chat_id"
        );
        let b = text_body(&chat);
        assert_eq!(b["receive_id"], "oc_1");
        assert_eq!(b["msg_type"], "text");
        // The content is JSON in a string, as the API takes it.
        let content: Value = serde_json::from_str(b["content"].as_str().unwrap()).unwrap();
        assert_eq!(content, json!({"text": "hi \"there\"\n"}));
        assert_eq!(b["uuid"], uuid("m1"));
        let user = msg(Target::User("ou_1".into()), None);
        assert_eq!(
            path(&user).unwrap(),
            "/open-apis/im/v1/messages?receive_id_type=open_id"
        );
        let reply = msg(Target::Chat("oc_1".into()), Some("om_9"));
        assert_eq!(
            path(&reply).unwrap(),
            "/open-apis/im/v1/messages/om_9/reply"
        );
        assert!(text_body(&reply).get("receive_id").is_none());
        // A reply_to that would leave its path segment is never sent.
        assert_eq!(
            path(&msg(Target::Chat("oc_1".into()), Some("om/../x"))),
            None
        );
    }

    #[test]
    fn the_uuid_is_stable_distinct_and_short() {
        let a = uuid("m1");
        assert_eq!(a, uuid("m1"));
        assert_ne!(a, uuid("m2"));
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
    }
}

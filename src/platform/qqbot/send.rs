//! QQ Bot v2: a text message to a group or a user (`/v2/groups/{group_openid}/messages`,
//! `/v2/users/{openid}/messages`), a guild channel (`/channels/{channel_id}/messages`) or a
//! guild DM (`/dms/{guild_id}/messages`), with `Authorization: QQBot {access_token}`.
//!
//! A passive reply to a group or user message carries the message it answers (`msg_id`) and
//! a sequence number (`msg_seq`); the platform refuses a second send of the same pair as a
//! duplicate (code 40054005, "消息被去重，请检查请求msgseq"), so such a reply is safe to
//! send again. Channel and DM sends have no `msg_seq`, and nothing dedupes them.
//!
//! Sources (tencent-connect/bot-docs): `docs/develop/api-v2/server-inter/message/
//! send-receive/send.md` (paths, `content`, `msg_type`, `msg_id`, `msg_seq`, 22009 "msg limit
//! exceed"), `.../message/post_messages.md` (channel sends; 304023/304024 accepted for
//! review), `docs/develop/api-v2/openapi/error/error.md` (HTTP statuses and codes); botpy's
//! `http.py` (success is 200, 202, 204). 40054005 is not on the error page: its code and
//! text are as reported against the live platform (HKUDS/nanobot#1499, langbot-app/LangBot
//! #2290), where it came with HTTP 400; here it means "sent" whatever the status.
//!
//! A message with files is one upload and one media message per file (`files.rs`), file
//! `n` under `msg_seq` + `n`, so the same dedupe makes each file's message post once.

mod files;

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde_json::{json, Value};

use super::token::QqToken;
use super::Target;
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::Shared;
use crate::gateway::send::classify::{self, int, json, local};
use crate::gateway::send::exchange::{exchange, Response};
use crate::gateway::send::progress::Progress;
use crate::gateway::send::{Answer, FileLimits, Outgoing, Post};

/// QQ publishes no length limit for a text message; too long is refused with 40054007
/// ("消息长度超限"). Platform users report 2000 as the limit that holds; a message refused
/// for length anyway fails with that code.
const MAX_TEXT: usize = 2000;

/// The same `msg_id` + `msg_seq` was sent before: the first send posted it.
const DUPLICATE: i64 = 40054005;

/// Accepted and waiting for review (push, reply): posted once reviewed, and sending it again
/// would queue a second copy.
const IN_REVIEW: &[i64] = &[304023, 304024];

/// Sending too fast: 22009 (msg limit exceed), 20028 (channel write rate limit), 1100100
/// (security: rate limited), 1100308 (channel rate limit). A quota spent for the day or the
/// month (304045, 304049, 304050) is not here: it fails, since no retry within the message's
/// life will find it refilled.
const RATE_LIMITED: &[i64] = &[22009, 20028, 1100100, 1100308];

/// The platform's own trouble, which the error page says a retry fixes: 11242, 11252, 11263
/// and 11281 ("系统错误，一般重试一次会好"), and 304018 (the bot's gateway session is not up,
/// which the adapter is busy fixing).
const TRANSIENT: &[i64] = &[11242, 11252, 11263, 11281, 304018];

/// A media message whose file QQ failed to fetch: 304082 "upload media info fail" and 304083
/// "convert media info fail" ("富媒体资源拉取失败，请重试", send.md). Retried, and `files.rs`
/// uploads the file again for the retry.
const MEDIA_NOT_FETCHED: &[i64] = &[304082, 304083];

/// The access token was refused: 11241 (missing) and 11243 (wrong). Like a 401, the token
/// is dropped and the next attempt fetches a new one.
const TOKEN_REFUSED: &[i64] = &[11241, 11243];

pub struct Sender {
    shared: Shared,
    api_base: String,
    token: Arc<QqToken>,
    /// What each message with files has done so far (`files.rs`).
    /// Each unfinished message's `file_info`s and posts confirmed.
    progress: Progress<files::Uploaded>,
}

impl Sender {
    pub(super) fn new(shared: Shared, api_base: String, token: Arc<QqToken>) -> Sender {
        Sender {
            shared,
            api_base,
            token,
            progress: Progress::default(),
        }
    }
}

impl Post for Sender {
    type Target = Target;

    /// Only a passive reply in a v2 chat carries `msg_seq`; a channel or DM reply takes none.
    fn numbers_replies(target: &Target) -> bool {
        target.is_v2()
    }

    /// Files as `files.rs` chooses: its limits, with the text as the first file's caption.
    const FILES: Option<FileLimits> = Some(files::LIMITS);

    /// Only a v2 chat (group or user) has the rich-media upload; a guild channel or DM
    /// takes no files from this sender (`files.rs` says why).
    fn takes_files(target: &Target) -> bool {
        target.is_v2()
    }

    fn max_text(&self) -> usize {
        MAX_TEXT
    }

    fn dedupes(&self, msg: &Outgoing<Target>) -> bool {
        dedupes(msg)
    }

    async fn send(&self, msg: &Outgoing<Target>) -> (Answer, Option<Duration>) {
        if !msg.files.is_empty() {
            return (self.post_files(msg).await, None);
        }
        (self.post_json(&path(&msg.target), &body(msg)).await, None)
    }
}

/// The access token a request carries, as its header and as the token to drop when the
/// platform refuses it.
struct Auth {
    header: HeaderValue,
    token: String,
}

impl Sender {
    /// `POST {api_base}{path}` with the JSON `body`, and what QQ's answer means.
    async fn post_json(&self, path: &str, body: &Value) -> Answer {
        let auth = match self.auth().await {
            Ok(auth) => auth,
            Err(answer) => return answer,
        };
        let request = self.request(path, &auth).json(body);
        let r = match exchange(request).await {
            Ok(r) => r,
            Err(answer) => return answer,
        };
        self.classify(&r, &auth)
    }

    /// The access token, or how the attempt ends without one.
    async fn auth(&self) -> Result<Auth, Answer> {
        let token = match self.token.get(&self.shared).await {
            Ok(t) => t,
            // A token endpoint that is down or busy: nothing was sent, try again later.
            Err(PlatformError::Retry(m) | PlatformError::Unreachable(m)) => {
                return Err(Answer::Retry {
                    after: None,
                    reply: local(m),
                })
            }
            // A rejected AppID or secret: the adapter exits 78 on the same answer.
            Err(PlatformError::Fatal(m)) => return Err(Answer::Failed(local(m))),
        };
        let Ok(mut header) = HeaderValue::from_str(&format!("QQBot {token}")) else {
            self.token.invalidate(&token);
            return Err(Answer::Retry {
                after: None,
                reply: local("the access token holds a character an HTTP header cannot carry"),
            });
        };
        header.set_sensitive(true);
        Ok(Auth { header, token })
    }

    /// A `POST` to `path` under the API base, authorised.
    fn request(&self, path: &str, auth: &Auth) -> reqwest::RequestBuilder {
        let url = format!("{}{path}", self.api_base.trim_end_matches('/'));
        self.shared
            .http
            .post(url)
            .header(AUTHORIZATION, auth.header.clone())
    }

    /// What an answer means, dropping the token when the platform refused it.
    fn classify(&self, r: &Response, auth: &Auth) -> Answer {
        let (answer, token_refused) = classify(r.status, &r.headers, &r.body);
        if token_refused {
            self.token.invalidate(&auth.token);
        }
        answer
    }
}

fn path(target: &Target) -> String {
    match target {
        Target::Group(id) => format!("/v2/groups/{id}/messages"),
        Target::User(id) => format!("/v2/users/{id}/messages"),
        Target::Channel(id) => format!("/channels/{id}/messages"),
        Target::Dm(id) => format!("/dms/{id}/messages"),
    }
}

/// Whether the platform drops a repeat of this message: only a passive reply in a group or
/// a one-to-one chat, keyed by `msg_id` + `msg_seq`.
fn dedupes(msg: &Outgoing<Target>) -> bool {
    msg.reply_to.is_some() && msg.target.is_v2()
}

fn body(msg: &Outgoing<Target>) -> Value {
    let v2 = msg.target.is_v2();
    let mut body = json!({ "content": msg.text });
    if v2 {
        body["msg_type"] = json!(0);
    }
    if let Some(id) = &msg.reply_to {
        body["msg_id"] = json!(id);
        // Without one the platform takes 1, which a second reply to the same message repeats.
        if let (true, Some(seq)) = (v2, msg.seq) {
            body["msg_seq"] = json!(seq);
        }
    }
    body
}

/// Classify QQ's answer; the second value says whether it refused the access token. The
/// platform's code is read from `code` or `err_code` and settles the answer before the
/// status does, since QQ puts errors in 2xx bodies too.
fn classify(status: u16, headers: &HeaderMap, body: &[u8]) -> (Answer, bool) {
    let v = json(body);
    let code = int(&v["code"])
        .or_else(|| int(&v["err_code"]))
        .filter(|&c| c != 0);
    let ok = (200..300).contains(&status);
    if code.is_some_and(|c| c == DUPLICATE || IN_REVIEW.contains(&c)) {
        return (Answer::Sent { platform_id: None }, false);
    }
    let platform_id = classify::id(&v["id"]);
    if ok && (platform_id.is_some() || code.is_none()) {
        return (Answer::Sent { platform_id }, false);
    }
    let message = v["message"].as_str().or_else(|| v["msg"].as_str());
    let reply = classify::reply(status, code, message);
    let retry = |reply| Answer::Retry {
        after: classify::retry_after(headers),
        reply,
    };
    let is = |set: &[i64]| code.is_some_and(|c| set.contains(&c));
    if status == 401 || is(TOKEN_REFUSED) {
        return (retry(reply), true);
    }
    let answer = if is(RATE_LIMITED) || is(TRANSIENT) || is(MEDIA_NOT_FETCHED) {
        retry(reply)
    } else if ok {
        // A 2xx carrying an error code and no message id: not posted.
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

    #[test]
    fn a_posted_message_gives_its_id() {
        let a = answer(200, r#"{"id":"ROBOT1.0_abc","timestamp":1700000000}"#);
        assert_eq!(
            a,
            Answer::Sent {
                platform_id: Some("ROBOT1.0_abc".into())
            }
        );
        assert_eq!(answer(204, ""), Answer::Sent { platform_id: None });
    }

    #[test]
    fn a_duplicate_msg_seq_and_a_message_in_review_count_as_sent() {
        let dup = r#"{"message":"消息被去重，请检查请求msgseq","code":40054005,"err_code":40054005,"trace_id":"t"}"#;
        for status in [200, 400] {
            assert_eq!(
                answer(status, dup),
                Answer::Sent { platform_id: None },
                "{status}"
            );
        }
        let review = r#"{"code":304023,"message":"push message is waiting for audit now","data":{"message_audit":{"audit_id":"a"}}}"#;
        assert_eq!(answer(202, review), Answer::Sent { platform_id: None });
    }

    #[test]
    fn sending_too_fast_is_retried_with_the_platform_words() {
        match answer(200, r#"{"code":22009,"message":"msg limit exceed"}"#) {
            Answer::Retry { reply, .. } => {
                assert_eq!(reply.code, Some(22009));
                assert_eq!(reply.message, "msg limit exceed");
            }
            other => panic!("{other:?}"),
        }
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        let (a, _) = classify(429, &h, b"{}");
        assert!(
            matches!(a, Answer::Retry { after: Some(d), .. } if d.as_secs() == 2),
            "{a:?}"
        );
        for code in [20028, 1100100, 1100308, 11281, 304018, 304082, 304083] {
            let a = answer(400, &format!(r#"{{"code":{code},"message":"m"}}"#));
            assert!(matches!(a, Answer::Retry { .. }), "{code}: {a:?}");
        }
    }

    #[test]
    fn a_refused_token_is_dropped_and_retried() {
        let (a, refused) = classify(401, &HeaderMap::new(), br#"{"code":11244,"message":"x"}"#);
        assert!(refused && matches!(a, Answer::Retry { .. }), "{a:?}");
        let (a, refused) = classify(400, &HeaderMap::new(), br#"{"code":11243,"message":"x"}"#);
        assert!(refused && matches!(a, Answer::Retry { .. }), "{a:?}");
        let (_, refused) = classify(500, &HeaderMap::new(), b"");
        assert!(!refused);
    }

    #[test]
    fn refusals_fail_with_the_platform_code() {
        let r = failed(400, r#"{"message":"消息长度超限","code":40054007}"#);
        assert_eq!((r.status, r.code), (Some(400), Some(40054007)));
        let r = failed(200, r#"{"err_code":40054007,"message":"消息长度超限"}"#);
        assert_eq!(r.code, Some(40054007));
        // A spent daily quota does not refill within the message's life.
        assert_eq!(
            failed(400, r#"{"code":304049,"message":"m"}"#).code,
            Some(304049)
        );
        assert_eq!(failed(404, "").message, "Not Found");
        assert_eq!(failed(403, r#"{"code":"11253"}"#).code, Some(11253));
    }

    #[test]
    fn server_trouble_is_retried_and_a_gateway_timeout_is_unknown() {
        assert!(matches!(answer(500, "{}"), Answer::Retry { .. }));
        assert!(matches!(answer(503, "<html>"), Answer::Retry { .. }));
        assert!(matches!(answer(504, ""), Answer::Unknown(_)));
    }

    fn msg(target: Target, reply_to: Option<&str>, seq: Option<u32>) -> Outgoing<Target> {
        Outgoing {
            id: "m".into(),
            target,
            text: "hi".into(),
            reply_to: reply_to.map(Into::into),
            seq,
            files: vec![],
        }
    }

    #[test]
    fn bodies_and_paths_per_target() {
        let group = Target::Group("G".into());
        let m = msg(group.clone(), Some("MSG"), Some(3));
        assert_eq!(path(&group), "/v2/groups/G/messages");
        assert_eq!(
            body(&m),
            json!({"content":"hi","msg_type":0,"msg_id":"MSG","msg_seq":3})
        );
        assert!(dedupes(&m));
        let active = msg(Target::User("U".into()), None, Some(3));
        assert_eq!(body(&active), json!({"content":"hi","msg_type":0}));
        assert!(!dedupes(&active));
        let channel = msg(Target::Channel("C".into()), Some("MSG"), Some(3));
        assert_eq!(path(&channel.target), "/channels/C/messages");
        assert_eq!(body(&channel), json!({"content":"hi","msg_id":"MSG"}));
        assert!(
            !dedupes(&channel),
            "no msg_seq on a channel: nothing dedupes it"
        );
        assert_eq!(path(&Target::Dm("D".into())), "/dms/D/messages");
        assert_eq!(path(&Target::User("U".into())), "/v2/users/U/messages");
    }
}

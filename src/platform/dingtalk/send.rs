//! Messages through the robot API with the app's access token (`x-acs-dingtalk-access-token`):
//! `POST /v1.0/robot/oToMessages/batchSend` to a person (`userIds: [staff id]`) and
//! `POST /v1.0/robot/groupMessages/send` to a group (`openConversationId`), each as
//! `msgKey: "sampleText"` with `msgParam` the JSON string `{"content": …}` (open.dingtalk.com,
//! "批量发送人与机器人会话中机器人消息", "机器人发送群聊消息").
//!
//! How an answer is read:
//! - HTTP 200 with `processQueryKey` is sent, unless the staff id is in
//!   `flowControlledStaffIdList` (throttled: retried) or `invalidStaffIdList` (failed).
//! - HTTP 200 with a non-zero `errcode` is no success: a throttling code (the `oapi` family's
//!   90018, 130101, 88) is retried, any other fails with DingTalk's words.
//! - 429 and a `code` naming a QPS or flow limit are retried; 401 (and a `code` about the
//!   token) drops the token and retries with a new one; the rest by status.
//!
//! The robot API has no idempotency key: a request whose answer was lost may have posted, so
//! the message's policy decides (at-most-once makes it `unknown` and never sends it again,
//! at-least-once sends it again), as for Slack and Discord.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{json, Value};

use super::target::Target;
use super::token::{says, DingTalkToken};
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::Shared;
use crate::gateway::send::classify::{self, json, local};
use crate::gateway::send::exchange::exchange;
use crate::gateway::send::{Answer, Outgoing, Post};

pub(crate) const BATCH_SEND_PATH: &str = "/v1.0/robot/oToMessages/batchSend";
pub(crate) const GROUP_SEND_PATH: &str = "/v1.0/robot/groupMessages/send";
const TOKEN_HEADER: &str = "x-acs-dingtalk-access-token";

/// A `sampleText` is cut by the platform past about 5,000 characters (**inferred** from the
/// robot message limits page, which gives 20,000 bytes); a little under keeps it whole.
const MAX_TEXT: usize = 4000;

/// The `errcode`s of throttling the platform answers with HTTP 200 ("发送速度太快", "调用
/// 频率超限").
const THROTTLED: &[i64] = &[88, 90002, 90018, 130101];

pub struct Sender {
    shared: Shared,
    api_base: String,
    robot_code: String,
    token: Arc<DingTalkToken>,
}

impl Sender {
    pub(super) fn new(shared: Shared, api_base: &str, robot_code: &str, token: DingTalkToken) -> Self {
        Sender {
            shared,
            api_base: api_base.trim_end_matches('/').to_owned(),
            robot_code: robot_code.to_owned(),
            token: Arc::new(token),
        }
    }
}

impl Post for Sender {
    type Target = Target;

    fn max_text(&self) -> usize {
        MAX_TEXT
    }

    /// Never: the robot API has no idempotency key.
    fn dedupes(&self, _msg: &Outgoing<Target>) -> bool {
        false
    }

    async fn send(&self, msg: &Outgoing<Target>) -> (Answer, Option<Duration>) {
        let token = match self.token.get(&self.shared).await {
            Ok(t) => t,
            Err(PlatformError::Retry(m) | PlatformError::Unreachable(m)) => {
                return (Answer::Retry { after: None, reply: local(m) }, None)
            }
            Err(PlatformError::Fatal(m)) => return (Answer::Failed(local(m)), None),
        };
        let Ok(mut header) = HeaderValue::from_str(&token) else {
            self.token.invalidate(&token);
            let m = "the access token holds a character an HTTP header cannot carry";
            return (Answer::Retry { after: None, reply: local(m) }, None);
        };
        header.set_sensitive(true);
        let param = json!({"content": msg.text}).to_string();
        let (path, body) = match &msg.target {
            Target::User(id) => (
                BATCH_SEND_PATH,
                json!({"robotCode": self.robot_code, "userIds": [id],
                       "msgKey": "sampleText", "msgParam": param}),
            ),
            Target::Group(id) => (
                GROUP_SEND_PATH,
                json!({"robotCode": self.robot_code, "openConversationId": id,
                       "msgKey": "sampleText", "msgParam": param}),
            ),
        };
        let request = self
            .shared
            .http
            .post(format!("{}{path}", self.api_base))
            .header(TOKEN_HEADER, header)
            .json(&body);
        let r = match exchange(request).await {
            Ok(r) => r,
            Err(answer) => return (answer, None),
        };
        let (answer, token_refused) = classify(r.status, &r.headers, &r.body, msg.target.id());
        if token_refused {
            self.token.invalidate(&token);
        }
        (answer, None)
    }
}

/// DingTalk's answer to a send to `id`; the second value says whether it refused the token.
fn classify(status: u16, headers: &HeaderMap, body: &[u8], id: &str) -> (Answer, bool) {
    let v: Value = json(body);
    let code = v["code"].as_str().unwrap_or("");
    let errcode = classify::int(&v["errcode"]).filter(|c| *c != 0);
    let message = format!("{}{}", code, says(&v));
    let reply = classify::reply(status, errcode, Some(message.trim_start_matches(':').trim()));
    let token_refused = status == 401
        || code.contains("InvalidAuthentication")
        || code.contains("accessToken")
        || code.contains("AccessToken");
    if token_refused {
        return (Answer::Retry { after: None, reply }, true);
    }
    let throttled = status == 429
        || code.contains("QpsLimit")
        || code.contains("Throttling")
        || code.contains("FlowControl")
        || errcode.is_some_and(|c| THROTTLED.contains(&c))
        || listed(&v["flowControlledStaffIdList"], id);
    if throttled {
        return (Answer::Retry { after: classify::retry_after(headers), reply }, false);
    }
    if !(200..300).contains(&status) {
        return (classify::by_status(status, headers, reply), false);
    }
    if errcode.is_some() || listed(&v["invalidStaffIdList"], id) {
        return (Answer::Failed(reply), false);
    }
    match v["processQueryKey"].as_str().filter(|k| !k.is_empty() && k.len() <= 256) {
        Some(key) => (Answer::Sent { platform_id: Some(key.to_owned()) }, false),
        // A 200 without the key the docs promise: posted or not, nothing says.
        None => (Answer::Unknown("DingTalk answered 200 without a processQueryKey".into()), false),
    }
}

fn listed(list: &Value, id: &str) -> bool {
    list.as_array().is_some_and(|l| l.iter().any(|x| x == id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: Value) -> (Answer, bool) {
        classify(status, &HeaderMap::new(), body.to_string().as_bytes(), "s1")
    }

    #[test]
    fn dingtalks_answers_are_sent_retried_failed_or_unknown() {
        assert_eq!(
            answer(200, json!({"processQueryKey": "k1"})).0,
            Answer::Sent { platform_id: Some("k1".into()) }
        );
        // A throttling errcode with HTTP 200 is no success.
        for body in [
            json!({"errcode": 90018, "errmsg": "send too fast"}),
            json!({"processQueryKey": "k", "flowControlledStaffIdList": ["s1"]}),
        ] {
            assert!(matches!(answer(200, body.clone()).0, Answer::Retry { .. }), "{body}");
        }
        assert!(matches!(answer(429, json!({"code": "Forbidden.AccessDenied.QpsLimitForApi"})).0, Answer::Retry { .. }));
        let (a, refused) = answer(401, json!({"code": "InvalidAuthentication", "message": "token"}));
        assert!(matches!(a, Answer::Retry { .. }) && refused);
        match answer(200, json!({"processQueryKey": "k", "invalidStaffIdList": ["s1"]})).0 {
            Answer::Failed(_) => {}
            other => panic!("{other:?}"),
        }
        match answer(400, json!({"code": "param.invalid", "message": "robotCode不存在"})).0 {
            Answer::Failed(r) => assert!(r.to_string().contains("robotCode"), "{r}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(answer(503, Value::Null).0, Answer::Retry { .. }));
        assert!(matches!(answer(200, json!({})).0, Answer::Unknown(_)));
    }
}

//! The OpenAPI a Stream robot calls: `connections/open` and `oauth2/accessToken` with the
//! app's credentials, and the robot API's two sends with the access token in
//! `x-acs-dingtalk-access-token`, and the exchange of a file's download code for a link
//! (`files.rs`). Errors are `{"code": WORD, "message": …, "requestid": …}`
//! with a 4xx/5xx status; a throttled send is HTTP 200 with an `errcode`, as the issue's
//! measurements found it.

use std::time::Duration;

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::post::{Platform, Post, SendAttempt, Target};
use super::super::post_record::{Dedupe, PostRecord};
use super::super::reply::{Answer, Reply};
use super::super::send_attempt::{attempted, settled, struck_after, struck_before, Refusals};
use super::files;
use super::state::{DingTalkState, Refused};

pub(crate) const OPEN_PATH: &str = "/v1.0/gateway/connections/open";
pub(crate) const TOKEN_PATH: &str = "/v1.0/oauth2/accessToken";
pub(crate) const BATCH_SEND_PATH: &str = "/v1.0/robot/oToMessages/batchSend";
pub(crate) const GROUP_SEND_PATH: &str = "/v1.0/robot/groupMessages/send";
pub(crate) const SESSION_PATH: &str = "/robot/sendBySession";

pub(crate) fn route(
    head: &RequestHead,
    body: &[u8],
    state: &DingTalkState,
    posts: &PostRecord,
) -> Option<Reply> {
    if head.method == "GET" {
        return files::serve(head, state).map(Reply::Answer);
    }
    if head.method != "POST" {
        return None;
    }
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let field = |name: &str| v[name].as_str().unwrap_or("").to_owned();
    let reply = match head.path.as_str() {
        OPEN_PATH => Reply::Answer(
            match state.open(&field("clientId"), &field("clientSecret")) {
                Ok((endpoint, ticket)) => {
                    Answer::new(200, json!({"endpoint": endpoint, "ticket": ticket}))
                }
                Err(refused) => refusal(refused),
            },
        ),
        TOKEN_PATH => Reply::Answer(match state.token(&field("appKey"), &field("appSecret")) {
            Ok(token) => Answer::new(
                200,
                json!({"accessToken": token, "expireIn": state.config.token_lifetime.as_secs()}),
            ),
            Err(refused) => refusal(refused),
        }),
        BATCH_SEND_PATH => send(head, &v, state, posts, Target::User),
        GROUP_SEND_PATH => send(head, &v, state, posts, Target::Group),
        SESSION_PATH => by_session(head, &v, state, posts),
        files::DOWNLOAD_PATH => Reply::Answer(files::link(head, &v, state)),
        _ => return None,
    };
    Some(reply)
}

fn error(status: u16, code: &str, message: &str) -> Answer {
    Answer::new(
        status,
        json!({"code": code, "message": message, "requestid": "mock-request"}),
    )
}

fn refusal(refused: Refused) -> Answer {
    match refused {
        Refused::Credentials => error(
            400,
            "invalidClientIdOrSecret",
            "无效的clientId或者clientSecret",
        ),
        Refused::Armed(status, code) => error(status, &code, "refused by the mock"),
    }
}

fn send(
    head: &RequestHead,
    v: &Value,
    state: &DingTalkState,
    posts: &PostRecord,
    target: Target,
) -> Reply {
    let target_id = match target {
        Target::User => v["userIds"][0].as_str(),
        _ => v["openConversationId"].as_str(),
    }
    .unwrap_or("")
    .to_owned();
    attempted(posts, Platform::DingTalk, target, target_id, |attempt| {
        if !state.token_ok(head.header("x-acs-dingtalk-access-token")) {
            return Reply::Answer(error(401, "InvalidAuthentication", "不合法的access_token"));
        }
        if let Some(refused) = struck_before(posts, attempt, &RobotApi) {
            return refused;
        }
        process(v, state, posts, attempt, target)
    })
}

fn process(
    v: &Value,
    state: &DingTalkState,
    posts: &PostRecord,
    attempt: &mut SendAttempt,
    target: Target,
) -> Reply {
    let c = &state.config;
    if v["robotCode"] != c.robot_code.as_str() {
        return Reply::Answer(error(400, "resource.not.found", "robot 不存在"));
    }
    let id = attempt.target_id.clone();
    let known = match target {
        Target::User => c.staff.contains(&id),
        _ => c.groups.contains(&id),
    };
    if target != Target::User && !known {
        return Reply::Answer(error(
            400,
            "invalidParameter.openConversationId",
            "群不存在",
        ));
    }
    if target == Target::User && (!known || v["userIds"].as_array().map_or(0, Vec::len) != 1) {
        return Reply::Answer(Answer::new(
            200,
            json!({"processQueryKey": state.mint(), "invalidStaffIdList": [id], "flowControlledStaffIdList": []}),
        ));
    }
    let param: Value = v["msgParam"]
        .as_str()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or(Value::Null);
    let Some(text) = param["content"]
        .as_str()
        .filter(|_| v["msgKey"] == "sampleText")
    else {
        return Reply::Answer(error(400, "invalidParameter.msgParam", "msgParam 不合法"));
    };
    let post = Post {
        platform: Platform::DingTalk,
        target,
        target_id: id,
        content: text.to_owned(),
        reply_to: None,
        msg_seq: None,
        nonce: None,
        message_id: String::new(),
        received_at: attempt.received_at,
        received_unix_ms: attempt.received_unix_ms,
        files: vec![],
    };
    let key = state.mint();
    let render = |post: &Post| match post.target {
        Target::User => {
            json!({"processQueryKey": post.message_id, "invalidStaffIdList": [], "flowControlledStaffIdList": []})
        }
        _ => json!({"processQueryKey": post.message_id}),
    };
    // No idempotency key: every request that gets here is a new message.
    let accepted = posts.accept(post, Dedupe::None, |_| key, render);
    let Some(answer) = settled(accepted, attempt) else {
        return Reply::Answer(error(500, "ServiceUnavailable", "internal"));
    };
    if let Some(withheld) = struck_after(posts, attempt) {
        return withheld;
    }
    Reply::Answer(Answer::new(200, answer))
}

/// A post to a message's session webhook: text back where the message was said, answered in
/// the `oapi` shape (`errcode`, `errmsg`).
fn by_session(head: &RequestHead, v: &Value, state: &DingTalkState, posts: &PostRecord) -> Reply {
    let Some((group, id)) = head.query_param("session").and_then(|s| state.session(&s)) else {
        return Reply::Answer(Answer::new(
            200,
            json!({"errcode": 300001, "errmsg": "session 不存在"}),
        ));
    };
    let target = if group { Target::Group } else { Target::User };
    attempted(posts, Platform::DingTalk, target, id.clone(), |attempt| {
        let Some(text) = v["text"]["content"]
            .as_str()
            .filter(|_| v["msgtype"] == "text")
        else {
            return Reply::Answer(Answer::new(
                200,
                json!({"errcode": 40035, "errmsg": "缺少参数 text"}),
            ));
        };
        let post = Post {
            platform: Platform::DingTalk,
            target,
            target_id: id,
            content: text.to_owned(),
            reply_to: None,
            msg_seq: None,
            nonce: None,
            message_id: String::new(),
            received_at: attempt.received_at,
            received_unix_ms: attempt.received_unix_ms,
            files: vec![],
        };
        let key = state.mint();
        let accepted = posts.accept(
            post,
            Dedupe::None,
            |_| key,
            |_| json!({"errcode": 0, "errmsg": "ok"}),
        );
        match settled(accepted, attempt) {
            Some(answer) => Reply::Answer(Answer::new(200, answer)),
            None => Reply::Answer(error(500, "ServiceUnavailable", "internal")),
        }
    })
}

/// The robot API's answers to the send faults: a 500, a 503, and throttling as HTTP 200 with
/// an `errcode` (which tells no wait).
struct RobotApi;

impl Refusals for RobotApi {
    fn server_error(&self) -> Answer {
        error(500, "ServiceUnavailable", "服务暂不可用")
    }

    fn unavailable(&self) -> Answer {
        error(503, "ServiceUnavailable", "服务暂不可用")
    }

    fn rate_limited(&self, _: Target, _retry_after: Duration) -> (Answer, Option<Duration>) {
        (
            Answer::new(200, json!({"errcode": 90018, "errmsg": "发送速度太快"})),
            None,
        )
    }
}

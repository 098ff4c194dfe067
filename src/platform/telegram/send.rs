//! Telegram: `sendMessage` to a chat (`chat_id`), a reply by `reply_parameters.message_id`.
//!
//! A text longer than Telegram's 4,096 characters goes as several messages, in order, the
//! first one the reply. Telegram has no client key that drops a repeat, so a message is
//! never sent twice on purpose: the pieces already posted are remembered per outbox
//! message, and a retry after a 5xx, a 429 or no answer on piece 3 starts at piece 3. The
//! memory is the process's: a restart between pieces starts the message again (see
//! docs/outbox.md).
//!
//! A message with a file goes as one `sendPhoto`, `sendVoice`, `sendAudio`, `sendVideo` or
//! `sendDocument`, by the file's kind, its text the caption, uploaded as multipart/form-data
//! ("Sending files": "10 MB max size for photos, 50 MB for other files"; a caption is
//! "0-1024 characters after entities parsing"). A photo over 10 MB goes as a document.
//!
//! Answers, from the Bot API docs ("Making requests", "sendMessage", "ReplyParameters",
//! "ResponseParameters"): `{"ok": true, "result": Message}`; else `ok: false` with
//! `error_code`, `description` and, on a 429, `parameters.retry_after` (seconds); a group
//! that became a supergroup answers 400 with `parameters.migrate_to_chat_id`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};

use super::Target;
use crate::config::Secret;
use crate::gateway::send::classify::{self, int, json, local};
use crate::gateway::send::exchange::exchange;
use crate::gateway::send::split::pieces;
use crate::gateway::send::upload::{part, timeout_for};
use crate::gateway::send::{Answer, FileKind, FileLimits, Outgoing, Post, TextUnit};

/// "Text of the message to be sent, 1-4096 characters after entities parsing", where a
/// character is a UTF-16 code unit, as the entity offsets count (Hermes counts the same).
const PIECE: usize = 4096;
/// The longest text taken: sixteen messages' worth. Longer is refused when it is queued.
const MAX_TEXT: usize = PIECE * 16;
/// "10 MB max size for photos, 50 MB for other files", read as the smaller of the two ways
/// to count a megabyte.
const MAX_PHOTO: u64 = 10_000_000;
const MAX_FILE: u64 = 50_000_000;

pub struct Sender {
    http: reqwest::Client,
    api_base: String,
    token: Secret,
    /// Outbox message id → the pieces posted so far and the first one's message id.
    progress: Mutex<HashMap<String, (usize, Option<String>)>>,
}

impl Post for Sender {
    type Target = Target;

    fn max_text(&self) -> usize {
        MAX_TEXT
    }

    fn max_piece(&self) -> usize {
        PIECE
    }

    /// One file a message (an album, `sendMediaGroup`, takes no reply markup and is not
    /// needed yet), its text the caption.
    const FILES: Option<FileLimits> = Some(FileLimits {
        max_files: 1,
        max_bytes: MAX_FILE,
        max_caption: 1024,
    });

    /// Never: Telegram has no client key that drops a repeat.
    fn dedupes(&self, _msg: &Outgoing<Target>) -> bool {
        false
    }

    async fn send(&self, msg: &Outgoing<Target>) -> (Answer, Option<Duration>) {
        (self.post(msg).await, None)
    }

    /// sendChatAction: "The status is set for 5 seconds or less (when a message arrives from
    /// your bot, Telegram clients clear its typing status)".
    const TYPING_LASTS: Option<Duration> = Some(Duration::from_secs(5));

    async fn typing(&self, target: &Target) -> Result<(), String> {
        let body = json!({"chat_id": chat_id(&target.0), "action": "typing"});
        let url = format!(
            "{}/bot{}/sendChatAction",
            self.api_base,
            self.token.expose()
        );
        match exchange(self.http.post(url).json(&body)).await {
            Ok(r) if r.status == 200 => Ok(()),
            Ok(r) => Err(format!("HTTP {}", r.status)),
            Err(answer) => Err(format!("{answer:?}")),
        }
    }
}

/// A numeric chat id goes as a number, a channel's @username as a string.
fn chat_id(chat: &str) -> serde_json::Value {
    chat.parse::<i64>()
        .map_or_else(|_| json!(chat), |n| json!(n))
}

impl Sender {
    pub(super) fn new(http: reqwest::Client, api_base: &str, token: Secret) -> Self {
        Self {
            http,
            api_base: api_base.trim_end_matches('/').to_owned(),
            token,
            progress: Mutex::new(HashMap::new()),
        }
    }

    async fn post(&self, msg: &Outgoing<Target>) -> Answer {
        let chat = &msg.target.0;
        let reply_to = match msg.reply_to.as_deref().map(str::parse::<i64>) {
            None => None,
            Some(Ok(id)) => Some(id),
            Some(Err(_)) => {
                return Answer::Failed(local("reply_to is not a Telegram message id (an integer)"))
            }
        };
        let chat_id = chat_id(chat);
        if let Some(file) = msg.files.first() {
            return self.post_file(msg, file, chat_id, reply_to).await;
        }
        let pieces = pieces(&msg.text, PIECE, TextUnit::Utf16);
        let (done, mut first) = self.progress(&msg.id);
        for (i, piece) in pieces.iter().enumerate().skip(done) {
            let mut body = json!({"chat_id": chat_id, "text": piece});
            if let (0, Some(id)) = (i, reply_to) {
                // The reply still goes out if the message it answers was deleted meanwhile.
                body["reply_parameters"] =
                    json!({"message_id": id, "allow_sending_without_reply": true});
            }
            let url = format!("{}/bot{}/sendMessage", self.api_base, self.token.expose());
            let answer = match exchange(self.http.post(url).json(&body)).await {
                Ok(r) => classify(r.status, &r.body),
                Err(answer) => answer,
            };
            match answer {
                Answer::Sent { platform_id } => {
                    first = first.or(platform_id);
                    self.record(&msg.id, Some((i + 1, first.clone())));
                }
                // Pieces before this one are confirmed: a retry (or, for an unknown answer, an
                // at-least-once retry) starts here, and never posts a confirmed piece again.
                // An unknown answer under at-most-once leaves its entry behind, a few bytes.
                Answer::Retry { .. } | Answer::Unknown(_) => return answer,
                // Not retried: nothing to remember.
                other => {
                    self.record(&msg.id, None);
                    return other;
                }
            }
        }
        self.record(&msg.id, None);
        Answer::Sent { platform_id: first }
    }

    /// One file, its text the caption, by the method its kind takes.
    async fn post_file(
        &self,
        msg: &Outgoing<Target>,
        file: &crate::gateway::send::OutFile,
        chat_id: Value,
        reply_to: Option<i64>,
    ) -> Answer {
        let (method, field) = match file.kind {
            FileKind::Photo if file.bytes <= MAX_PHOTO => ("sendPhoto", "photo"),
            FileKind::Voice => ("sendVoice", "voice"),
            FileKind::Audio => ("sendAudio", "audio"),
            FileKind::Video => ("sendVideo", "video"),
            FileKind::Photo | FileKind::Document => ("sendDocument", "document"),
        };
        let upload = match part(file).await {
            Ok(p) => p,
            Err(answer) => return answer,
        };
        let chat = match chat_id {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let mut form = reqwest::multipart::Form::new()
            .text("chat_id", chat)
            .part(field, upload);
        if !msg.text.is_empty() {
            form = form.text("caption", msg.text.clone());
        }
        if let Some(id) = reply_to {
            let reply = json!({"message_id": id, "allow_sending_without_reply": true});
            form = form.text("reply_parameters", reply.to_string());
        }
        let url = format!("{}/bot{}/{method}", self.api_base, self.token.expose());
        let request = self.http.post(url).timeout(timeout_for(file.bytes));
        match exchange(request.multipart(form)).await {
            Ok(r) => classify(r.status, &r.body),
            Err(answer) => answer,
        }
    }

    fn progress(&self, id: &str) -> (usize, Option<String>) {
        let map = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(id).cloned().unwrap_or((0, None))
    }

    fn record(&self, id: &str, progress: Option<(usize, Option<String>)>) {
        let mut map = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        match progress {
            Some(p) => map.insert(id.to_owned(), p),
            None => map.remove(id),
        };
    }
}

/// One `sendMessage` answer.
fn classify(status: u16, body: &[u8]) -> Answer {
    let v = json(body);
    if status == 200 && v["ok"] == json!(true) {
        let platform_id = int(&v["result"]["message_id"]).map(|n| n.to_string());
        return Answer::Sent { platform_id };
    }
    let code = int(&v["error_code"]);
    let mut reply = classify::reply(status, code, v["description"].as_str());
    if let Some(to) = int(&v["parameters"]["migrate_to_chat_id"]) {
        reply.message = format!("{}; the chat is now chat:{to}", reply.message);
    }
    let after = retry_after(&v);
    match status {
        429 => Answer::Retry { after, reply },
        // Bad request (chat not found, text too long), blocked or kicked (403), a token
        // Telegram does not know (401, 404): no retry changes these.
        400..=499 => Answer::Failed(reply),
        _ => classify::by_status(status, &reqwest::header::HeaderMap::new(), reply),
    }
}

/// A flood wait's `parameters.retry_after` (seconds; an Integer by the Bot API), for sends
/// and `getUpdates` alike, by the one rule (platform_number::platform_wait): 1 s to 1 h, and
/// not given when it is not a number of seconds.
pub(super) fn retry_after(v: &Value) -> Option<Duration> {
    classify::json_seconds(&v["parameters"]["retry_after"])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock_platform::telegram::TelegramConfig;
    use crate::mock_platform::{MockConfig, MockPlatform, Platform, SendFault};

    /// A lost answer on piece 2 of 3: the retry resends piece 2 (it may have been posted) and
    /// never piece 1, which Telegram confirmed.
    #[tokio::test]
    async fn a_lost_answer_keeps_the_pieces_confirmed_before_it() {
        let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let config = TelegramConfig::default();
        let tg = Sender::new(http, &mock.http_base(), Secret::new(config.token));
        let msg = Outgoing {
            id: "m1".into(),
            target: Target(config.chats[0].to_string()),
            text: ["a", "b", "c"].map(|c| c.repeat(PIECE)).concat(),
            reply_to: None,
            seq: None,
            files: vec![],
        };
        // Piece 1 went out in an earlier attempt.
        tg.record(&msg.id, Some((1, Some("41".into()))));
        mock.set_send_fault(Platform::Telegram, SendFault::ResetAfterProcessing(1));
        assert!(matches!(tg.post(&msg).await, Answer::Unknown(_)));
        assert_eq!(tg.progress(&msg.id).0, 1, "piece 1 stays confirmed");
        assert_eq!(
            tg.post(&msg).await,
            Answer::Sent {
                platform_id: Some("41".into())
            }
        );
        let firsts: Vec<char> = mock
            .posts()
            .iter()
            .map(|p| p.content.chars().next().unwrap())
            .collect();
        assert_eq!(firsts, ['b', 'b', 'c'], "piece 2 again, piece 1 never");
        assert_eq!(tg.progress(&msg.id), (0, None), "forgotten once sent");
    }

    #[test]
    fn a_flood_wait_is_read_by_the_one_rule() {
        let (sec, hour) = (Duration::from_secs(1), Duration::from_secs(3600));
        for (value, want) in [
            ("0", Some(sec)),
            ("-1", None),
            ("\"NaN\"", None),
            ("1.5", Some(Duration::from_millis(1500))),
            ("\"Wed, 21 Oct 2015 07:28:00 GMT\"", None),
            ("86400", Some(hour)),
            ("1e308", Some(hour)),
            ("\"inf\"", Some(hour)),
        ] {
            let body = format!(r#"{{"ok":false,"error_code":429,"parameters":{{"retry_after":{value}}}}}"#);
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(retry_after(&v), want, "{value}");
        }
        assert_eq!(retry_after(&json!({"ok": false, "error_code": 429})), None);
    }

    #[test]
    fn answers_by_status_and_body() {
        let sent = classify(
            200,
            br#"{"ok":true,"result":{"message_id":77,"chat":{"id":1}}}"#,
        );
        assert_eq!(
            sent,
            Answer::Sent {
                platform_id: Some("77".into())
            }
        );
        let limited = classify(
            429,
            br#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}"#,
        );
        assert!(
            matches!(&limited, Answer::Retry { after: Some(d), reply } if d.as_secs() == 7 && reply.code == Some(429)),
            "{limited:?}"
        );
        let missing = classify(
            400,
            br#"{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}"#,
        );
        assert!(
            matches!(&missing, Answer::Failed(r) if r.message.contains("chat not found")),
            "{missing:?}"
        );
        let moved = classify(
            400,
            br#"{"ok":false,"error_code":400,"description":"Bad Request: group chat was upgraded to a supergroup chat","parameters":{"migrate_to_chat_id":-1001}}"#,
        );
        assert!(
            matches!(&moved, Answer::Failed(r) if r.message.contains("chat:-1001")),
            "{moved:?}"
        );
        assert!(matches!(classify(502, b"<html>"), Answer::Retry { .. }));
        assert!(matches!(classify(403, b"{}"), Answer::Failed(_)));
        // ok:true with a 5xx status is not trusted as sent.
        assert!(matches!(
            classify(500, br#"{"ok":true}"#),
            Answer::Retry { .. }
        ));
    }
}

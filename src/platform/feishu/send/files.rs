//! A Feishu message's files: each is uploaded, then posted as a message of its own that names
//! the upload's key. Feishu's image and file messages carry no text, so the text goes first
//! as a text message, and each file follows it in order.
//!
//! **Upload** (multipart, `Authorization: Bearer <tenant_access_token>`, scope `im:resource`
//! or `im:resource:upload`; the bytes streamed from the outbox's copy):
//! - "上传图片" `POST /open-apis/im/v1/images`, fields `image_type=message` and `image` →
//!   `{"code": 0, "data": {"image_key"}}`; at most 10 MB, never empty ("上传的图片大小不能超过
//!   10 MB，且不支持上传大小为 0 的图片"). A photo ([`FileKind::Photo`]: JPEG, PNG, WebP) within
//!   that goes here; a larger one goes as a file, as the page itself advises for large images.
//! - "上传文件" `POST /open-apis/im/v1/files`, fields `file_type` (`opus`, `mp4`, `pdf`, `doc`,
//!   `xls`, `ppt`, or `stream` "若上传文件不属于以上枚举类型"), `file_name` ("带后缀的文件名"),
//!   optional `duration` (ms) and `file` → `data.file_key`; at most 30 MB, never empty. The
//!   gateway does not read a recording's length, so it sends no `duration` ("不填充时无法显示
//!   具体时长": the chat shows none).
//!   Audio must be Opus ("其他格式的音频文件，请转为 OPUS 格式后上传").
//!
//! Errors of both (their pages' tables): 400/234001 invalid parameter, 401/234002
//! unauthorized, 400/234006 "The file size exceed the max value", 400/234007 the app has no
//! bot, 400/234010 "File's size can't be 0": each fails the message with Feishu's words.
//!
//! **Message**: the create or reply request the text takes (`send.rs`), with `msg_type`
//! `image` `{"image_key"}`, `file` `{"file_key"}` or `audio` `{"file_key"}` (an `opus`
//! upload: an Ogg file whose first packet is `OpusHead`, read from its bytes), `content` a
//! JSON string. Other audio, and Ogg that is not Opus, go as a `stream` file. A video goes as
//! a `file` (its upload typed `mp4` when it is one): the `media` message would want a cover
//! image the gateway does not make. Every piece of a reply is a reply to the same message,
//! so that in a topic the files stay with the text.
//!
//! **Exactly once.** Piece `n`'s uuid is derived from the outbox message id (`{id}` for the
//! text, as a text message's; `{id}.file{n}` for file `n`), so "持有相同 uuid 的请求 1 小时内至多
//! 成功发送一条消息" makes each piece post once, and
//! [`Post::dedupes`](crate::gateway::send::Post::dedupes) stays true. The process remembers,
//! per message, the keys it has and the pieces confirmed: a retry after a failed upload, a
//! 429 or a lost answer uploads nothing twice and skips what was posted. A process killed
//! between an upload and its message's answer forgets the key: its next life uploads the file
//! again, an **orphan upload** (never shown in the chat), and posts under the same uuid,
//! which Feishu answers with the message it made if it made one. A crash costs at most one
//! orphan upload per file, never a second message, within the hour Feishu keeps a uuid.
//!
//! **Limits** ([`LIMITS`]): 30 MB a file and 10 MB an image, read as the smaller of the
//! two ways to read "MB" (10^6 bytes), so that nothing checked at queueing is refused at the
//! upload. Ten files a message: the API sets no number, since each file is its own message;
//! ten bounds one message's requests at 21, and is what Discord and Matrix take. The text
//! is a message of its own, so it may be as long as any text.

use std::path::Path;

use reqwest::header::AUTHORIZATION;
use reqwest::multipart::Form;
use serde_json::json;
use tokio::io::AsyncReadExt;

use super::{body, path, Sender, Target, BAD_REPLY_TO, MAX_TEXT};
use crate::gateway::send::classify::local;
use crate::gateway::send::upload;
use crate::gateway::send::{Answer, FileKind, FileLimits, OutFile, Outgoing};

/// "文件大小不得超过 30 MB".
const MAX_FILE: u64 = 30_000_000;
/// "上传的图片大小不能超过 10 MB".
const MAX_IMAGE: u64 = 10_000_000;

pub(super) const LIMITS: FileLimits = FileLimits {
    max_files: 10,
    max_bytes: MAX_FILE,
    max_caption: MAX_TEXT,
};

const IMAGES_PATH: &str = "/open-apis/im/v1/images";
const FILES_PATH: &str = "/open-apis/im/v1/files";

/// How one file goes to Feishu: which upload, and which message names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// `im/v1/images`, then an `image` message.
    Image,
    /// `im/v1/files` with this `file_type`, then a message of `msg_type` (`file` or `audio`).
    File {
        file_type: &'static str,
        msg_type: &'static str,
    },
}

impl Route {
    /// The route for `file`, `opus` saying whether its bytes are Ogg Opus.
    fn of(file: &OutFile, opus: bool) -> Route {
        let file_type = |file_type| Route::File {
            file_type,
            msg_type: "file",
        };
        match file.kind {
            FileKind::Photo if file.bytes <= MAX_IMAGE => Route::Image,
            FileKind::Voice | FileKind::Audio if opus => Route::File {
                file_type: "opus",
                msg_type: "audio",
            },
            _ => file_type(match file.mime.as_str() {
                "video/mp4" => "mp4",
                "application/pdf" => "pdf",
                "application/msword" => "doc",
                "application/vnd.ms-excel" => "xls",
                "application/vnd.ms-powerpoint" => "ppt",
                _ => "stream",
            }),
        }
    }

    /// The message type, and the field of its content (and of the upload's `data`) that
    /// holds the key.
    fn message(self) -> (&'static str, &'static str) {
        match self {
            Route::Image => ("image", "image_key"),
            Route::File { msg_type, .. } => (msg_type, "file_key"),
        }
    }
}

/// Whether the file at `path` is Ogg Opus: its first page's first packet starts `OpusHead`
/// (RFC 7845 §3: the identification header is alone on the first page). Reads one page
/// header at most; a file that cannot be read is not Opus (and fails at its upload).
async fn is_opus(path: &Path) -> bool {
    let mut head = [0u8; 27 + 255 + 8];
    let Ok(mut file) = tokio::fs::File::open(path).await else {
        return false;
    };
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let head = &head[..got];
    if !head.starts_with(b"OggS") || head.len() < 27 {
        return false;
    }
    let start = 27 + usize::from(head[26]);
    head.get(start..start + 8) == Some(b"OpusHead")
}

/// File `n`'s uuid key: the same for every attempt of one message, and never a text
/// message's (an outbox id has no `.`).
fn file_key(id: &str, n: usize) -> String {
    format!("{id}.file{n}")
}

impl Sender {
    /// The text, then every file uploaded and posted, in order, from where an earlier attempt
    /// of this process stopped.
    pub(super) async fn post_files(&self, msg: &Outgoing<Target>) -> Answer {
        let Some(path) = path(msg) else {
            return Answer::Failed(local(BAD_REPLY_TO));
        };
        let text = usize::from(!msg.text.trim().is_empty());
        let mut done = self.progress.get(&msg.id, msg.files.len());
        for piece in done.posted..text + msg.files.len() {
            let request = if piece < text {
                let content = json!({ "text": msg.text }).to_string();
                body(msg, "text", content, &msg.id)
            } else {
                let n = piece - text;
                let file = &msg.files[n];
                let route = Route::of(file, is_opus(&file.path).await);
                let key = match done.uploads[n].clone() {
                    Some(key) => key,
                    None => match self.upload(file, route).await {
                        Ok(key) => {
                            done.uploads[n] = Some(key.clone());
                            self.progress.put(&msg.id, &done);
                            key
                        }
                        Err(answer) => return self.stopped(&msg.id, answer),
                    },
                };
                let (msg_type, field) = route.message();
                let content = json!({ field: key }).to_string();
                body(msg, msg_type, content, &file_key(&msg.id, n))
            };
            match self.post_message(&path, &request).await {
                Answer::Sent { platform_id } => {
                    if piece == 0 {
                        done.first = platform_id;
                    }
                    done.posted = piece + 1;
                    self.progress.put(&msg.id, &done);
                }
                answer => return self.stopped(&msg.id, answer),
            }
        }
        self.progress.forget(&msg.id);
        Answer::Sent {
            platform_id: done.first,
        }
    }

    /// An attempt that ends early: what it did is kept for the retry, unless there is none.
    fn stopped(&self, id: &str, answer: Answer) -> Answer {
        if matches!(answer, Answer::Failed(_)) {
            self.progress.forget(id);
        }
        answer
    }

    /// `file` uploaded by `route`; its key.
    async fn upload(&self, file: &OutFile, route: Route) -> Result<String, Answer> {
        let part = upload::part(file).await?;
        let (path, form) = match route {
            Route::Image => (
                IMAGES_PATH,
                Form::new().text("image_type", "message").part("image", part),
            ),
            Route::File { file_type, .. } => (
                FILES_PATH,
                Form::new()
                    .text("file_type", file_type)
                    .text("file_name", file.name.clone())
                    .part("file", part),
            ),
        };
        let auth = self.auth().await?;
        let request = self
            .shared
            .http
            .post(format!("{}{path}", self.api_base))
            .header(AUTHORIZATION, auth.header.clone())
            .timeout(upload::timeout_for(file.bytes))
            .multipart(form);
        let (_, field) = route.message();
        match self.answer(&auth, request, field).await {
            Answer::Sent {
                platform_id: Some(key),
            } => Ok(key),
            Answer::Sent { platform_id: None } => Err(Answer::Failed(local(format!(
                "Feishu took the upload of {:?} and gave no {field}",
                file.name
            )))),
            // An upload posts nothing: with its answer lost it is at most an orphan, and
            // uploading again is safe whatever the message's policy.
            Answer::Unknown(why) => Err(Answer::Retry {
                after: None,
                reply: local(format!(
                    "the upload's answer was lost ({why}); uploading again"
                )),
            }),
            answer => Err(answer),
        }
    }
}

#[cfg(test)]
mod tests;

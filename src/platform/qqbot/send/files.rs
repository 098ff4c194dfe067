//! A QQ message's files: each is uploaded to the chat's rich-media endpoint and then posted as
//! a media message (`msg_type` 7) that points at it (tencent-connect/bot-docs
//! `docs/develop/api-v2/server-inter/message/send-receive/rich-media.md` and `send.md`;
//! docs/research/media-platforms.md §4 B).
//!
//! **Upload.** `POST /v2/users/{openid}/files` or `/v2/groups/{group_openid}/files`, JSON
//! `{"file_type", "file_data", "srv_send_msg": false}`, plus `file_name` for a file (type 4),
//! as Hermes sends it; the answer is `{file_uuid, file_info, ttl}`. `file_type` is 1 for an
//! image (png/jpg), 2 a video (mp4), 3 a voice note (silk/amr), and 4 any other file: a kind
//! the docs' formats leave out (a WebP, an Ogg voice note) goes as a file. With
//! `srv_send_msg: false` the upload posts nothing; its `file_info` is good for `ttl` seconds
//! (0: long-lived), and only in the kind of chat it was uploaded for.
//!
//! **The docs and the clients disagree on the bytes.** The docs make `url` required (QQ
//! fetches the file) and mark `file_data` "【暂未支持】" (not yet supported), and type 4
//! "（暂不开放）" (not open). The gateway has no public URL to offer, and real clients send
//! the bytes: Hermes's `_upload_media` sends `file_data` as plain base64 ("NOT a data URI")
//! and type 4 with `file_name` (botpy's newer `post_group_file` takes a `url`, or the
//! `upload_id` of a chunked upload the docs do not describe). So this follows Hermes: a
//! platform that holds to its docs refuses the upload, and the message fails with QQ's words.
//!
//! **The body is streamed.** `file_data` is base64 inside a JSON string, so the body is
//! written as the fields, then the file encoded piece by piece from the outbox's copy, then
//! the closing quote and brace, with its exact length computed beforehand: a 10 MiB file
//! costs the gateway a read buffer, never the 13.3 MiB body.
//!
//! **Post.** `POST /v2/users/{openid}/messages` or `/v2/groups/{group_openid}/messages` with
//! `{"msg_type": 7, "media": {"file_info"}, "content", "msg_id", "msg_seq"}`. `content` "需要
//! 填入一个值，譬如一个空格" (must hold a value, a space say): the message's text on the first
//! file, a space on the others. 304082/304083 ("富媒体资源拉取失败，请重试", QQ failed to
//! fetch the media) are retried with the file uploaded again.
//!
//! **Exactly once.** File `n`'s post is a passive reply under `msg_seq` = the message's
//! `seq` + `n`: the outbox holds that many numbers for a message with files
//! ([`Message::last_seq`](crate::gateway::outbox::Message::last_seq)), so no other message
//! repeats one, and QQ refuses a second post of the same `msg_id` + `msg_seq` with 40054005,
//! which `send.rs` reads as sent. The process remembers, per message, the `file_info`s it has
//! (until their `ttl`) and the posts confirmed, so a retry after a 429 or a lost answer
//! uploads nothing twice and skips what was posted. A process killed between an upload and
//! its post's answer forgets the upload: its next life uploads the file again, an **orphan
//! `file_info`** (never shown in the chat; a unit of the bot's daily upload quota, if the
//! code 40093002 Hermes reports is real), and posts under the same `msg_seq`, which QQ drops
//! if the first post went through. A crash costs at most one orphan upload per file, never a
//! second post. A message that is not a reply (an active message: no `msg_id`) has no dedupe,
//! and its policy decides, as for text.
//!
//! **Guild channels and DMs** take no files here: their endpoint takes an image by public
//! URL only (`post_messages.md`), or, with botpy, a multipart `file_image`, and Hermes refuses
//! guild media. [`Post::takes_files`](crate::gateway::send::Post::takes_files) refuses such a
//! message when it is queued, and an attempt that still meets one fails.
//!
//! **Limits** ([`LIMITS`]): [`MAX_FILE`] per file, five files, the caption a text's length.

use std::io;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures_util::{Stream, StreamExt};
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE};
use serde_json::{json, Value};

use super::{path, Sender, Target, MAX_TEXT, MEDIA_NOT_FETCHED};
use crate::gateway::send::classify::{json, local, reply};
use crate::gateway::send::exchange::exchange;
use crate::gateway::send::upload::timeout_for;
use crate::gateway::send::{Answer, FileLimits, OutFile, Outgoing};

/// The largest file sent: 10 MiB. The docs give no size (they take a URL), and the limits
/// other clients quote (30 MB an image, 100 MB a video or file) are for the chunked upload
/// flow, which the docs do not describe; for bytes inline as base64, Hermes names "the ~10 MB
/// inline-base64 cap of the old adapter". The gateway streams the body, so the cap is the
/// platform's, not the gateway's memory.
pub(super) const MAX_FILE: u64 = 10 * 1024 * 1024;

/// What a QQ message takes: five files (each is its own passive reply, and QQ takes five
/// replies to one message: "每个消息最多回复 5 次", send.md), each within [`MAX_FILE`], the
/// text as the first file's caption, as long as a text message may be.
pub(in crate::platform::qqbot) const LIMITS: FileLimits = FileLimits {
    max_files: 5,
    max_bytes: MAX_FILE,
    max_caption: MAX_TEXT,
};

/// A `file_info` this close to its `ttl` is uploaded again rather than posted.
const TTL_MARGIN: Duration = Duration::from_secs(30);

/// QQ's rich-media `file_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FileType {
    Image = 1,
    Video = 2,
    Voice = 3,
    File = 4,
}

impl FileType {
    /// The type `file` goes as: the docs' formats by their MIME type, anything else a file.
    /// (The store's sniffer names neither SILK nor AMR today, so a voice note goes as a file
    /// until it does.)
    fn of(file: &OutFile) -> FileType {
        match file.mime.as_str() {
            "image/png" | "image/jpeg" => FileType::Image,
            "video/mp4" => FileType::Video,
            "audio/amr" | "audio/silk" => FileType::Voice,
            _ => FileType::File,
        }
    }
}

/// A file QQ holds for a post: what an upload gives.
#[derive(Clone, Debug)]
pub(super) struct Uploaded {
    file_info: String,
    /// When the `file_info` lapses (`ttl`); never, for a `ttl` of 0.
    lapses: Option<Instant>,
}

impl Uploaded {
    fn fresh(&self) -> bool {
        self.lapses
            .is_none_or(|at| Instant::now() + TTL_MARGIN < at)
    }
}

impl Sender {
    /// Every file of `msg` uploaded and posted, in order, from where an earlier attempt of
    /// this process stopped.
    pub(super) async fn post_files(&self, msg: &Outgoing<Target>) -> Answer {
        let Some(chat) = chat(&msg.target) else {
            let m = "QQ takes files only in a group or one-to-one chat (group:, user:), not in a guild channel or DM";
            return Answer::Failed(local(m));
        };
        let mut done = self.progress.get(&msg.id, msg.files.len());
        for (n, file) in msg.files.iter().enumerate().skip(done.posted) {
            let file_info = match done.uploads[n].as_ref().filter(|u| u.fresh()) {
                Some(u) => u.file_info.clone(),
                None => match self.upload(&msg.target, chat, file).await {
                    Ok(u) => {
                        let info = u.file_info.clone();
                        done.uploads[n] = Some(u);
                        self.progress.put(&msg.id, &done);
                        info
                    }
                    Err(answer) => return self.stopped(&msg.id, answer),
                },
            };
            let body = media_body(msg, n, &file_info);
            match self.post_json(&path(&msg.target), &body).await {
                Answer::Sent { platform_id } => {
                    if n == 0 {
                        done.first = platform_id;
                    }
                    done.posted = n + 1;
                    self.progress.put(&msg.id, &done);
                }
                answer => {
                    if let Answer::Retry { reply, .. } = &answer {
                        // QQ could not fetch the media: the next attempt uploads it again.
                        if reply.code.is_some_and(|c| MEDIA_NOT_FETCHED.contains(&c)) {
                            done.uploads[n] = None;
                            self.progress.put(&msg.id, &done);
                        }
                    }
                    return self.stopped(&msg.id, answer);
                }
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

    /// `file` uploaded for `target`, a chat of kind `chat` (`users` or `groups`): its
    /// `file_info`.
    async fn upload(&self, target: &Target, chat: &str, file: &OutFile) -> Result<Uploaded, Answer> {
        let file_type = FileType::of(file);
        let (body, length) = upload_body(file, file_type).await?;
        let auth = self.auth().await?;
        let request = self
            .request(&format!("/v2/{chat}/{}/files", target.id()), &auth)
            .header(CONTENT_TYPE, "application/json")
            .header(CONTENT_LENGTH, length)
            .timeout(timeout_for(length))
            .body(reqwest::Body::wrap_stream(body));
        let r = match exchange(request).await {
            Ok(r) => r,
            // An upload posts nothing: with its answer lost it is at most an orphan
            // `file_info`, and uploading again is safe whatever the message's policy.
            Err(Answer::Unknown(why)) => {
                let why = format!("the upload's answer was lost ({why}); uploading again");
                return Err(Answer::Retry {
                    after: None,
                    reply: local(why),
                });
            }
            Err(answer) => return Err(answer),
        };
        let v: Value = json(&r.body);
        let info = v["file_info"]
            .as_str()
            .or_else(|| v["data"]["file_info"].as_str())
            .filter(|i| !i.is_empty());
        match (self.classify(&r, &auth), info) {
            (Answer::Sent { .. }, Some(info)) => Ok(Uploaded {
                file_info: info.to_owned(),
                lapses: lapses(&v["ttl"]),
            }),
            (Answer::Sent { .. }, None) => {
                let m = "QQ took the upload and gave no file_info";
                Err(Answer::Failed(reply(r.status, None, Some(m))))
            }
            (answer, _) => Err(answer),
        }
    }
}

/// The chat kind a v2 target's paths name, or `None` for a guild target.
fn chat(target: &Target) -> Option<&'static str> {
    match target {
        Target::User(_) => Some("users"),
        Target::Group(_) => Some("groups"),
        Target::Channel(_) | Target::Dm(_) => None,
    }
}

/// When a `file_info` with this `ttl` lapses: never for 0 (or none given).
fn lapses(ttl: &Value) -> Option<Instant> {
    let secs = ttl.as_u64().filter(|&s| s > 0)?;
    Instant::now().checked_add(Duration::from_secs(secs))
}

/// File `n`'s media message: the text as the first one's caption, a space on the others
/// (QQ wants `content` to hold a value), and the reply's `msg_id` with the file's own
/// `msg_seq`.
fn media_body(msg: &Outgoing<Target>, n: usize, file_info: &str) -> Value {
    let caption = if n == 0 && !msg.text.trim().is_empty() {
        msg.text.as_str()
    } else {
        " "
    };
    let mut body = json!({"msg_type": 7, "media": {"file_info": file_info}, "content": caption});
    if let Some(id) = &msg.reply_to {
        body["msg_id"] = json!(id);
        if let Some(seq) = msg.seq {
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            body["msg_seq"] = json!(seq.saturating_add(n));
        }
    }
    body
}

/// The upload's JSON body as a stream, and its length: the fields, then `file_data` encoded
/// from the outbox's copy as it is read, then the end of the string and the object.
async fn upload_body(
    file: &OutFile,
    file_type: FileType,
) -> Result<(impl Stream<Item = io::Result<Bytes>> + Send + 'static, u64), Answer> {
    let mut fields = json!({"file_type": file_type as u8, "srv_send_msg": false});
    if file_type == FileType::File {
        fields["file_name"] = json!(file.name);
    }
    // The object without its closing brace, then the opening of `file_data`'s string; base64
    // has nothing JSON must escape.
    let mut head = fields.to_string();
    head.pop();
    head.push_str(r#","file_data":""#);
    const TAIL: &str = r#""}"#;
    let length = head.len() as u64 + 4 * file.bytes.div_ceil(3) + TAIL.len() as u64;
    let opened = tokio::fs::File::open(&file.path).await.map_err(|e| {
        Answer::Failed(local(format!(
            "the file {:?} to send cannot be read from the outbox: {e}",
            file.name
        )))
    })?;
    let encoded = crate::media::base64_pieces(crate::media::file_chunks(opened));
    let stream = futures_util::stream::once(async move { Ok(Bytes::from(head)) })
        .chain(encoded)
        .chain(futures_util::stream::once(async {
            Ok(Bytes::from_static(TAIL.as_bytes()))
        }));
    Ok((stream, length))
}

#[cfg(test)]
mod tests;

//! A Matrix message's files: each goes to the homeserver's content repository, and then an
//! `m.room.message` event in the room points at it (matrix-org/matrix-spec:
//! `data/api/client-server/content-repo.yaml`, `data/event-schemas/schema/m.room.message$m.*`).
//!
//! **Upload.** `POST /_matrix/media/v3/upload?filename=NAME`, the body the raw bytes streamed
//! from the outbox's copy with the file's `Content-Type` ("Clients SHOULD always supply this
//! header") and `Content-Length`; the answer is `{"content_uri": "mxc://…"}`, or 403
//! `M_FORBIDDEN` ("The server does not permit the file type", "a quota"), 413 `M_TOO_LARGE`
//! or 429. The upload still lives under `/_matrix/media/v3/`: authenticated media (v1.11)
//! moved only downloads and `config` to `/_matrix/client/v1/media/`. (The v1.7 pair `POST
//! /_matrix/media/v1/create` + `PUT …/upload/{serverName}/{mediaId}` would make an upload
//! idempotent as well, but only with its id kept across a crash, which the outbox does not
//! keep, and servers before v1.7 lack it.)
//!
//! **Event.** `msgtype` by the file's kind: `m.image`, `m.audio` (a voice note too: the spec
//! has no other msgtype for one), `m.video`, else `m.file`; `url` the mxc URI; `filename`;
//! `info {mimetype, size}`; and `body`, the message's text on the first file's event and the
//! file's name on the others. `body` is "the filename of the original upload" when
//! `filename` is absent or the same, and "Otherwise, this is a caption for the file"
//! (`m.room.message$m.file.yaml`, v1.10 "Media captions"). The first event carries the reply
//! relation, as a text message does; one event per file, in order.
//!
//! **Exactly once.** File `n`'s event goes under the transaction id `{message id}.file{n}`:
//! fixed by the outbox message and the file's place in it, so the homeserver answers a
//! repeat with the event it made for the first ("Transaction identifiers", as for text in
//! `send.rs`), and [`Post::dedupes`](crate::gateway::send::Post::dedupes) stays true. The
//! process remembers, per message, the content URIs it has and the events confirmed: a retry
//! after a failed upload, a 429 or a lost answer uploads nothing twice and skips the events
//! already posted. A process killed between an upload and its event's answer forgets the
//! upload: its next life uploads the file again, an **orphan copy** in the repository (never
//! shown in the room; it counts against the bot's media quota), and sends the event under
//! the same transaction id, which the homeserver answers with the event it already made if
//! it made one. A crash costs at most one orphan upload per file, never a second event. The
//! homeserver keeps transaction ids for a while, not for ever (Synapse: 24 h): a message
//! resumed later than that could post its events again.
//!
//! **Limits** ([`LIMITS`]): the spec caps none but the homeserver's upload size, which it
//! advertises as `m.upload.size` at `GET /_matrix/client/v1/media/config` ("If not listed or
//! null, the size limit should be treated as unknown"). The limits are checked when a
//! message is queued, before any request, so they are a constant: Synapse's default
//! `max_upload_size`, 50 MiB. A homeserver configured for less answers the upload 413
//! `M_TOO_LARGE`, which fails the message with its words.


use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE};
use reqwest::Method;
use serde_json::{json, Value};

use super::{classify, reply_relation, Sender, Target, BAD_TOKEN, MAX_TEXT};
use crate::gateway::send::classify::{json, local, reply};
use crate::gateway::send::exchange::exchange;
use crate::gateway::send::upload;
use crate::gateway::send::{Answer, FileKind, FileLimits, OutFile, Outgoing};

/// Synapse's default `max_upload_size` ("50M", read as MiB, as `matrix/fetch.rs` reads it).
const MAX_FILE: u64 = 50 * 1024 * 1024;

/// What a Matrix message takes: ten files (the spec sets no number, since each file is its
/// own event; ten bounds the requests one message makes at twenty, and is what Discord takes,
/// so a message that fits one fits the other), each within [`MAX_FILE`], the text as the
/// first file's caption, as long as a text message may be.
pub(super) const LIMITS: FileLimits = FileLimits {
    max_files: 10,
    max_bytes: MAX_FILE,
    max_caption: MAX_TEXT,
};

impl Sender {
    /// Every file of `msg` uploaded and posted, in order, from where an earlier attempt of
    /// this process stopped (its [`Progress`](crate::gateway::send::progress::Progress)).
    pub(super) async fn post_files(&self, msg: &Outgoing<Target>) -> Answer {
        let mut done = self.progress.get(&msg.id, msg.files.len());
        for (n, file) in msg.files.iter().enumerate().skip(done.posted) {
            let uri = match done.uploads[n].clone() {
                Some(uri) => uri,
                None => match self.upload(file).await {
                    Ok(uri) => {
                        done.uploads[n] = Some(uri.clone());
                        self.progress.put(&msg.id, &done);
                        uri
                    }
                    Err(answer) => return self.stopped(&msg.id, answer),
                },
            };
            let content = content(msg, n, file, &uri);
            match self.put_event(&msg.target, &txn_id(&msg.id, n), &content).await {
                Answer::Sent { platform_id } => {
                    if n == 0 {
                        done.first = platform_id;
                    }
                    done.posted = n + 1;
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

    /// `file` into the content repository; its `mxc://` URI.
    async fn upload(&self, file: &OutFile) -> Result<String, Answer> {
        let body = upload::body(file).await?;
        let query = [("filename", file.name.as_str())];
        let request = self
            .api
            .request_under("media/v3", Method::POST, &["upload"], &query)
            .ok_or_else(|| Answer::Failed(local(BAD_TOKEN)))?
            .header(CONTENT_TYPE, file.mime.as_str())
            .header(CONTENT_LENGTH, file.bytes)
            .timeout(upload::timeout_for(file.bytes))
            .body(body);
        let r = match exchange(request).await {
            Ok(r) => r,
            // An upload posts nothing: with its answer lost it is at most an orphan copy,
            // and uploading again is safe whatever the message's policy.
            Err(Answer::Unknown(why)) => {
                let why = format!("the upload's answer was lost ({why}); uploading again");
                return Err(Answer::Retry {
                    after: None,
                    reply: local(why),
                });
            }
            Err(answer) => return Err(answer),
        };
        if !(200..300).contains(&r.status) {
            return Err(classify(r.status, &r.headers, &r.body));
        }
        let v: Value = json(&r.body);
        match v["content_uri"].as_str().filter(|u| u.starts_with("mxc://")) {
            Some(uri) => Ok(uri.to_owned()),
            None => {
                let m = "the homeserver took the upload and gave no mxc:// content_uri";
                Err(Answer::Failed(reply(r.status, None, Some(m))))
            }
        }
    }
}

/// File `n`'s transaction id: the same for every attempt of one message, and never a text
/// message's (an outbox id has no `.`).
fn txn_id(id: &str, n: usize) -> String {
    format!("{id}.file{n}")
}

fn msgtype(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Photo => "m.image",
        FileKind::Voice | FileKind::Audio => "m.audio",
        FileKind::Video => "m.video",
        FileKind::Document => "m.file",
    }
}

/// File `n`'s event: the first carries the text as its caption and the reply relation.
fn content(msg: &Outgoing<Target>, n: usize, file: &OutFile, uri: &str) -> Value {
    let caption = (n == 0 && !msg.text.is_empty()).then_some(msg.text.as_str());
    let mut content = json!({
        "msgtype": msgtype(file.kind),
        "body": caption.unwrap_or(&file.name),
        "filename": file.name,
        "url": uri,
        "info": {"mimetype": file.mime, "size": file.bytes},
    });
    if n == 0 {
        reply_relation(&mut content, msg);
    }
    content
}

#[cfg(test)]
mod tests;

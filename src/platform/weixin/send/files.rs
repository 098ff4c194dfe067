//! A Weixin message's files: each uploaded to the CDN encrypted, then posted as a message of
//! its own (Tencent/openclaw-weixin `docs/protocol.md` "getUploadUrl" and "CDN media flow",
//! `src/cdn/upload.ts`, `src/cdn/cdn-upload.ts`, `src/messaging/send.ts`;
//! docs/research/media-platforms.md §7 B).
//!
//! **Upload.** A new random 16-byte key and file key per upload. `POST ilink/bot/getuploadurl`
//! `{filekey, media_type: 1 image | 2 video | 3 file, to_user_id, rawsize, rawfilemd5 (hex MD5
//! of the plaintext), filesize (the ciphertext's: rawsize padded up to the next 16), no_need_thumb:
//! true, aeskey (hex)}` → `{upload_param, upload_full_url?}`. Then the ciphertext (AES-128-ECB,
//! PKCS#7), encrypted as it is read from the outbox's copy, `POST`ed (not `PUT`: "the old PUT
//! for upload_full_url caused 404s", hermes-agent) as `application/octet-stream` with no
//! credential to `upload_full_url`, else `{cdn_base}/upload?encrypted_query_param=
//! <upload_param>&filekey=<filekey>`; a full URL off the CDN's origins is not used (the
//! built one is). The file is read twice, once for its MD5 and once to send: `getuploadurl`
//! wants the digest before the bytes. The answer's **`x-encrypted-param` header** is the
//! file's download parameter; a 4xx with `x-error-message` fails the message, a 5xx (or no
//! header) is retried.
//!
//! **Post.** The text first, as the text messages a message without files makes (a caption is
//! "a separate TEXT item before" the file, each request one item: `send.ts`). Then per file
//! one `sendmessage` with one item: a photo an image (type 2, `mid_size` the ciphertext's
//! size), a video a video (type 5, `video_size`), anything else a file (type 4, `file_name`,
//! `len` the plaintext's size as a string): a voice note goes as a file, as Hermes sends every
//! voice (iLink's voice bubble is unproven and the clients disagree on its codec fields).
//! `media.aes_key` is base64 of the key's **hex** (base64 of the raw bytes shows as a grey box).
//!
//! **Exactly once.** File `n` is posted under `client_id` `hermes-{message id}-file{n}`, fixed
//! by the outbox message, and iLink posts one message per `client_id` (the text's pieces keep
//! theirs, as for a text message). The process remembers, per message, the files on the CDN
//! and those confirmed ([`Progress`](crate::gateway::send::progress::Progress)), so a retry
//! after a failure uploads nothing twice and skips what was posted. What a crash between an
//! upload and its post's answer costs: the next life uploads the file again under a new key
//! (the first upload an **orphan** on the CDN, shown to no one) and posts under the same
//! `client_id`, which iLink drops if the first post was made: at most one orphan upload per
//! file, never a second post.
//! Nothing of an upload is kept in the outbox.
//!
//! **Limits** ([`LIMITS`]): iLink documents none. Ten files (as the other platforms), each up
//! to 100 MiB (Tencent's plugin's cap on the media it handles), the text as long as a text
//! message may be.

use futures_util::StreamExt;
use md5::{Digest, Md5};
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE};
use serde_json::{json, Value};

use super::{classify, Sender, Target, MAX_TEXT};
use crate::gateway::send::classify::{json, local, reply};
use crate::gateway::send::exchange::exchange;
use crate::gateway::send::upload;
use crate::gateway::send::{Answer, FileKind, FileLimits, OutFile, Outgoing};
use crate::platform::weixin::cdn_cipher::{padded_len, Encryptor, Key};
use crate::platform::weixin::fetch::cdn_url;

/// Tencent's plugin's cap on a file (`WEIXIN_MEDIA_MAX_BYTES`).
const MAX_FILE: u64 = 100 * 1024 * 1024;

pub(in crate::platform::weixin) const LIMITS: FileLimits = FileLimits {
    max_files: 10,
    max_bytes: MAX_FILE,
    max_caption: MAX_TEXT,
};

/// A file on the CDN: its download parameter, key and sizes.
#[derive(Clone)]
pub(in crate::platform::weixin) struct Uploaded {
    param: String,
    key: Key,
    rawsize: u64,
    filesize: u64,
}

impl Sender {
    /// The text, then every file of `msg` not yet confirmed, in order.
    pub(super) async fn post_files(&self, msg: &Outgoing<Target>) -> Answer {
        let peer = &msg.target.0;
        let first = if msg.text.is_empty() {
            format!("hermes-{}-file0", msg.id)
        } else {
            match self.pieces(msg).await {
                Answer::Sent { .. } => format!("hermes-{}-0", msg.id),
                other => return other,
            }
        };
        let mut done = self.progress.get(&msg.id, msg.files.len());
        for (n, file) in msg.files.iter().enumerate().skip(done.posted) {
            let uploaded = match done.uploads[n].clone() {
                Some(uploaded) => uploaded,
                None => match self.upload(peer, file).await {
                    Ok(uploaded) => {
                        done.uploads[n] = Some(uploaded.clone());
                        self.progress.put(&msg.id, &done);
                        uploaded
                    }
                    Err(answer) => return self.stopped(&msg.id, answer),
                },
            };
            let client_id = format!("hermes-{}-file{n}", msg.id);
            match self.deliver(peer, item(file, &uploaded), &client_id).await {
                Answer::Sent { .. } => {
                    done.posted = n + 1;
                    self.progress.put(&msg.id, &done);
                }
                answer => return self.stopped(&msg.id, answer),
            }
        }
        self.progress.forget(&msg.id);
        Answer::Sent {
            platform_id: Some(first),
        }
    }

    /// An attempt that ends early: what it did is kept for the retry, unless there is none.
    fn stopped(&self, id: &str, answer: Answer) -> Answer {
        if matches!(answer, Answer::Failed(_)) {
            self.progress.forget(id);
        }
        answer
    }

    /// `file` onto the CDN, encrypted under a new key, for `peer`.
    async fn upload(&self, peer: &str, file: &OutFile) -> Result<Uploaded, Answer> {
        let rawfilemd5 = md5_of(file).await?;
        let fresh = || {
            Key::random()
                .map_err(|_| Answer::Retry { after: None, reply: local("the system's random source failed") })
        };
        let (key, filekey) = (fresh()?, fresh()?.hex());
        let filesize = padded_len(file.bytes);
        let media_type = match file.kind {
            FileKind::Photo => 1,
            FileKind::Video => 2,
            _ => 3,
        };
        let payload = json!({
            "filekey": filekey, "media_type": media_type, "to_user_id": peer,
            "rawsize": file.bytes, "rawfilemd5": rawfilemd5, "filesize": filesize,
            "no_need_thumb": true, "aeskey": key.hex(),
        });
        let request = self
            .account
            .request(&self.http, "ilink/bot/getuploadurl", payload)
            .map_err(|e| Answer::Retry { after: None, reply: local(crate::error_chain::one_line(&e)) })?;
        let r = exchange(request).await.map_err(nothing_posted)?;
        if !matches!(classify(r.status, &r.body), Answer::Sent { .. }) {
            return Err(classify(r.status, &r.body));
        }
        let v: Value = json(&r.body);
        let url = self.upload_url(&v, &filekey).ok_or_else(|| {
            Answer::Failed(reply(r.status, None, Some("getuploadurl gave no upload_param or upload_full_url on the CDN")))
        })?;
        let param = self.post_ciphertext(&url, file, &key, filesize).await?;
        Ok(Uploaded {
            param,
            key,
            rawsize: file.bytes,
            filesize,
        })
    }

    /// Where the ciphertext goes: the server's full URL if it is on the CDN's origins, else
    /// the one built from `upload_param` ("The client prefers `upload_full_url`").
    fn upload_url(&self, v: &Value, filekey: &str) -> Option<String> {
        let full = v["upload_full_url"].as_str().map(str::trim).filter(|u| !u.is_empty());
        if let Some(full) = full {
            match reqwest::Url::parse(full) {
                Ok(url) if self.cdn_origins.allows(&url) => return Some(full.to_owned()),
                _ => tracing::warn!("getuploadurl's upload_full_url is not on the CDN; the upload_param is used"),
            }
        }
        let param = v["upload_param"].as_str().filter(|p| !p.is_empty() && p.len() <= 4096)?;
        Some(cdn_url(
            &self.cdn_base,
            "upload",
            &[("encrypted_query_param", param), ("filekey", filekey)],
        ))
    }

    /// `POST url` with `file` encrypted as it is read; the `x-encrypted-param` the CDN answers.
    async fn post_ciphertext(
        &self,
        url: &str,
        file: &OutFile,
        key: &Key,
        filesize: u64,
    ) -> Result<String, Answer> {
        let opened = tokio::fs::File::open(&file.path).await.map_err(|e| unreadable(file, &e))?;
        let body = encrypted(opened, key);
        let request = self
            .http
            .post(url)
            .header(CONTENT_TYPE, "application/octet-stream")
            .header(CONTENT_LENGTH, filesize)
            .timeout(upload::timeout_for(filesize))
            .body(reqwest::Body::wrap_stream(body));
        let r = exchange(request).await.map_err(nothing_posted)?;
        let said = r
            .headers
            .get("x-error-message")
            .and_then(|v| v.to_str().ok())
            .map(|m| crate::safe_text::clip(m, 200));
        if (400..500).contains(&r.status) {
            return Err(Answer::Failed(reply(r.status, None, Some(&said.unwrap_or_else(|| "the CDN refused the upload".into())))));
        }
        let param = r.headers.get("x-encrypted-param").and_then(|v| v.to_str().ok());
        match param {
            Some(p) if r.status == 200 && !p.is_empty() && p.len() <= 4096 => Ok(p.to_owned()),
            _ => Err(Answer::Retry {
                after: None,
                reply: reply(r.status, None, Some(&said.unwrap_or_else(|| "the CDN gave no x-encrypted-param".into()))),
            }),
        }
    }
}

/// An upload or `getuploadurl` whose answer was lost posted nothing: it is retried whatever
/// the message's policy (at most an orphan upload).
fn nothing_posted(answer: Answer) -> Answer {
    match answer {
        Answer::Unknown(why) => Answer::Retry {
            after: None,
            reply: local(format!("an upload's answer was lost ({why}); uploading again")),
        },
        other => other,
    }
}

fn unreadable(file: &OutFile, e: &std::io::Error) -> Answer {
    Answer::Failed(local(format!(
        "the file {:?} to send cannot be read from the outbox: {e}",
        file.name
    )))
}

/// `opened`'s bytes encrypted as they are read, the last block padded at the end.
fn encrypted(
    opened: tokio::fs::File,
    key: &Key,
) -> impl futures_util::Stream<Item = std::io::Result<axum::body::Bytes>> + Send + 'static {
    let state = (Box::pin(crate::media::file_chunks(opened)), Some(Encryptor::new(key)));
    futures_util::stream::unfold(state, |(mut plain, mut encryptor)| async move {
        let e = encryptor.as_mut()?;
        let out = match plain.next().await {
            Some(Ok(chunk)) => Ok(e.update(&chunk)),
            Some(Err(err)) => {
                encryptor = None;
                Err(err)
            }
            None => {
                let last = e.finish();
                encryptor = None;
                Ok(last)
            }
        };
        Some((out.map(axum::body::Bytes::from), (plain, encryptor)))
    })
}

/// The hex MD5 of `file`'s bytes, read in pieces.
async fn md5_of(file: &OutFile) -> Result<String, Answer> {
    let opened = tokio::fs::File::open(&file.path).await.map_err(|e| unreadable(file, &e))?;
    let mut chunks = std::pin::pin!(crate::media::file_chunks(opened));
    let mut md5 = Md5::new();
    while let Some(chunk) = chunks.next().await {
        md5.update(chunk.map_err(|e| unreadable(file, &e))?);
    }
    Ok(md5.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// File `file`'s item: an image, a video, or a file.
fn item(file: &OutFile, up: &Uploaded) -> Value {
    let media = json!({
        "encrypt_query_param": up.param,
        "aes_key": up.key.aes_key_field(),
        "encrypt_type": 1,
    });
    match file.kind {
        FileKind::Photo => json!({"type": 2, "image_item": {"media": media, "mid_size": up.filesize}}),
        FileKind::Video => json!({"type": 5, "video_item": {"media": media, "video_size": up.filesize}}),
        _ => json!({"type": 4, "file_item": {
            "media": media, "file_name": file.name, "len": up.rawsize.to_string(),
        }}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_its_item_and_the_key_as_base64_of_its_hex() {
        let key = Key::from_hex("000102030405060708090a0b0c0d0e0f").unwrap();
        let up = Uploaded { param: "P".into(), key, rawsize: 20, filesize: 32 };
        let file = |kind| OutFile {
            path: "/x".into(),
            name: "a.pdf".into(),
            mime: "application/pdf".into(),
            kind,
            bytes: 20,
        };
        let photo = item(&file(FileKind::Photo), &up);
        assert_eq!(photo["type"], 2);
        assert_eq!(photo["image_item"]["mid_size"], 32);
        assert_eq!(
            photo["image_item"]["media"],
            json!({"encrypt_query_param": "P", "aes_key": "MDAwMTAyMDMwNDA1MDYwNzA4MDkwYTBiMGMwZDBlMGY=", "encrypt_type": 1})
        );
        assert_eq!(item(&file(FileKind::Video), &up)["video_item"]["video_size"], 32);
        for kind in [FileKind::Document, FileKind::Voice, FileKind::Audio] {
            let f = item(&file(kind), &up);
            assert_eq!((f["type"].as_i64(), f["file_item"]["len"].as_str()), (Some(4), Some("20")));
            assert_eq!(f["file_item"]["file_name"], "a.pdf");
        }
    }
}

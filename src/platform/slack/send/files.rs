//! A Slack message's files, through the external upload flow (docs.slack.dev,
//! `files.getUploadURLExternal` "Usage info"; `files.upload` is retired):
//! 1. `POST /api/files.getUploadURLExternal` with `filename` and `length` ("Size in bytes of
//!    the file being uploaded"), as a form (the one content type both of Slack's method pages
//!    list) → `{"ok": true, "upload_url", "file_id"}`; once per file.
//! 2. `POST upload_url` with the bytes: "Files can be sent as raw bytes or can be multipart
//!    form encoded. Slack will return HTTP 200 if the upload is successful; a non-200
//!    response indicates a failure." Raw, streamed from the outbox's copy with its type and
//!    length, and no token: the URL is the capability, and the docs' example sends none.
//! 3. `POST /api/files.completeUploadExternal` with `files` ("Array of file ids and their
//!    corresponding (optional) titles"), `channel_id` ("If not specified the file will be
//!    private"), `initial_comment` ("The message text introducing the file") and, for a
//!    reply, `thread_ts` (the parent's ts): one post with every file. Its answer names the
//!    files, not the message, so the message gets no platform id.
//!
//! **The upload URL is Slack's word**, and followed only to Slack's own origins: its file
//! host (`files.slack.com`) and the adapter's API base (a mock in tests), as inbound files
//! are fetched only from the platform's hosts (`media/download.rs`). A URL elsewhere fails
//! the message before a byte is sent.
//!
//! **What a retry costs.** Steps 1 and 2 post nothing, and an upload never completed "will be
//! discarded" by Slack: an attempt that fails or loses an answer there is retried whatever
//! the message's policy, from step 1. Step 3 is the post, and Slack documents no key for it
//! ("This method can only be called once" per upload, and nothing on what a repeat does).
//! So a `completeUploadExternal` whose answer was lost may or may not have shared the files:
//! the message's policy decides, as for text. At-most-once leaves it `unknown`; at-least-once
//! uploads the files again and shares them again, which posts them twice if the first one
//! went through. A gateway killed while any of it was under way leaves the message `sending`,
//! which at-most-once reports as `unknown` in its next life.
//!
//! **Limits** ([`LIMITS`]). Slack's method pages give no number of files per call and no byte
//! limit; a workspace may refuse large files (`file_upload_size_restricted`). Files per
//! message: 10, under the 14 a `completeUploadExternal` was seen to take before it answered
//! `internal_error` (slackapi/python-slack-sdk#1653), and what Discord takes. Bytes per file:
//! 1 GB, the most Slack takes of any file (Slack's help centre; not in the API reference: an
//! inference, as slackapi/bolt-python#1059 "I can share 1GB files throughout Slack"). The
//! caption is a message text, held to the same 4,000 characters as `chat.postMessage`'s.

use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use reqwest::Url;
use serde_json::{json, Value};

use super::{classify, Sender, Target, MAX_TEXT};
use crate::gateway::send::classify::{by_status, json, local, reply};
use crate::gateway::send::exchange::{exchange, Response};
use crate::gateway::send::upload;
use crate::gateway::send::{Answer, FileLimits, OutFile, Outgoing};
use super::super::fetch::FILE_HOST;
use crate::media::download::Origins;

/// 1 GB, read as 10^9 bytes.
const MAX_FILE: u64 = 1_000_000_000;

pub(super) const LIMITS: FileLimits = FileLimits {
    max_files: 10,
    max_bytes: MAX_FILE,
    max_caption: MAX_TEXT,
};

/// The origins an upload URL may be on, for an adapter whose Web API is at `api_base`.
pub(super) fn upload_origins(api_base: &str) -> Origins {
    Origins::of([FILE_HOST, api_base])
}

impl Sender {
    /// Every file of `msg` uploaded, then shared in one post.
    pub(super) async fn post_files(&self, msg: &Outgoing<Target>, auth: HeaderValue) -> Answer {
        let mut listed = Vec::with_capacity(msg.files.len());
        for file in &msg.files {
            let (url, id) = match self.upload_url(file, &auth).await {
                Ok(got) => got,
                Err(answer) => return nothing_posted(answer),
            };
            if let Err(answer) = self.upload(url, file).await {
                return nothing_posted(answer);
            }
            listed.push(json!({"id": id, "title": file.name}));
        }
        let mut body = json!({"files": listed, "channel_id": msg.target.0});
        if !msg.text.is_empty() {
            body["initial_comment"] = json!(msg.text);
        }
        if let Some(thread) = &msg.reply_to {
            body["thread_ts"] = json!(thread);
        }
        let request = self
            .http
            .post(format!("{}/api/files.completeUploadExternal", self.api_base))
            .header(AUTHORIZATION, auth)
            .json(&body);
        match exchange(request).await {
            Ok(r) => classify(r.status, &r.headers, &r.body),
            Err(answer) => answer,
        }
    }

    /// Step 1: where to upload `file`, and its id.
    async fn upload_url(
        &self,
        file: &OutFile,
        auth: &HeaderValue,
    ) -> Result<(Url, String), Answer> {
        let length = file.bytes.to_string();
        let form = form(&[("filename", &file.name), ("length", &length)]);
        let request = self
            .http
            .post(format!("{}/api/files.getUploadURLExternal", self.api_base))
            .header(AUTHORIZATION, auth.clone())
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form);
        let v = web_api(exchange(request).await?)?;
        let (Some(url), Some(id)) = (v["upload_url"].as_str(), v["file_id"].as_str()) else {
            let m = "files.getUploadURLExternal answered ok with no upload_url or file_id";
            return Err(Answer::Failed(local(m)));
        };
        let url = Url::parse(url).map_err(|_| {
            Answer::Failed(local("Slack's upload_url is not a URL; the file was not sent"))
        })?;
        if !self.upload_origins.allows(&url) {
            let host: String = url.host_str().unwrap_or("none").chars().take(80).collect();
            let m = format!(
                "Slack's upload_url is not on Slack's own hosts ({host}), so the file was not \
                 sent there"
            );
            return Err(Answer::Failed(local(m)));
        }
        Ok((url, id.to_owned()))
    }

    /// Step 2: the bytes to `url`.
    async fn upload(&self, url: Url, file: &OutFile) -> Result<(), Answer> {
        let request = self
            .http
            .post(url)
            .header(CONTENT_TYPE, file.mime.as_str())
            .header(CONTENT_LENGTH, file.bytes)
            .timeout(upload::timeout_for(file.bytes))
            .body(upload::body(file).await?);
        let r = exchange(request).await?;
        if r.status == 200 {
            return Ok(());
        }
        // The upload service's answer is not the Web API's: its status is what it says.
        let why = format!("Slack's upload service answered HTTP {}", r.status);
        Err(by_status(r.status, &r.headers, reply(r.status, None, Some(&why))))
    }
}

/// A Web API answer that must be `ok`: its JSON, or what to do instead.
fn web_api(r: Response) -> Result<Value, Answer> {
    match classify(r.status, &r.headers, &r.body) {
        Answer::Sent { .. } => Ok(json(&r.body)),
        other => Err(other),
    }
}

/// An answer from steps 1 or 2, where nothing is posted: one that leaves the outcome unknown
/// there is only a lost upload, so it is retried whatever the policy.
fn nothing_posted(answer: Answer) -> Answer {
    match answer {
        Answer::Unknown(why) => Answer::Retry {
            after: None,
            reply: local(format!(
                "no answer while uploading ({why}); nothing was shared, uploading again"
            )),
        },
        other => other,
    }
}

/// `pairs` as an `application/x-www-form-urlencoded` body.
fn form(pairs: &[(&str, &str)]) -> String {
    let mut url = Url::parse("http://form.invalid/").expect("a fixed URL parses");
    url.query_pairs_mut().extend_pairs(pairs);
    url.query().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests;

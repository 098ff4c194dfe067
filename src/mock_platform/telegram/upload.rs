//! The Bot API's methods that post a file (<https://core.telegram.org/bots/api#sending-files>):
//! `sendPhoto`, `sendDocument`, `sendAudio`, `sendVoice`, `sendVideo` and `sendAnimation`,
//! each taking the file in the field named after it (`photo`, `document`, ...) "using
//! multipart/form-data in the usual way that files are uploaded via the browser", with
//! `chat_id`, an optional `caption` ("0-1024 characters after entities parsing") and the same
//! `reply_parameters` as `sendMessage`. They run through the same machinery as `sendMessage`
//! (`send.rs`): the attempt log, the armed [`SendFault`](crate::mock_platform::SendFault), the
//! record (with the file as a [`PostedFile`](crate::mock_platform::PostedFile)); Telegram has
//! no dedupe key, so a repeat is a second message.
//!
//! The answer is the sent `Message` with the file's object (`photo`, `document`, ...) as the
//! docs shape it. The mock decodes no media, so a width, height or duration the docs require
//! is a placeholder (1 and 0). The file is kept, so `getFile` and the file server give it back.
//!
//! Only uploads are taken: a `file_id` or URL in place of the file (the other two ways of
//! "Sending files") is answered as an identifier Telegram does not know.

use serde_json::{json, Value};

use super::super::multipart::{FilePart, Form};
use super::super::post::{Platform, SendAttempt, Target};
use super::super::post_record::PostRecord;
use super::super::reply::{Answer, Reply};
use super::super::send_attempt::{attempted, struck_before};
use super::answers::{self, UNAUTHORIZED};
use super::params::Params;
use super::send::{self, BotApi};
use super::state::TelegramState;

/// "Sending files": "10 MB max size for photos"; MB read as 10^6 bytes, as `files.rs` reads
/// the download limit.
const MAX_PHOTO: usize = 10 * 1000 * 1000;
/// "50 MB for other files" (sendDocument: "Bots can currently send files of any type of up to
/// 50 MB in size"; sendAudio, sendVideo, sendVoice and sendAnimation say the same).
const MAX_FILE: usize = 50 * 1000 * 1000;
/// Each method's `caption`: "0-1024 characters after entities parsing".
const MAX_CAPTION: usize = 1024;

/// Which kind of file a method posts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Photo,
    Document,
    Audio,
    Voice,
    Video,
    Animation,
}

impl Kind {
    /// The upload method `method` names (in any case, as every Bot API method), if it is one.
    pub(crate) fn of(method: &str) -> Option<Kind> {
        Some(match method.to_ascii_lowercase().as_str() {
            "sendphoto" => Kind::Photo,
            "senddocument" => Kind::Document,
            "sendaudio" => Kind::Audio,
            "sendvoice" => Kind::Voice,
            "sendvideo" => Kind::Video,
            "sendanimation" => Kind::Animation,
            _ => return None,
        })
    }

    /// The parameter that carries the file, which is also the `Message` field that shows it.
    fn field(self) -> &'static str {
        match self {
            Kind::Photo => "photo",
            Kind::Document => "document",
            Kind::Audio => "audio",
            Kind::Voice => "voice",
            Kind::Video => "video",
            Kind::Animation => "animation",
        }
    }

    /// The folder of the file's `file_path`, and the extension when its name has none, as the
    /// Bot API's own paths look (`photos/file_1.jpg`, `music/file_2.mp3`).
    fn storage(self) -> (&'static str, &'static str) {
        match self {
            Kind::Photo => ("photos", "jpg"),
            Kind::Document => ("documents", "bin"),
            Kind::Audio => ("music", "mp3"),
            Kind::Voice => ("voice", "oga"),
            Kind::Video => ("videos", "mp4"),
            Kind::Animation => ("animations", "mp4"),
        }
    }

    fn max_bytes(self) -> usize {
        match self {
            Kind::Photo => MAX_PHOTO,
            _ => MAX_FILE,
        }
    }

    /// The `Message` field for the stored file: `PhotoSize` array, `Document`, `Audio`,
    /// `Voice`, `Video` or `Animation`, with the fields the docs require.
    fn object(self, file_id: &str, unique_id: &str, part: &FilePart) -> Value {
        let mut object = json!({
            "file_id": file_id,
            "file_unique_id": unique_id,
            "file_size": part.bytes.len(),
        });
        if self == Kind::Photo {
            object["width"] = json!(1);
            object["height"] = json!(1);
            return json!([object]);
        }
        if matches!(self, Kind::Video | Kind::Animation) {
            object["width"] = json!(1);
            object["height"] = json!(1);
        }
        if self != Kind::Document {
            object["duration"] = json!(0);
        }
        if let (Some(name), true) = (&part.filename, self != Kind::Voice) {
            object["file_name"] = json!(name);
        }
        if let Some(mime) = &part.content_type {
            object["mime_type"] = json!(mime);
        }
        object
    }
}

/// A body over what the mock reads for an upload, as the Bot API refuses a file over its
/// limit.
pub(crate) fn too_large() -> Answer {
    answers::error(413, "Request Entity Too Large")
}

pub(crate) fn handle(
    kind: Kind,
    token_ok: bool,
    params: &Params<'_>,
    form: Option<&Form>,
    state: &TelegramState,
    posts: &PostRecord,
) -> Reply {
    let chat = params.get("chat_id").unwrap_or_default();
    attempted(posts, Platform::Telegram, Target::Chat, chat, |attempt| {
        if !token_ok {
            return Reply::Answer(answers::error(401, UNAUTHORIZED));
        }
        if let Some(refused) = struck_before(posts, attempt, &BotApi) {
            return refused;
        }
        let checked = match check(kind, params, form, state) {
            Ok(checked) => checked,
            Err(answer) => return Reply::Answer(answer),
        };
        post(kind, checked, state, posts, attempt)
    })
}

struct Checked<'f> {
    chat_id: i64,
    caption: String,
    reply_to: Option<i64>,
    file: &'f FilePart,
}

/// The file first (the server builds the message's content before it looks up the chat),
/// then the caption, the chat and the message replied to.
fn check<'f>(
    kind: Kind,
    params: &Params<'_>,
    form: Option<&'f Form>,
    state: &TelegramState,
) -> Result<Checked<'f>, Answer> {
    let field = kind.field();
    let Some(file) = form.and_then(|form| form.file(field)) else {
        return Err(match params.get(field) {
            Some(_) => answers::bad_request("wrong file identifier/HTTP URL specified"),
            None => answers::bad_request(&format!("there is no {field} in the request")),
        });
    };
    if file.bytes.is_empty() {
        return Err(answers::bad_request("file must be non-empty"));
    }
    if file.bytes.len() > kind.max_bytes() {
        // The docs give the limits but not the answers: a photo over its 10 MB gets the
        // error Telegram's servers give one (webogram#1011), a file over 50 MB the 413 the
        // Bot API answers a request it will not take.
        return Err(match kind {
            Kind::Photo => answers::bad_request("PHOTO_SAVE_FILE_INVALID"),
            _ => too_large(),
        });
    }
    let caption = params.get("caption").unwrap_or_default().trim().to_owned();
    if caption.chars().count() > MAX_CAPTION {
        return Err(answers::bad_request("message caption is too long"));
    }
    let chat_id = send::chat(params, state)?;
    let reply_to = send::reply_to(params, state, chat_id)?;
    Ok(Checked {
        chat_id,
        caption,
        reply_to,
        file,
    })
}

/// Keeps the file, stores the bot's message in the chat and records the post.
fn post(
    kind: Kind,
    checked: Checked<'_>,
    state: &TelegramState,
    posts: &PostRecord,
    attempt: &mut SendAttempt,
) -> Reply {
    let file = checked.file;
    attempt.target_id = checked.chat_id.to_string();
    let (folder, default_ext) = kind.storage();
    let ext = extension(file.filename.as_deref()).unwrap_or(default_ext);
    let (file_id, unique_id) = state.files.add(folder, ext, file.bytes.clone());
    let object = kind.object(&file_id, &unique_id, file);
    let caption = &checked.caption;
    let (message_id, message) = state.bot_message_with(checked.chat_id, checked.reply_to, |m| {
        m[kind.field()] = object;
        if !caption.is_empty() {
            m["caption"] = json!(caption);
        }
    });
    let post = send::chat_post(
        attempt,
        checked.caption,
        checked.reply_to,
        vec![file.posted()],
    );
    send::record(posts, attempt, post, message_id, message)
}

/// A file name's extension, when it is a short alphanumeric one a `file_path` can carry.
fn extension(filename: Option<&str>) -> Option<&str> {
    let (_, ext) = filename?.rsplit_once('.')?;
    let plain = !ext.is_empty() && ext.len() <= 5 && ext.bytes().all(|b| b.is_ascii_alphanumeric());
    plain.then_some(ext)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_upload_method_is_known_in_any_case_and_nothing_else_is() {
        assert_eq!(Kind::of("SENDPHOTO"), Some(Kind::Photo));
        assert_eq!(Kind::of("sendVoice"), Some(Kind::Voice));
        assert_eq!(Kind::of("sendMessage"), None);
        assert_eq!(Kind::Photo.max_bytes(), 10_000_000);
        assert_eq!(Kind::Animation.max_bytes(), 50_000_000);
    }

    #[test]
    fn the_message_field_has_what_the_docs_require_of_each_kind() {
        let part = FilePart {
            name: "voice".into(),
            filename: Some("v.ogg".into()),
            content_type: Some("audio/ogg".into()),
            bytes: vec![1, 2, 3],
        };
        let photo = Kind::Photo.object("f", "u", &part);
        assert_eq!(photo[0]["file_size"], 3);
        assert!(photo[0]["width"].is_number() && photo[0]["height"].is_number());
        let voice = Kind::Voice.object("f", "u", &part);
        assert_eq!(
            (&voice["duration"], &voice["mime_type"]),
            (&json!(0), &json!("audio/ogg"))
        );
        assert!(voice.get("file_name").is_none());
        let video = Kind::Video.object("f", "u", &part);
        assert!(video["width"].is_number() && video["duration"].is_number());
        assert_eq!(Kind::Document.object("f", "u", &part)["file_name"], "v.ogg");
        assert_eq!(extension(Some("a.tar.gz")), Some("gz"));
        assert_eq!(extension(Some("no-extension")), None);
    }
}

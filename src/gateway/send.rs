//! Sending to a platform: what every platform's sender does ([`Post`]), what one attempt
//! carries ([`Outgoing`]), and how the platform answered ([`Answer`]).
//!
//! The outbox decides *whether* to try again; a sender only says what the platform said,
//! classified so that the decision is the same for every platform: sent (with the platform's
//! message id), retry later (network trouble, 5xx, 429 with its wait), failed for good (bad
//! target, no permission, too large), or unknown (the request went out and no answer came
//! back, so it may or may not have been posted).
//!
//! Each platform's sender and target live in its wing (`platform/<kind>/`). What they share
//! is here: `exchange` is one HTTP request and what the transport says when no answer came,
//! `classify` reads what the platforms' answers have in common, `split` cuts a long reply
//! into pieces for a platform that takes less, and `target` holds the rules every platform's
//! ids follow.

pub(crate) mod classify;
pub(crate) mod exchange;
pub(crate) mod progress;
pub(crate) mod split;
pub(crate) mod target;
pub(crate) mod upload;

use std::fmt;
use std::future::Future;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One platform's way to post one adapter's messages: built from the adapter's settings by
/// its wing, driven by the adapter's outbox worker. Cheap to share; one request at a time or
/// many, as the caller likes.
pub trait Post: Send + Sync + 'static {
    /// Where a message goes on this platform, read from the part of `--to` after the adapter
    /// name as the platform spells a target (`FromStr`), and written back the same way.
    type Target: Clone
        + fmt::Debug
        + fmt::Display
        + std::str::FromStr<Err = TargetError>
        + PartialEq
        + Eq
        + Send
        + Sync;

    /// Whether a reply to `target` carries a sequence number that is fixed when the message
    /// is queued, so that every attempt repeats it and the platform drops a repeat. A message
    /// with files holds one number per file (each file is a post of its own): `seq` to
    /// `seq + files - 1`.
    fn numbers_replies(_target: &Self::Target) -> bool {
        false
    }

    /// Whether `target` takes files, where the platform's sender posts files at all
    /// ([`Post::FILES`]): a message with files to a target that takes none is refused when
    /// it is queued.
    fn takes_files(_target: &Self::Target) -> bool {
        true
    }

    /// How the platform counts a text's length against [`Post::max_text`].
    const TEXT_UNIT: TextUnit = TextUnit::Chars;

    /// The longest text the platform takes, in [`Post::TEXT_UNIT`]s, so a caller can refuse
    /// a longer one before it is queued.
    fn max_text(&self) -> usize;

    /// The longest text the platform posts as one message: less than [`Post::max_text`] where
    /// the sender posts a long text as several messages (of which only the first can be a
    /// reply). What a caller that splits by itself (an agent's answer) splits to.
    fn max_piece(&self) -> usize {
        self.max_text()
    }

    /// Whether the platform itself drops a second send of `msg`, so that a send whose answer
    /// was lost can be repeated without posting twice.
    fn dedupes(&self, msg: &Outgoing<Self::Target>) -> bool;

    /// Post `msg` once and say how it went. The second value, when given, is how long to
    /// wait before the next request to the same target (a platform says so when a rate-limit
    /// bucket is spent); it holds whatever the answer, and a `Retry`'s own `after` is
    /// separate.
    fn send(
        &self,
        msg: &Outgoing<Self::Target>,
    ) -> impl Future<Output = (Answer, Option<Duration>)> + Send;

    /// How long the platform shows a typing indicator after one request for it, when it has
    /// one: an agent's turn asks for it again before it lapses.
    const TYPING_LASTS: Option<Duration> = None;

    /// What the platform takes of files in one message, when its sender posts files: a
    /// message whose files it cannot take is refused when it is queued, not at its upload.
    const FILES: Option<FileLimits> = None;

    /// Show that the bot is typing in `target`. Best effort: nothing is recorded and nothing
    /// retried, and a platform without an indicator ([`Post::TYPING_LASTS`] `None`) does
    /// nothing. Whether it worked, for the log.
    fn typing(&self, _target: &Self::Target) -> impl Future<Output = Result<(), String>> + Send {
        std::future::ready(Ok(()))
    }
}

/// What a platform takes of files in one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLimits {
    /// Files in one message.
    pub max_files: usize,
    /// Bytes of one file.
    pub max_bytes: u64,
    /// The text that goes with files (a caption), in [`Post::TEXT_UNIT`]s.
    pub max_caption: usize,
}

/// What a file is to a platform that posts each kind its own way (a photo shown inline, a
/// voice note played, anything else a document). Read from the bytes, never from a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    Photo,
    Voice,
    Audio,
    Video,
    Document,
}

impl FileKind {
    /// The kind a file of type `mime` is posted as: the still-image types every platform
    /// shows inline are photos, Ogg audio (Opus, what the platforms record) a voice note.
    pub fn of(mime: &str) -> FileKind {
        match mime {
            "image/jpeg" | "image/png" | "image/webp" => FileKind::Photo,
            "audio/ogg" => FileKind::Voice,
            m if m.starts_with("audio/") => FileKind::Audio,
            m if m.starts_with("video/") => FileKind::Video,
            _ => FileKind::Document,
        }
    }
}

/// A file one attempt posts: streamed from `path` (the outbox's own copy) as `name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutFile {
    pub path: std::path::PathBuf,
    /// The name the chat shows.
    pub name: String,
    pub mime: String,
    pub kind: FileKind,
    pub bytes: u64,
}

#[cfg(test)]
impl OutFile {
    /// `bytes` written to `dir/name` and sent as a file of type `mime`: what a sender's tests
    /// post.
    pub(crate) fn written(dir: &std::path::Path, name: &str, mime: &str, bytes: &[u8]) -> Self {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        OutFile {
            path,
            name: name.into(),
            mime: mime.into(),
            kind: FileKind::of(mime),
            bytes: bytes.len() as u64,
        }
    }

    /// The SHA-256 of `bytes`, hex, as the mock records a posted file's.
    pub(crate) fn sha256(bytes: &[u8]) -> String {
        use sha2::Digest;
        crate::media::store::hex(&sha2::Sha256::digest(bytes))
    }
}

/// How a platform counts a text's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextUnit {
    /// Unicode scalar values: `字` and `🦀` are one each.
    Chars,
    /// UTF-16 code units, as JavaScript and Java count: `🦀` is two.
    Utf16,
}

impl TextUnit {
    pub fn len(self, text: &str) -> usize {
        match self {
            TextUnit::Chars => text.chars().count(),
            TextUnit::Utf16 => text.encode_utf16().count(),
        }
    }

    /// The longest start of `text` of at most `max` units, cut between characters.
    pub fn prefix(self, text: &str, max: usize) -> &str {
        let mut used = 0;
        for (i, c) in text.char_indices() {
            used += match self {
                TextUnit::Chars => 1,
                TextUnit::Utf16 => c.len_utf16(),
            };
            if used > max {
                return &text[..i];
            }
        }
        text
    }

    /// The unit's name, plural, for messages.
    pub fn name(self) -> &'static str {
        match self {
            TextUnit::Chars => "characters",
            TextUnit::Utf16 => "UTF-16 code units",
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    #[error("adapter kind {kind:?} cannot send messages yet")]
    CannotSend { kind: String },
    #[error("target {target:?} is not one of {expected} (e.g. {example})")]
    Malformed {
        target: String,
        expected: &'static str,
        example: &'static str,
    },
}

/// One message as one attempt sends it, to a target of type `T` (its platform's). `id` is
/// the outbox's id for the message, stable across attempts and restarts, so a platform that
/// dedupes by a client key sees the same key every time.
#[derive(Clone, Debug)]
pub struct Outgoing<T> {
    pub id: String,
    pub target: T,
    pub text: String,
    /// The platform's id of the message this answers.
    pub reply_to: Option<String>,
    /// The reply's sequence number, fixed when the message was queued, when the platform
    /// numbers replies ([`Post::numbers_replies`]).
    pub seq: Option<u32>,
    /// Files that go with the text, which is then their caption (and may be empty).
    pub files: Vec<OutFile>,
}

/// What the platform itself said about a request, for the message's state and for logs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlatformReply {
    /// The HTTP status, when there was a response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The platform's own error code from the body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    pub message: String,
}

impl fmt::Display for PlatformReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(status) = self.status {
            write!(f, "HTTP {status}: ")?;
        }
        if let Some(code) = self.code {
            write!(f, "code {code}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// How one attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Posted; the platform's id for the message, when it gave one (a duplicate the platform
    /// dropped counts as sent: the first attempt posted it).
    Sent { platform_id: Option<String> },
    /// Not posted; trying again may work, no sooner than `after` when the platform said.
    Retry {
        after: Option<Duration>,
        reply: PlatformReply,
    },
    /// Not posted, and retrying will not change that.
    Failed(PlatformReply),
    /// The request may have reached the platform, and no answer came back.
    Unknown(String),
}

#[cfg(test)]
mod tests {
    use super::TextUnit;

    #[test]
    fn units_count_and_cut_between_characters() {
        let text = "a字🦀b";
        assert_eq!(TextUnit::Chars.len(text), 4);
        assert_eq!(TextUnit::Utf16.len(text), 5);
        assert_eq!(TextUnit::Chars.prefix(text, 3), "a字🦀");
        // The crab takes two code units: two left after "a字" is room for it, one is not.
        assert_eq!(TextUnit::Utf16.prefix(text, 4), "a字🦀");
        assert_eq!(TextUnit::Utf16.prefix(text, 3), "a字");
        assert_eq!(TextUnit::Utf16.prefix(text, 99), text);
        assert_eq!(TextUnit::Chars.prefix(text, 0), "");
    }
}

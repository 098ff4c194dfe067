//! A message's files made local before the agent gets it: each item fetched into the media
//! store with the adapter's credentials, and the message rewritten to name the stored file.
//!
//! Hermes 0.19.0 takes the Relay's `media_urls` as paths of files it can read; a platform URL
//! there is worse than nothing (a Telegram file URL holds the bot's token, and with vision on
//! Hermes drops a URL without a word). So after this an item's `url` is the stored file's path
//! or the item is gone, and what could not be fetched is said in the text: the agent is never
//! left to guess that a photo was sent. A text document is also put into the text, as Hermes's
//! own adapters do (`[Content of NAME]:`): over the Relay Hermes tells the model the content is
//! there, and nothing else puts it there.
//!
//! The other way, the files an agent's answer carries become attachments ([`attachments`]).

use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::answer_files::{self, Made};
use crate::gateway::outbox::NewFile;
use crate::media::download::InMemory;
use crate::media::fetch::{Inbound, Item};
use crate::media::store::{self, hex, Store};
use crate::platform::message::MessageType;
use crate::platform::Message;

/// The most of a text document put into the message's text (Hermes's Telegram adapter takes
/// 100 KB).
const MAX_INLINE: u64 = 100 * 1024;

/// `m` with its files fetched: each item's `url` the stored file's path, or the item left out
/// and said in the text. `inbound` is the run's media store, or why it has none.
pub async fn localise(inbound: Result<&Inbound, &str>, mut m: Message) -> Message {
    if m.said.media.is_empty() {
        return m;
    }
    let items = std::mem::take(&mut m.said.media);
    let mut notes = vec![];
    let mut inline = vec![];
    for mut item in items {
        let kind = item.media_type.as_str();
        let fetched = match inbound {
            Ok(inbound) => inbound
                .fetch(
                    &m.adapter,
                    kind,
                    Item {
                        id: item.id.as_deref(),
                        url: item.url.as_deref(),
                        message: m.said.message_id.as_deref(),
                        kind,
                        extra: item.extra.as_deref(),
                    },
                    item.name
                        .as_deref()
                        .filter(|n| !n.contains('/') || n.contains('.')),
                    |_| false,
                )
                .await
                .map_err(|e| e.to_string()),
            Err(why) => Err(format!("the media store is unavailable: {why}")),
        };
        match fetched {
            Ok(stored) => {
                tracing::info!(adapter = %m.adapter, kind, file = %stored.name, bytes = stored.bytes, "fetched a message's file for the agent");
                if item.media_type == MessageType::Document
                    && stored.mime == "text/plain"
                    && stored.bytes <= MAX_INLINE
                {
                    if let Ok(text) = std::fs::read_to_string(&stored.path) {
                        let name = item.name.clone().unwrap_or_else(|| stored.name.clone());
                        inline.push(format!("[Content of {name}]:\n{text}"));
                    }
                }
                item.url = Some(stored.path.display().to_string());
                m.said.media.push(item);
            }
            Err(why) => {
                tracing::warn!(adapter = %m.adapter, kind, reason = %why, "a message's file could not be fetched; the agent is told");
                notes.push(format!("[a {kind} that could not be fetched: {why}]"));
            }
        }
    }
    let mut text = std::mem::take(&mut m.said.text);
    for part in inline.into_iter().chain(notes) {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&part);
    }
    m.said.text = text;
    m
}

/// The files an agent's answer carries ([`answer_files::split`]) as the outbox takes them:
/// an inline image put in the store first, a path opened where [`answer_files::refused`]
/// allows it. What cannot go is said, one note each, never a path the chat would see.
pub(super) async fn attachments(
    store: Option<&Store>,
    home: &Path,
    made: Vec<Made>,
) -> (Vec<NewFile>, Vec<String>) {
    let (mut files, mut notes) = (vec![], vec![]);
    for m in made {
        match m {
            Made::Inline { mime, bytes } => {
                let Some(store) = store else {
                    notes.push(format!("an image of the answer ({mime}) was not posted: the media store is unavailable"));
                    continue;
                };
                let id = hex(&Sha256::digest(&bytes)[..8]);
                let body = InMemory(Some(bytes.into()));
                let opened = match store.put("reply", &id, Some("image"), body).await {
                    Ok(stored) => {
                        let opened = store.open_item(&stored.name).map(|f| (f, stored.name));
                        // Opened first: the outbox copies from the descriptor, whatever the
                        // quota then takes.
                        let _ = store.evict(crate::media::fetch::QUOTA, |_| false);
                        opened
                    }
                    Err(e) => Err(e),
                };
                match opened {
                    Ok((Some(file), name)) => files.push(NewFile {
                        file: Arc::new(file),
                        name: store::shown_name(&name).to_owned(),
                    }),
                    Ok((None, _)) | Err(_) => notes.push(format!(
                        "an image of the answer ({mime}) was not posted: the media store could not keep it"
                    )),
                }
            }
            Made::Path(path) => {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "file".into());
                if let Some(why) = answer_files::refused(&path, home) {
                    tracing::warn!(path = %path.display(), why = %why, "a file the agent's answer named is not sent");
                    notes.push(format!(
                        "a file the agent named, {name}, was not sent: {why}"
                    ));
                    continue;
                }
                match std::fs::File::open(&path) {
                    Ok(file) => files.push(NewFile {
                        file: Arc::new(file),
                        name,
                    }),
                    Err(e) => notes.push(format!(
                        "a file the agent named, {name}, could not be read: {e}"
                    )),
                }
            }
        }
    }
    (files, notes)
}

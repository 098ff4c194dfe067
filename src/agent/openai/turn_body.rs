//! The body of a turn's request, with its photos streamed from the media store as base64.
//!
//! Hermes's API server takes an image only inline, as a data URL in an `image_url` part. Built
//! as one JSON value, a 5 MiB photo was in memory four times over (its bytes, the base64, the
//! value, the serialised body: 26.6 MiB of peak RSS for one photo, docs/benchmarks.md), and the
//! value was kept for every retry of the turn. Here the JSON around the images is serialised
//! once and each image is read from its stored file and encoded as the request is written,
//! for every attempt ([`media::base64_pieces`], as a platform's base64 upload is). The length is
//! known before a byte is sent (base64 is 4 bytes per 3), so the request has a
//! `Content-Length` as any JSON body would.

use std::fs::File;
use std::io::{self, Seek};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use axum::body::Bytes;
use futures_util::{future, stream, Stream, StreamExt};
use serde_json::json;

use crate::media;

use crate::platform::message::MessageType;
use crate::platform::Message;

/// The largest image sent inline as a data URL; a larger one is named by its path.
const MAX_INLINE_IMAGE: u64 = 5 * 1024 * 1024;

/// A request body for one turn, to be sent as often as the turn is asked.
#[derive(Debug)]
pub struct TurnBody {
    parts: Vec<Part>,
    len: u64,
}

#[derive(Clone, Debug)]
enum Part {
    Json(Bytes),
    /// An image's bytes, written as base64: the file was opened when the body was made, so
    /// the store's quota removing it later costs the turn nothing.
    Image(Arc<File>),
}

impl TurnBody {
    /// The body for `message`, whose files are in the media store (`agent::media`): the text,
    /// each photo as an `image_url` part and every other file named by its path on a line of
    /// its own.
    pub fn new(model: &str, message: &Message) -> Self {
        let mut text = message.said.text.clone();
        let mut images = vec![];
        for m in &message.said.media {
            let at = m.url.as_deref().or(m.id.as_deref()).unwrap_or("?");
            if m.media_type == MessageType::Photo {
                if let Some(image) = Image::open(at) {
                    images.push(image);
                    continue;
                }
            }
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!("[{}: {at}]", m.media_type.as_str()));
        }
        let mut body = Self {
            parts: vec![],
            len: 0,
        };
        let head = format!(
            "{{\"model\":{},\"stream\":false,\"messages\":[{{\"role\":\"user\",\"content\":",
            json!(model)
        );
        if images.is_empty() {
            body.json(format!("{head}{}}}]}}", json!(text)));
            return body;
        }
        body.json(format!("{head}[{}", json!({"type": "text", "text": text})));
        for image in images {
            body.json(format!(
                ",{{\"type\":\"image_url\",\"image_url\":{{\"url\":\"data:{};base64,",
                image.mime
            ));
            body.len += image.len.div_ceil(3) * 4;
            body.parts.push(Part::Image(Arc::new(image.file)));
            body.json("\"}}".into());
        }
        body.json("]}]}".into());
        body
    }

    fn json(&mut self, text: String) {
        self.len += text.len() as u64;
        self.parts.push(Part::Json(Bytes::from(text)));
    }

    /// The body's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The body, as written to the agent: the JSON as it is, each image read from its file
    /// (from its start, whatever an earlier attempt read) and encoded as it goes.
    pub fn stream(&self) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
        futures_util::stream::iter(self.parts.clone()).flat_map(|part| match part {
            Part::Json(bytes) => stream::once(future::ready(Ok(bytes))).boxed(),
            Part::Image(file) => match rewound(&file) {
                Ok(file) => media::base64_pieces(media::file_chunks(file)).boxed(),
                // The stream ends with the error; the request fails and the turn is asked
                // again.
                Err(e) => stream::once(future::ready(Err(e))).boxed(),
            },
        })
    }
}

/// `file` read from its start, as a handle of its own (attempts of a turn come one after
/// another, so the offset they share is never read by two at once).
fn rewound(file: &File) -> io::Result<tokio::fs::File> {
    let mut file = file.try_clone()?;
    file.seek(io::SeekFrom::Start(0))?;
    Ok(tokio::fs::File::from_std(file))
}

/// A stored photo to send inline.
struct Image {
    file: File,
    len: u64,
    mime: &'static str,
}

impl Image {
    /// The stored image at `path`, typed by its bytes; `None` when it is not an image the
    /// store kept, or too large to send inline.
    fn open(path: &str) -> Option<Self> {
        let file = File::open(path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() == 0 || meta.len() > MAX_INLINE_IMAGE {
            return None;
        }
        let mut head = [0u8; 64];
        let n = file.read_at(&mut head, 0).ok()?;
        let (mime, _) = crate::media::sniff::sniff(&head[..n]);
        mime.starts_with("image/").then_some(Self {
            file,
            len: meta.len(),
            mime,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::message::{Author, Chat, ChatType, Media, Said};
    use base64::Engine;

    fn message(text: &str, media: Vec<Media>) -> Message {
        Said {
            chat: Chat {
                id: "1".into(),
                chat_type: ChatType::Dm,
                name: None,
            },
            sender: Author {
                id: "5".into(),
                name: None,
                is_bot: false,
                vouched: true,
            },
            thread_id: None,
            message_id: Some("9".into()),
            reply_to_message_id: None,
            message_type: MessageType::Text,
            text: text.into(),
            media,
            answer: None,
        }
        .into_message("chatapp", "tg")
    }

    async fn written(body: &TurnBody) -> Vec<u8> {
        let pieces: Vec<_> = body.stream().collect().await;
        pieces
            .into_iter()
            .flat_map(|b| b.unwrap().to_vec())
            .collect()
    }

    #[tokio::test]
    async fn the_streamed_body_is_the_json_a_value_would_be_with_the_images_inline() {
        let dir = tempfile::tempdir().unwrap();
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        // Not a multiple of 3, and more than two pieces.
        png.extend((0..(2 * 64 * 1024 + 1) as u32).map(|i| (i % 251) as u8));
        let photo = dir.path().join("photo_1_a.png");
        std::fs::write(&photo, &png).unwrap();
        let doc = dir.path().join("document_2_b.pdf");
        std::fs::write(&doc, b"%PDF-1.4").unwrap();
        let media = [(MessageType::Photo, &photo), (MessageType::Document, &doc)]
            .into_iter()
            .map(|(kind, path)| Media {
                media_type: kind,
                id: None,
                url: Some(path.display().to_string()),
                name: None,
                extra: None,
            })
            .collect();
        let body = TurnBody::new("m\"1", &message("hi \"there\"", media));
        // The photo is gone from the store before the request is written: the body still
        // holds it.
        std::fs::remove_file(&photo).unwrap();
        let bytes = written(&body).await;
        assert_eq!(bytes.len() as u64, body.len());
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&png);
        assert_eq!(
            value,
            json!({"model": "m\"1", "stream": false, "messages": [{"role": "user", "content": [
                {"type": "text", "text": format!("hi \"there\"\n[document: {}]", doc.display())},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{b64}")}},
            ]}]})
        );
        assert_eq!(
            written(&body).await,
            bytes,
            "every attempt writes the same body"
        );

        let plain = TurnBody::new("m", &message("just text", vec![]));
        let bytes = written(&plain).await;
        assert_eq!(bytes.len() as u64, plain.len());
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["messages"][0]["content"], "just text");
    }
}

//! `multipart/form-data` bodies (RFC 7578), the way the platforms that take uploads read them:
//! a part with a `filename` in its `Content-Disposition` is a file, any other part is a text
//! field. Telegram's "Sending files" asks for a file "posted using multipart/form-data in the
//! usual way that files are uploaded via the browser", which is exactly that distinction;
//! Discord's "Uploading Files" (docs/reference.mdx) requires every `files[n]` part to carry a
//! `filename`. Which field holds which file, and the limits, are each platform's.
//!
//! The body is already in memory (the server read it whole), so this only splits it.

use std::convert::Infallible;

use super::http::RequestHead;
use super::post::PostedFile;

/// A form's parts, in the order they came.
#[derive(Debug, Default)]
pub(super) struct Form {
    /// The text fields: name and value.
    pub(crate) fields: Vec<(String, String)>,
    pub(crate) files: Vec<FilePart>,
}

/// One part that carried a file.
#[derive(Debug)]
pub(super) struct FilePart {
    /// The form field's `name`.
    pub(crate) name: String,
    pub(crate) filename: Option<String>,
    pub(crate) content_type: Option<String>,
    pub(crate) bytes: Vec<u8>,
}

impl Form {
    /// The first text field named `name`.
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The first file part named `name`.
    pub(crate) fn file(&self, name: &str) -> Option<&FilePart> {
        self.files.iter().find(|file| file.name == name)
    }
}

impl FilePart {
    /// What the send record keeps of it.
    pub(crate) fn posted(&self) -> PostedFile {
        PostedFile::of(
            &self.name,
            self.filename.as_deref(),
            self.content_type.as_deref(),
            &self.bytes,
        )
    }
}

/// Whether the request declares a `multipart/form-data` body.
pub(super) fn is_multipart(head: &RequestHead) -> bool {
    head.header("content-type").is_some_and(|kind| {
        kind.trim_start()
            .to_ascii_lowercase()
            .starts_with("multipart/form-data")
    })
}

/// The form in `body`, or why it is not one (for the platform's own 400): no boundary in the
/// `Content-Type`, a part without a name or with a text value that is not UTF-8, or a body
/// that ends before its closing boundary.
pub(super) async fn parse(head: &RequestHead, body: &[u8]) -> Result<Form, String> {
    let content_type = head.header("content-type").unwrap_or_default();
    let boundary = multer::parse_boundary(content_type).map_err(|e| e.to_string())?;
    let chunk = Ok::<_, Infallible>(body.to_vec());
    let stream = futures_util::stream::once(std::future::ready(chunk));
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut form = Form::default();
    while let Some(field) = multipart.next_field().await.map_err(|e| e.to_string())? {
        let Some(name) = field.name().map(str::to_owned) else {
            return Err("a part has no name".to_owned());
        };
        let filename = field.file_name().map(str::to_owned);
        let content_type = field.content_type().map(|mime| mime.to_string());
        let bytes = field.bytes().await.map_err(|e| e.to_string())?.to_vec();
        if filename.is_some() {
            form.files.push(FilePart {
                name,
                filename,
                content_type,
                bytes,
            });
        } else {
            let value = String::from_utf8(bytes)
                .map_err(|_| format!("the value of field {name:?} is not UTF-8"))?;
            form.fields.push((name, value));
        }
    }
    Ok(form)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(content_type: &str) -> RequestHead {
        let raw = format!("POST /x HTTP/1.1\r\nContent-Type: {content_type}\r\n\r\n");
        super::super::http::parse_head(raw.as_bytes()).unwrap()
    }

    #[tokio::test]
    async fn text_fields_and_files_are_told_apart_by_their_filename() {
        let body: &[u8] =
            b"--b\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n1001\r\n\
            --b\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"a.png\"\r\n\
            Content-Type: image/png\r\n\r\n\x89PNG\r\n--b--\r\n";
        let head = head("multipart/form-data; boundary=b");
        assert!(is_multipart(&head));
        let form = parse(&head, body).await.unwrap();
        assert_eq!(form.field("chat_id"), Some("1001"));
        let photo = form.file("photo").unwrap();
        assert_eq!(photo.filename.as_deref(), Some("a.png"));
        assert_eq!(photo.content_type.as_deref(), Some("image/png"));
        assert_eq!(photo.bytes, b"\x89PNG");
        let posted = photo.posted();
        assert_eq!((posted.field.as_str(), posted.bytes), ("photo", 4));
        assert_eq!(posted.sha256.len(), 64);
    }

    #[tokio::test]
    async fn a_truncated_body_or_a_missing_boundary_is_refused() {
        let truncated = "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx";
        let with_boundary = head("multipart/form-data; boundary=b");
        assert!(parse(&with_boundary, truncated.as_bytes()).await.is_err());
        let without = head("multipart/form-data");
        assert!(parse(&without, b"").await.is_err());
        assert!(!is_multipart(&head("application/json")));
    }
}

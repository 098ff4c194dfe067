//! What a submit asks, checked before anything is copied or queued: its adapter's route
//! (target, text, key) and the platform's limits for files; and whether a retried submit
//! asks for what the first one did.

use super::files::Attachment;
use super::{Address, Message, Outbox, Request, Route, SubmitError, MAX_KEY_LEN};

impl Outbox {
    /// Check `req` against its adapter's route, and say what its target told.
    pub(super) fn validate(&self, req: &Request) -> Result<Address, SubmitError> {
        let route = self
            .route(&req.adapter)
            .ok_or_else(|| SubmitError::UnknownAdapter {
                adapter: req.adapter.clone(),
                known: {
                    let routes = self.read_routes();
                    let mut names: Vec<&str> = routes.keys().map(String::as_str).collect();
                    names.sort_unstable();
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                },
            })?;
        let address = (route.address)(&req.target)?;
        if req.text.trim().is_empty() && req.files.is_empty() {
            return Err(SubmitError::EmptyText);
        }
        if !req.files.is_empty() {
            check_files(&req.adapter, &route, req)?;
            if !address.takes_files {
                return Err(SubmitError::FilesUnsupportedTo {
                    adapter: req.adapter.clone(),
                    target: address.target,
                });
            }
        }
        let len = route.unit.len(&req.text);
        if len > route.max_text {
            return Err(SubmitError::TextTooLong {
                adapter: req.adapter.clone(),
                len,
                max: route.max_text,
                unit: route.unit,
            });
        }
        if req.idempotency_key.is_empty() {
            return Err(SubmitError::MissingKey);
        }
        if req.idempotency_key.chars().count() > MAX_KEY_LEN
            || req.idempotency_key.chars().any(char::is_control)
        {
            return Err(SubmitError::BadKey);
        }
        Ok(address)
    }
}

/// Whether `route` takes `req`'s files: the platform's count, size and caption limits,
/// checked before anything is copied or queued.
pub(super) fn check_files(adapter: &str, route: &Route, req: &Request) -> Result<(), SubmitError> {
    let adapter = adapter.to_owned();
    let Some(limits) = route.files else {
        return Err(SubmitError::FilesUnsupported { adapter });
    };
    if req.files.len() > limits.max_files {
        return Err(SubmitError::TooManyFiles {
            adapter,
            count: req.files.len(),
            max: limits.max_files,
        });
    }
    for f in &req.files {
        let bytes = f.file.metadata().map(|m| m.len()).unwrap_or(0);
        if bytes > limits.max_bytes {
            return Err(SubmitError::FileTooLarge {
                adapter,
                name: f.name.clone(),
                bytes,
                max: limits.max_bytes,
            });
        }
    }
    let len = route.unit.len(&req.text);
    if len > limits.max_caption {
        return Err(SubmitError::CaptionTooLong {
            adapter,
            len,
            max: limits.max_caption,
            unit: route.unit,
        });
    }
    Ok(())
}

/// A retried submit is the same request when it asks for the same thing, under the same
/// policy: a different policy makes a different message (the API answers 409).
/// Whether `req`, whose target its platform writes `target`, asks for what `m` is. A message
/// journalled before targets were stored as their platform writes them holds the text given.
pub(super) fn same_request(m: &Message, req: &Request, target: &str, files: &[Attachment]) -> bool {
    let same_files = m.attachments.len() == files.len()
        && m.attachments
            .iter()
            .zip(files)
            .all(|(a, b)| a.sha256 == b.sha256 && a.name == b.name);
    same_files
        && m.adapter == req.adapter
        && (m.target == target || m.target == req.target)
        && m.text == req.text
        && m.reply_to == req.reply_to
        && m.policy == req.policy
}

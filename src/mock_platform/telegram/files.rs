//! The Bot API's files (<https://core.telegram.org/bots/api#getfile>): `getFile` with a
//! `file_id` answers a `File` (`file_id`, `file_unique_id`, `file_size`, `file_path`), and the
//! file is served at `/file/bot<token>/<file_path>`. A file over 20 MB has no `file_path`
//! ("bots can download files of up to 20MB in size"); an unknown id is `400 Bad Request:
//! invalid file_id`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde_json::{json, Value};

use super::super::reply::Answer;
use super::answers;

/// What `getFile` gives a `file_path` for.
const MAX_DOWNLOAD: usize = 20 * 1000 * 1000;

#[derive(Default)]
pub(crate) struct Files(Mutex<Inner>);

#[derive(Default)]
struct Inner {
    next: u64,
    /// By `file_id`: its path and bytes.
    by_id: HashMap<String, (String, Vec<u8>)>,
    /// Requests of each path, for tests: a file fetched once.
    fetched: HashMap<String, usize>,
}

impl Files {
    /// Keep `bytes` as a new file in `folder` (`photos`, `documents`): its `file_id` and
    /// `file_unique_id`.
    pub(crate) fn add(&self, folder: &str, ext: &str, bytes: Vec<u8>) -> (String, String) {
        let mut inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        inner.next += 1;
        let n = inner.next;
        let id = format!("AgACAgIAAxkBAAI{n:06}");
        let path = format!("{folder}/file_{n}.{ext}");
        inner.by_id.insert(id.clone(), (path, bytes));
        (id, format!("AQAD{n}"))
    }

    /// `getFile`.
    pub(crate) fn get_file(&self, file_id: Option<&str>) -> Answer {
        let inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((path, bytes)) = file_id.and_then(|id| inner.by_id.get(id)) else {
            return answers::bad_request("invalid file_id");
        };
        let mut file: Value = json!({
            "file_id": file_id,
            "file_unique_id": format!("AQAD{}", path.len()),
            "file_size": bytes.len(),
        });
        if bytes.len() <= MAX_DOWNLOAD {
            file["file_path"] = json!(path);
        }
        answers::ok(file)
    }

    /// The file at `path`, or 404.
    pub(crate) fn download(&self, path: &str) -> Answer {
        let mut inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let found = inner
            .by_id
            .values()
            .find(|(p, _)| p == path)
            .map(|(_, bytes)| bytes.clone());
        match found {
            Some(bytes) => {
                *inner.fetched.entry(path.to_owned()).or_default() += 1;
                Answer::bytes("application/octet-stream", bytes)
            }
            None => answers::error(404, "Not Found"),
        }
    }

    /// How many times each file was downloaded.
    pub(crate) fn fetched(&self) -> usize {
        let inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        inner.fetched.values().sum()
    }
}

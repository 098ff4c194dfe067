//! The files the outbox's messages carry. Each message holds its own copy, in
//! `outbox/files/`, made when it is queued: the media store's quota may take the file it was
//! copied from at any time, and a caller may change or remove its own, while the message
//! still waits to be posted. A copy is removed once its message is finished; at open, any
//! copy no unfinished message names is a leftover of a crash and goes too.

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Message, OutboxError, SubmitError};
use crate::atomic_file::{Sync, TempFile};
use crate::bounded_read::Owner;
use crate::gateway::send::{FileKind, OutFile};
use crate::media::sniff::sniff;
use crate::media::store::hex;
use crate::trusted_dir::{TrustError, TrustedDir};

/// The directory in the outbox's that holds the copies.
const DIR: &str = "files";
/// The bytes read before the type is decided (as the media store reads them).
const HEAD: usize = 64;

/// A file a caller asks to send: an open file, and the name the chat is to show.
#[derive(Clone, Debug)]
pub struct NewFile {
    /// Shared, so a request can be cloned; read once, when the message is queued.
    pub file: std::sync::Arc<std::fs::File>,
    pub name: String,
}

impl PartialEq for NewFile {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for NewFile {}

/// A file as the journal keeps it with its message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The outbox's copy, in `outbox/files/`.
    pub file: String,
    /// The name the chat shows.
    pub name: String,
    /// The type its bytes say.
    pub mime: String,
    pub kind: FileKind,
    pub bytes: u64,
    /// SHA-256 of the content, hex: what makes a retried submit the same request.
    pub sha256: String,
}

/// `outbox/files/`, under the outbox's own rules (its user's, 0700).
pub(super) struct Files {
    dir: TrustedDir,
}

impl Files {
    pub(super) fn open(outbox: &Path) -> Result<Files, TrustError> {
        let outbox = TrustedDir::create(outbox, Owner::SelfOrRoot)?;
        let mut dir = outbox.create_child(DIR)?;
        dir.narrow_to(0o700)?;
        Ok(Files { dir })
    }

    /// Copy `new` in as the `n`th file of message `id`, reading its type and hash as it goes.
    /// Nothing is left behind when the copy fails.
    pub(super) fn copy_in(
        &self,
        id: &str,
        n: usize,
        new: &NewFile,
    ) -> Result<Attachment, TrustError> {
        let file = format!("{id}-{n}");
        let mut temp = TempFile::create_in(&self.dir, &file, 0o600)?;
        let io =
            |op: &'static str, path: PathBuf| move |source| TrustError::Io { op, path, source };
        let mut source: &std::fs::File = &new.file;
        let (mut hash, mut bytes, mut head) = (Sha256::new(), 0u64, Vec::with_capacity(HEAD));
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = source
                .read(&mut buf)
                .map_err(io("read", PathBuf::from(&new.name)))?;
            if n == 0 {
                break;
            }
            let chunk = &buf[..n];
            if head.len() < HEAD {
                head.extend_from_slice(&chunk[..(HEAD - head.len()).min(n)]);
            }
            hash.update(chunk);
            bytes += n as u64;
            temp.file()
                .write_all(chunk)
                .map_err(io("write", temp.path()))?;
        }
        temp.persist(Sync::Replace)?;
        let (mime, _) = sniff(&head);
        Ok(Attachment {
            file,
            name: new.name.clone(),
            mime: mime.to_owned(),
            kind: FileKind::of(mime),
            bytes,
            sha256: hex(&hash.finalize()),
        })
    }

    /// The copies of a message, as an attempt posts them.
    pub(super) fn out_files(&self, attachments: &[Attachment]) -> Vec<OutFile> {
        attachments
            .iter()
            .map(|a| OutFile {
                path: self.dir.path().join(&a.file),
                name: a.name.clone(),
                mime: a.mime.clone(),
                kind: a.kind,
                bytes: a.bytes,
            })
            .collect()
    }

    /// Remove the copies `attachments` name. A copy that cannot be removed is said and left:
    /// the next open sweeps it.
    pub(super) fn remove(&self, attachments: &[Attachment]) {
        for a in attachments {
            if let Err(e) = self.dir.remove(&a.file) {
                tracing::warn!(error = %crate::error_chain::one_line(&e), "an outbox file could not be removed; the next start removes it");
            }
        }
    }

    /// Remove every copy that `keep` does not name, temporary files of a copy cut short
    /// included.
    pub(super) fn sweep(&self, keep: &HashSet<&str>) -> Result<(), TrustError> {
        let listing = std::fs::read_dir(self.dir.path()).map_err(|source| TrustError::Io {
            op: "list",
            path: self.dir.path().to_owned(),
            source,
        })?;
        for entry in listing.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !keep.contains(name.as_str()) {
                self.dir.remove(&name)?;
            }
        }
        Ok(())
    }
}

impl super::Outbox {
    /// Copy `files` in as message `id`'s own, off the runtime's threads (a file may be large).
    pub(super) async fn copy_in(
        &self,
        id: &str,
        files: &[NewFile],
    ) -> Result<Vec<Attachment>, SubmitError> {
        if files.is_empty() {
            return Ok(vec![]);
        }
        let (copies, id, files) = (self.files.clone(), id.to_owned(), files.to_vec());
        let copied = tokio::task::spawn_blocking(move || {
            let mut done = Vec::with_capacity(files.len());
            for (n, f) in files.iter().enumerate() {
                match copies.copy_in(&id, n, f) {
                    Ok(a) => done.push(a),
                    Err(e) => {
                        copies.remove(&done);
                        return Err(e);
                    }
                }
            }
            Ok(done)
        })
        .await
        .map_err(|e| {
            OutboxError::File(crate::trusted_dir::TrustError::Io {
                op: "copy",
                path: self.dir.join("files"),
                source: io::Error::other(e),
            })
        })?;
        Ok(copied.map_err(OutboxError::File)?)
    }

    /// The files a message posts, as an attempt streams them.
    pub(crate) fn out_files(&self, message: &Message) -> Vec<OutFile> {
        self.files.out_files(&message.attachments)
    }
}

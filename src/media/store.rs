//! The profile's media store: `PROFILE_HOME/media/`, one file per fetched item, named
//! `KIND_ID_NAME` (Hermes shows a file by its basename after the second `_`, so the user's own
//! name is what the agent is told), mode 0640, in a directory of the home's trust rules.
//!
//! A file is written whole or not at all (a temporary file renamed into place), its type read
//! from its first bytes, and the store kept under its quota by removing the oldest files no
//! message still waits on.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use nix::sys::stat::SFlag;
use sha2::{Digest, Sha256};

use super::download::{DownloadError, Source};
use super::sniff::sniff;
use crate::atomic_file::{Sync, TempFile};
use crate::bounded_read::Owner;
use crate::trusted_dir::{TrustError, TrustedDir};

/// The bytes read before the type is decided: enough for every signature [`sniff`] knows.
const HEAD: usize = 64;

/// The longest platform id kept in a name as it is; a longer one is replaced by its hash.
const MAX_ID: usize = 40;
/// The longest user's file name kept (in characters), its extension included.
const MAX_NAME: usize = 80;

pub struct Store {
    dir: TrustedDir,
    /// The bytes the store holds, as far as this process knows: counted by the last
    /// [`Store::evict`] that listed the directory and raised by every [`Store::put`] since
    /// (a file written again counts twice: too high, never too low, since only this process
    /// writes here). `None` until the first listing. One count per directory, shared by
    /// every `Store` of the process that opens it (the API opens its own per request), so
    /// no writer is missed.
    held: Held,
}

/// A count of bytes held, `None` until known.
type Held = Arc<Mutex<Option<u64>>>;

/// The count of bytes held, shared by every `Store` of `dir` in this process.
fn held_in(dir: &Path) -> Held {
    static COUNTS: LazyLock<Mutex<HashMap<PathBuf, Held>>> = LazyLock::new(Mutex::default);
    let mut counts = COUNTS.lock().unwrap_or_else(PoisonError::into_inner);
    counts.entry(dir.to_owned()).or_default().clone()
}

/// What an [`Store::evict`] that has to remove anything brings the store down to, as a share of
/// the quota: the directory is then listed once per tenth of the quota fetched, not once per
/// file (a listing of 10,000 files took 20 ms, docs/benchmarks.md).
const LOW_WATER: (u64, u64) = (9, 10);

/// A stored file, as the quota sees it.
struct Entry {
    /// When it was last written (seconds, nanoseconds).
    written: (i64, i64),
    name: String,
    size: u64,
}

/// A file now in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    /// SHA-256 of the content, hex.
    pub sha256: String,
    /// The MIME type the bytes say.
    pub mime: &'static str,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Trust(#[from] TrustError),
    #[error(transparent)]
    Download(#[from] DownloadError),
}

impl Store {
    /// The store at `dir` (`PROFILE_HOME/media`), made when missing, readable by the user and
    /// their group only.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        let mut dir = TrustedDir::create(dir, Owner::SelfOrRoot)?;
        dir.narrow_to(0o750)?;
        let held = held_in(dir.path());
        Ok(Store { dir, held })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Write `body` to the store as the item `kind` `id`, which its platform calls `name`.
    /// Nothing is left behind when the body fails.
    pub async fn put(
        &self,
        kind: &str,
        id: &str,
        name: Option<&str>,
        mut body: impl Source,
    ) -> Result<Stored, StoreError> {
        let mut head: Vec<u8> = Vec::with_capacity(HEAD);
        let mut rest: Option<Vec<u8>> = None;
        while head.len() < HEAD {
            match body.next_chunk().await? {
                Some(chunk) => {
                    let chunk = chunk.as_ref();
                    let take = (HEAD - head.len()).min(chunk.len());
                    head.extend_from_slice(&chunk[..take]);
                    if take < chunk.len() {
                        rest = Some(chunk[take..].to_vec());
                    }
                }
                None => break,
            }
        }
        let (mime, ext) = sniff(&head);
        let file_name = file_name(kind, id, name, ext);
        let mut temp = TempFile::create_in(&self.dir, &file_name, 0o640)?;
        let mut hash = Sha256::new();
        let mut bytes = 0u64;
        let mut write = |temp: &mut TempFile<'_>, data: &[u8]| -> Result<(), StoreError> {
            hash.update(data);
            bytes += data.len() as u64;
            temp.file().write_all(data).map_err(|source| {
                StoreError::Trust(TrustError::Io {
                    op: "write",
                    path: temp.path(),
                    source,
                })
            })
        };
        write(&mut temp, &head)?;
        if let Some(rest) = rest {
            write(&mut temp, &rest)?;
        }
        while let Some(chunk) = body.next_chunk().await? {
            write(&mut temp, chunk.as_ref())?;
        }
        // A file lost to a machine crash is fetched again, or said missing: no fsync per file.
        temp.persist(Sync::Replace)?;
        if let Some(held) = self.held().as_mut() {
            *held += bytes;
        }
        Ok(Stored {
            path: self.dir.path().join(&file_name),
            name: file_name,
            bytes,
            sha256: hex(&hash.finalize()),
            mime,
        })
    }

    /// The stored item `id` (its file name, as the API names it), opened to read; `None`
    /// when there is none, or when `id` is not a name the store gives (so never a path).
    pub fn open_item(&self, id: &str) -> Result<Option<std::fs::File>, StoreError> {
        if !is_item_name(id) {
            return Ok(None);
        }
        Ok(self.dir.open_read(id)?)
    }

    /// Keep the store within `quota` bytes: when it holds more, remove the oldest files until
    /// it holds at most [`LOW_WATER`] of it, never one that `keep` names (a message still
    /// waits on it). Returns the bytes held after. The directory is listed only when the
    /// store may be over the quota.
    pub fn evict(&self, quota: u64, keep: impl Fn(&str) -> bool) -> Result<u64, StoreError> {
        // Held through the listing, so a put meanwhile is counted after it, never lost.
        let mut held = self.held();
        if let Some(bytes) = *held {
            if bytes <= quota {
                return Ok(bytes);
            }
        }
        let mut files = self.files()?;
        let mut total: u64 = files.iter().map(|f| f.size).sum();
        if total > quota {
            let low = quota / LOW_WATER.1 * LOW_WATER.0;
            files.sort_by(|a, b| (a.written, &a.name).cmp(&(b.written, &b.name)));
            for Entry { name, size, .. } in files {
                if total <= low {
                    break;
                }
                if keep(&name) {
                    continue;
                }
                self.dir.remove(&name)?;
                total -= size;
            }
        }
        *held = Some(total);
        Ok(total)
    }

    fn held(&self) -> MutexGuard<'_, Option<u64>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every stored file: when it was last written, its name, its size. Temporary files (a
    /// name that starts with `.`) are a write in progress, not the store's. The names are
    /// listed by path; each is then looked at, and removed, through the checked directory.
    fn files(&self) -> Result<Vec<Entry>, StoreError> {
        let listing = std::fs::read_dir(self.dir.path()).map_err(|source| TrustError::Io {
            op: "list",
            path: self.dir.path().to_owned(),
            source,
        })?;
        let mut out = vec![];
        for entry in listing.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let Some(stat) = self.dir.stat(&name)? else {
                continue;
            };
            let kind = SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits());
            if kind != SFlag::S_IFREG {
                continue;
            }
            out.push(Entry {
                written: (stat.st_mtime, stat.st_mtime_nsec),
                name,
                size: u64::try_from(stat.st_size).unwrap_or(0),
            });
        }
        Ok(out)
    }
}

/// `KIND_ID_NAME`, every part made safe: only ASCII letters, digits, `.` and `-` (and `_`
/// between the parts), no leading dot, bounded in length; a name without an extension gets
/// the one its bytes say. Nothing a platform sends ever becomes a path.
pub fn file_name(kind: &str, id: &str, name: Option<&str>, ext: &str) -> String {
    let kind: String = kind
        .chars()
        .filter(char::is_ascii_lowercase)
        .take(16)
        .collect();
    let safe_id: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let id = if safe_id.is_empty() || safe_id.len() > MAX_ID || safe_id != id {
        hex(&Sha256::digest(id.as_bytes())[..8])
    } else {
        safe_id
    };
    let cleaned: String = name
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let cleaned = cleaned.trim_start_matches(['.', '-', '_']);
    let mut name: String = if cleaned.is_empty() { "file" } else { cleaned }.to_owned();
    let has_ext = name
        .rsplit_once('.')
        .is_some_and(|(stem, e)| !stem.is_empty() && (1..=5).contains(&e.len()));
    if !has_ext {
        name = format!("{name}.{ext}");
    }
    if name.chars().count() > MAX_NAME {
        let (stem, e) = name.rsplit_once('.').unwrap_or((&name, ext));
        name = format!("{}.{e}", &stem[..MAX_NAME - 1 - e.len()]);
    }
    format!(
        "{}_{id}_{name}",
        if kind.is_empty() { "file" } else { &kind }
    )
}

/// Whether `name` is one [`file_name`] could have made: `KIND_ID_NAME` of its alphabet, no
/// leading dot, no separator.
pub fn is_item_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && !name.starts_with(['.', '-', '_'])
        && name.splitn(3, '_').count() == 3
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// The name a chat shows of the stored item `name`: the user's own, after `KIND_ID_`.
pub fn shown_name(name: &str) -> &str {
    name.splitn(3, '_').nth(2).unwrap_or(name)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_from_the_platform_never_becomes_a_path() {
        assert_eq!(
            file_name("photo", "AgAC1", None, "jpg"),
            "photo_AgAC1_file.jpg"
        );
        assert_eq!(
            file_name("document", "BQAD", Some("report.pdf"), "pdf"),
            "document_BQAD_report.pdf"
        );
        for (name, id) in [
            (Some("../../etc/passwd"), "x"),
            (Some("/abs/path.txt"), "y"),
            (Some(".hidden"), "z"),
            (Some("a\0b\nc"), "w"),
            (Some("résumé.pdf"), "v"),
            (None, "../.."),
            (None, "a_b"),
        ] {
            let got = file_name("document", id, name, "bin");
            assert!(!got.contains('/') && !got.contains(".."), "{got}");
            assert!(
                got.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')),
                "{got}"
            );
            // The user's name is what follows the second `_`.
            let parts: Vec<&str> = got.splitn(3, '_').collect();
            assert_eq!(parts.len(), 3, "{got}");
        }
        let long = file_name("video", &"i".repeat(500), Some(&"n".repeat(500)), "mp4");
        assert!(long.len() < 16 + 1 + 16 + 1 + MAX_NAME + 1, "{long}");
        assert!(long.ends_with(".mp4"));
    }
}

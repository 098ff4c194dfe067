//! A long poll's cursor kept on disk (`inbox/cursors/ADAPTER`), for platforms whose cursor
//! the client holds (each wing's docs say which): written whole, by
//! rename, only after the batch it acknowledges is in the spool, so a crash in between polls
//! from the old cursor and the spool drops what it already has.

use std::path::{Path, PathBuf};

use crate::bounded_read::Owner;
use crate::trusted_dir::TrustedDir;

/// The longest cursor taken, from the platform, the file or a cluster's previous active. The
/// platforms' are a few hundred bytes at most. The one limit is where a cursor is taken: a
/// 1 MiB cursor once got past it into the file, and every later poll that sends it in its
/// URL failed to build one (http's URIs end at 64 KiB), so no request left the gateway again.
/// 16 KiB fits a query however it is escaped (three bytes a byte), with the rest of the URL.
pub(crate) const MAX_CURSOR: usize = 16 * 1024;

/// Why a cursor the platform sent is not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CursorRefused {
    #[error("a cursor of {len} bytes, longer than the {MAX_CURSOR} bytes a cursor may be")]
    TooLong { len: usize },
    #[error("an empty cursor")]
    Empty,
}

/// A cursor that may be kept and polled from: within [`MAX_CURSOR`] and not empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cursor(String);

impl Cursor {
    /// Take `text` as a cursor, or say why not.
    pub(crate) fn take(text: &str) -> Result<Cursor, CursorRefused> {
        match text.len() {
            0 => Err(CursorRefused::Empty),
            len if len > MAX_CURSOR => Err(CursorRefused::TooLong { len }),
            _ => Ok(Cursor(text.to_owned())),
        }
    }
}

pub(crate) struct CursorFile {
    path: PathBuf,
    /// The cursor polls go from (empty: none).
    current: String,
    /// The cursor on disk.
    on_disk: String,
    /// The cursor that acknowledges the batch being stored, kept at [`CursorFile::commit`].
    pending: Option<String>,
    /// Why the file there could not be used, when it could not.
    refused: Option<String>,
}

impl CursorFile {
    /// The cursor kept at `path`, or none: a cursor that cannot be read costs only a poll from
    /// no cursor, which the platform answers as it answers a new client. The read is bounded
    /// and checked ([`TrustedDir::read`]): a FIFO there would otherwise hang the adapter's
    /// start, a huge file cost its size, and a cursor someone else put there steer the polls.
    /// Anything but a missing file is an error that names it, kept for the wing to say
    /// ([`CursorFile::refused`]): the polls that follow start from no position.
    pub(crate) fn open(adapter: &str, path: PathBuf) -> CursorFile {
        let (on_disk, refused) = match read(&path) {
            Ok(cursor) => (cursor, None),
            Err(e) => {
                tracing::error!(
                    adapter = %adapter,
                    path = %path.display(),
                    error = %e,
                    "the kept cursor cannot be used; polling from no position"
                );
                (String::new(), Some(format!("{}: {e}", path.display())))
            }
        };
        CursorFile {
            path,
            current: on_disk.clone(),
            on_disk,
            pending: None,
            refused,
        }
    }

    /// Why the kept cursor could not be used (the file, and what was wrong), if it could not.
    pub(crate) fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// The cursor polls go from; empty when there is none.
    pub(crate) fn current(&self) -> &str {
        &self.current
    }

    /// `next` acknowledges the batch just polled: kept once that batch is stored.
    pub(crate) fn stage(&mut self, next: Cursor) {
        self.pending = Some(next.0);
    }

    /// The batch is stored: keep the cursor that acknowledges it.
    pub(crate) fn commit(&mut self) -> Result<(), String> {
        match self.pending.take() {
            Some(next) => self.keep(&next),
            None => Ok(()),
        }
    }

    /// The cursor a commit would keep (for a cluster's replica), or none.
    pub(crate) fn next(&self) -> Option<&str> {
        Some(self.pending.as_deref().unwrap_or(&self.current)).filter(|c| !c.is_empty())
    }

    /// Poll from `cursor`, which a cluster's previous active kept; written here at the next
    /// [`CursorFile::keep`], so this host's file then agrees. One the limit refuses is not
    /// taken, and said.
    pub(crate) fn inherit(&mut self, cursor: String) {
        match Cursor::take(&cursor) {
            Ok(c) => self.current = c.0,
            Err(e) => {
                tracing::error!(path = %self.path.display(), error = %e, "the cursor the cluster's previous active left is refused; polling from this host's own");
            }
        }
    }

    /// Forget the cursor (the platform no longer takes it): polls go from none, and the file
    /// is replaced at the next [`CursorFile::keep`].
    pub(crate) fn forget(&mut self) {
        self.current.clear();
    }

    /// Keep `next` (whole, by rename) and poll from it; nothing is written when it is
    /// already on disk.
    fn keep(&mut self, next: &str) -> Result<(), String> {
        next.clone_into(&mut self.current);
        if next == self.on_disk {
            return Ok(());
        }
        crate::atomic_file::write_with(
            &self.path,
            next.as_bytes(),
            0o600,
            crate::atomic_file::Sync::Replace,
        )
        .map_err(|e| format!("cannot write {}: {e}", self.path.display()))?;
        next.clone_into(&mut self.on_disk);
        Ok(())
    }
}

fn read(path: &Path) -> Result<String, String> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(String::new());
    };
    let read = TrustedDir::open(dir, Owner::SelfOrRoot)
        .and_then(|dir| dir.map(|d| d.read(name, MAX_CURSOR as u64)).transpose())
        .map_err(|e| crate::error_chain::one_line(&e))?;
    match read.flatten() {
        None => Ok(String::new()),
        Some(bytes) => String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_is_taken_within_the_one_limit() {
        assert_eq!(
            Cursor::take("s72595_4483_1934").unwrap().0,
            "s72595_4483_1934"
        );
        assert_eq!(Cursor::take(""), Err(CursorRefused::Empty));
        let long = "x".repeat(MAX_CURSOR + 1);
        assert_eq!(
            Cursor::take(&long),
            Err(CursorRefused::TooLong {
                len: MAX_CURSOR + 1
            })
        );
        assert!(Cursor::take(&long[1..]).is_ok());
    }

    #[test]
    fn a_file_the_limit_refuses_is_said_and_polls_start_from_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mx");
        std::fs::write(&path, "s1").unwrap();
        let kept = CursorFile::open("mx", path.clone());
        assert_eq!((kept.current(), kept.refused()), ("s1", None));
        std::fs::write(&path, "x".repeat(MAX_CURSOR + 1)).unwrap();
        let refused = CursorFile::open("mx", path.clone());
        assert_eq!(refused.current(), "");
        assert!(
            refused.refused().is_some_and(|r| r.contains("mx")),
            "{:?}",
            refused.refused()
        );
        let missing = CursorFile::open("mx", dir.path().join("none"));
        assert_eq!((missing.current(), missing.refused()), ("", None));
    }

    #[test]
    fn an_inherited_cursor_past_the_limit_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = CursorFile::open("mx", dir.path().join("mx"));
        c.inherit("x".repeat(MAX_CURSOR + 1));
        assert_eq!(c.current(), "");
        c.inherit("s9".into());
        assert_eq!(c.current(), "s9");
    }
}

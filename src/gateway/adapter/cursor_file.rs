//! A long poll's cursor kept on disk (`inbox/cursors/ADAPTER`), for platforms whose cursor
//! the client holds (Weixin's `get_updates_buf`, Matrix's `next_batch`): written whole, by
//! rename, only after the batch it acknowledges is in the spool, so a crash in between polls
//! from the old cursor and the spool drops what it already has.

use std::path::{Path, PathBuf};

use crate::bounded_read::Owner;
use crate::trusted_dir::TrustedDir;

/// The longest cursor kept; the platforms' are a few hundred bytes at most.
pub(crate) const MAX_CURSOR: usize = 64 * 1024;

pub(crate) struct CursorFile {
    path: PathBuf,
    /// The cursor polls go from (empty: none).
    current: String,
    /// The cursor on disk.
    on_disk: String,
    /// The cursor that acknowledges the batch being stored, kept at [`CursorFile::commit`].
    pending: Option<String>,
}

impl CursorFile {
    /// The cursor kept at `path`, or none: a cursor that cannot be read costs only a poll from
    /// no cursor, which the platform answers as it answers a new client. The read is bounded
    /// and checked ([`TrustedDir::read`]): a FIFO there would otherwise hang the adapter's
    /// start, a huge file cost its size, and a cursor someone else put there steer the polls.
    /// Anything but a missing file is worth a warning that names it.
    pub(crate) fn open(adapter: &str, path: PathBuf) -> CursorFile {
        let on_disk = read(&path).unwrap_or_else(|e| {
            tracing::warn!(
                adapter = %adapter,
                path = %path.display(),
                error = %e,
                "the kept cursor cannot be used; polling as a new client"
            );
            String::new()
        });
        CursorFile {
            path,
            current: on_disk.clone(),
            on_disk,
            pending: None,
        }
    }

    /// The cursor polls go from; empty when there is none.
    pub(crate) fn current(&self) -> &str {
        &self.current
    }

    /// `next` acknowledges the batch just polled: kept once that batch is stored.
    pub(crate) fn stage(&mut self, next: String) {
        self.pending = Some(next);
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
    /// [`CursorFile::keep`], so this host's file then agrees. One longer than any platform's
    /// is not taken.
    pub(crate) fn inherit(&mut self, cursor: String) {
        if cursor.len() <= MAX_CURSOR {
            self.current = cursor;
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
    Ok(read
        .flatten()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default())
}

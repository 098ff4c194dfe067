//! `gateway.pid`: an informational record of the running gateway, for people and for doctor.
//!
//! It is never used to decide anything (the flock does that), so a stale one cannot block a
//! restart. It is written atomically into the profile's own home and removed on exit.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::atomic_file;
use crate::bounded_read::{self, Owner};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PidRecord {
    pub(crate) pid: u32,
    pub(crate) profile: String,
    pub(crate) home: PathBuf,
    /// RFC 3339, UTC.
    pub(crate) started_at: String,
}

/// The pid file of this process; removed on drop if it still names this process.
#[derive(Debug)]
pub(crate) struct PidFile {
    path: PathBuf,
    pid: u32,
}

impl PidFile {
    pub(crate) fn write(path: &Path, record: &PidRecord) -> std::io::Result<PidFile> {
        let json = serde_json::to_string_pretty(record).expect("record serialises") + "\n";
        atomic_file::write(path, json.as_bytes(), 0o644)?;
        Ok(PidFile {
            path: path.to_owned(),
            pid: record.pid,
        })
    }

    /// The record at `path`, if there is a readable one. The read is bounded
    /// ([`bounded_read`]): a FIFO, a symlink or a huge file there reads as no record instead
    /// of hanging doctor or the gateway's exit. Any owner the profile's home accepts will do,
    /// because the record only informs (doctor reads other accounts' profiles too).
    pub(crate) fn read(path: &Path) -> Option<PidRecord> {
        let bytes =
            bounded_read::read(path, bounded_read::LIMIT, Owner::SelfRootOrDirectory).ok()??;
        serde_json::from_slice(&bytes).ok()
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        if Self::read(&self.path).is_some_and(|r| r.pid == self.pid) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

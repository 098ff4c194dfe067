//! Locks held by the kernel, so that a dead process can never leave a stale lock behind.
//!
//! The lock file also records who holds it (a JSON line), so the loser can name the holder in
//! its error. That record is informational: the flock alone decides.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

/// Who holds a lock, as written into the lock file by the holder.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub profile: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{} is held by {}", .path.display(), describe(.holder))]
    Held {
        path: PathBuf,
        holder: Option<Holder>,
    },
    #[error("failed to lock {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// "profile coder (PID 1234)", or "another process" when the record is not readable yet.
pub fn describe(holder: &Option<Holder>) -> String {
    match holder {
        Some(h) => format!("profile {} (PID {})", h.profile, h.pid),
        None => "another process".into(),
    }
}

/// An exclusive flock, released when dropped or when the process dies.
#[derive(Debug)]
pub struct HeldLock {
    _lock: Flock<File>,
    path: PathBuf,
}

impl HeldLock {
    /// Take the lock without waiting. If another process holds it, say who.
    pub fn try_acquire(path: &Path, me: &Holder) -> Result<HeldLock, LockError> {
        let io_err = |source| LockError::Io {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        let open_rw = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path);
        // Another user's lock file (a shared token-lock directory) can still be locked through
        // a read-only descriptor; only the holder record is skipped.
        let (file, writable) = match open_rw {
            Ok(f) => (f, true),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                (File::open(path).map_err(io_err)?, false)
            }
            Err(e) => return Err(io_err(e)),
        };
        let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LockError::Held {
                    path: path.to_owned(),
                    holder: serde_json::from_str(text.trim()).ok(),
                });
            }
            Err((_, errno)) => return Err(io_err(io::Error::from(errno))),
        };
        if writable {
            let record = serde_json::to_string(me).expect("holder serialises");
            lock.set_len(0).map_err(io_err)?;
            lock.rewind().map_err(io_err)?;
            writeln!(lock, "{record}").map_err(io_err)?;
        }
        Ok(HeldLock {
            _lock: lock,
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The holder record in a lock file: what the holder said when it took the lock. Only the
/// flock itself is the truth; see [`LockTable`] for that.
pub fn recorded_holder(path: &Path) -> Option<Holder> {
    serde_json::from_str(std::fs::read_to_string(path).ok()?.trim()).ok()
}

/// The kernel's table of flock holders (`/proc/locks`), read once, so that an onlooker such as
/// doctor can tell who holds a lock without taking it: a try-lock, however brief, could make a
/// gateway starting at that moment think its profile taken. Reading the table is slow (about
/// 15 ms on the project's machine, in proportion to every lock on it), so read it once per run
/// at most, and only when a cheaper answer will not do.
#[derive(Debug, Default)]
pub struct LockTable {
    /// `MAJ:MIN:INODE` of a locked file → the PID holding it.
    holders: std::collections::HashMap<String, u32>,
}

impl LockTable {
    pub fn read() -> Self {
        std::fs::read_to_string("/proc/locks")
            .map(|t| Self::parse(&t))
            .unwrap_or_default()
    }

    fn parse(locks: &str) -> Self {
        let holders = locks
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                // Waiters (`->` lines) hold nothing; POSIX and OFD locks are not ours.
                match f.as_slice() {
                    [_, "FLOCK", _, _, pid, file, ..] => {
                        Some(((*file).to_owned(), pid.parse().ok()?))
                    }
                    _ => None,
                }
            })
            .collect();
        Self { holders }
    }

    /// The process holding a flock on `path`, if any.
    pub fn holder(&self, path: &Path) -> Option<u32> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        let dev = meta.dev();
        let id = format!(
            "{:02x}:{:02x}:{}",
            nix::sys::stat::major(dev),
            nix::sys::stat::minor(dev),
            meta.ino()
        );
        self.holders.get(&id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_read_from_the_kernels_lock_table() {
        let locks = "1: POSIX  ADVISORY  WRITE 77 fe:00:5 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 1234 fe:00:10010639 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 99 fe:00:10010639 0 EOF\n";
        let t = LockTable::parse(locks);
        assert_eq!(t.holders.get("fe:00:10010639"), Some(&1234));
        assert_eq!(t.holders.get("fe:00:5"), None, "a POSIX lock is not ours");
        assert_eq!(t.holders.len(), 1, "a waiter holds nothing");

        // And from the real table, for a lock this process holds.
        let dir = std::env::temp_dir().join(format!("hsv-flock-holder-{}", std::process::id()));
        let path = dir.join("x.lock");
        let held = HeldLock::try_acquire(&path, &Holder::default()).unwrap();
        assert_eq!(LockTable::read().holder(&path), Some(std::process::id()));
        drop(held);
        assert_eq!(LockTable::read().holder(&path), None);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn second_taker_learns_the_holder_and_lock_frees_on_drop() {
        let dir = std::env::temp_dir().join(format!("hsv-flock-{}", std::process::id()));
        let path = dir.join("x.lock");
        let me = Holder {
            pid: 42,
            profile: "coder".into(),
        };
        let held = HeldLock::try_acquire(&path, &me).unwrap();
        // flock is per open file description, so a second open in this process contends.
        match HeldLock::try_acquire(&path, &Holder::default()) {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder, Some(me.clone())),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(held);
        HeldLock::try_acquire(&path, &me).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }
}

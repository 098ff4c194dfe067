//! One writer at a time: install, set, unset and uninstall each read a unit and its drop-in,
//! decide, and write them back. Two of them interleaved would each write what it read plus
//! its own change, and one change would be lost without a word. So each holds an exclusive
//! flock on the unit directory from its first read to its last effect.
//!
//! The lock is on the directory itself: no lock file appears among the units, and the kernel
//! drops the lock when a killed writer dies, so it can never go stale.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// How long a writer waits for another to finish. A restart of the gateway is the longest
/// step a writer takes while holding the lock (it waits for `READY=1`), so this is long
/// enough for a couple of those, and short enough that a wedged writer is reported.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub(crate) enum EditLockError {
    #[error("failed to open {path} to lock it")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to lock {path}")]
    Lock {
        path: PathBuf,
        #[source]
        source: Errno,
    },
    #[error("another hermes-svc has been changing units in {path} for {secs} s; try again when it is done")]
    Busy { path: PathBuf, secs: u64 },
}

/// Held while a command changes units; released on drop.
#[derive(Debug)]
pub(crate) struct EditLock {
    _lock: Flock<File>,
}

impl EditLock {
    /// Lock `unit_dir` (created if missing), waiting up to `wait` for another writer.
    pub(crate) async fn acquire(
        unit_dir: &Path,
        wait: Duration,
    ) -> Result<EditLock, EditLockError> {
        std::fs::create_dir_all(unit_dir).map_err(|source| EditLockError::Open {
            path: unit_dir.to_owned(),
            source,
        })?;
        let started = Instant::now();
        let mut pause = Duration::from_millis(5);
        loop {
            let dir = File::open(unit_dir).map_err(|source| EditLockError::Open {
                path: unit_dir.to_owned(),
                source,
            })?;
            match Flock::lock(dir, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(EditLock { _lock: lock }),
                Err((_, Errno::EWOULDBLOCK)) if started.elapsed() < wait => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Err((_, Errno::EWOULDBLOCK)) => {
                    return Err(EditLockError::Busy {
                        path: unit_dir.to_owned(),
                        secs: wait.as_secs(),
                    })
                }
                Err((_, source)) => {
                    return Err(EditLockError::Lock {
                        path: unit_dir.to_owned(),
                        source,
                    })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_writer_waits_then_reports_busy() {
        let dir = std::env::temp_dir().join(format!("hsv-edit-lock-{}", std::process::id()));
        let first = EditLock::acquire(&dir, WAIT).await.unwrap();
        let err = EditLock::acquire(&dir, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("try again"), "{err}");
        drop(first);
        EditLock::acquire(&dir, Duration::from_millis(50))
            .await
            .unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }
}

//! One lock per bot credential, machine-wide, so that two gateways (or two profiles) can never
//! fight over one bot token: the second one exits 78 naming the holder, and never signals it.
//!
//! The lock files live in one directory shared by every user of the machine, named by a hash of
//! the credential, so the token itself is never written anywhere.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::gateway::flock::{self, HeldLock, Holder, LockError, Owner};

/// `HERMES_LOCK_DIR`, else `/run/lock/hermes-svc`, else a directory under the temp dir (macOS,
/// or a machine without `/run/lock`).
pub fn lock_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HERMES_LOCK_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let run_lock = Path::new("/run/lock");
    if run_lock.is_dir() {
        run_lock.join("hermes-svc")
    } else {
        std::env::temp_dir().join("hermes-svc-locks")
    }
}

/// A short, stable, non-reversible name for a credential: safe to show in logs and doctor.
pub fn short_hash(identity: &str) -> String {
    Sha256::digest(identity.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum TokenLockError {
    #[error("token for adapter {adapter} already held by {}", flock::describe(.holder))]
    Held { adapter: String, holder: Owner },
    #[error("failed to create the token lock directory {path}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Lock(LockError),
}

/// Take the lock for `identity` (see `AdapterSpec::identity`) on behalf of `adapter`.
pub fn acquire(
    dir: &Path,
    adapter: &str,
    identity: &str,
    me: &Holder,
) -> Result<HeldLock, TokenLockError> {
    create_shared_dir(dir)?;
    let path = dir.join(format!("token-{}.lock", short_hash(identity)));
    HeldLock::try_acquire(&path, me).map_err(|e| match e {
        LockError::Held { holder, .. } => TokenLockError::Held {
            adapter: adapter.to_owned(),
            holder,
        },
        e => TokenLockError::Lock(e),
    })
}

/// The directory is shared by every user, like /tmp: world-writable with the sticky bit.
fn create_shared_dir(dir: &Path) -> Result<(), TokenLockError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source| TokenLockError::Dir {
        path: dir.to_owned(),
        source,
    };
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(err)?;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_identity_conflicts_and_names_the_holder() {
        let dir = std::env::temp_dir().join(format!("hsv-token-{}", std::process::id()));
        let coder = Holder {
            pid: 1234,
            profile: "coder".into(),
        };
        let _held = acquire(&dir, "qq", "qqbot:1:s", &coder).unwrap();
        let err = acquire(&dir, "qq", "qqbot:1:s", &Holder::default()).unwrap_err();
        // Named by the kernel: this process, which is not a gateway, whatever the record says.
        let err = err.to_string();
        assert!(
            err.starts_with(&format!(
                "token for adapter qq already held by PID {} (",
                std::process::id()
            )) && !err.contains("coder"),
            "{err}"
        );
        assert!(acquire(&dir, "qq", "qqbot:2:s", &coder).is_ok());
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names
            .iter()
            .all(|n| !n.contains("qqbot") && !n.contains(":s")));
        std::fs::remove_dir_all(dir).unwrap();
    }
}

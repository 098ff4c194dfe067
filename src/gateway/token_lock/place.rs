//! Where a user's token locks live, and whether that directory and its parents can be trusted
//! to be changed by nobody else.

use std::path::{Path, PathBuf};

use super::key::KEY_LEN;
use super::TokenLockError;

/// What the gateway's environment says about where locks may live.
#[derive(Clone, Debug, Default)]
pub(super) struct DirEnv {
    /// `HERMES_LOCK_DIR`, when set and not empty.
    pub(super) lock_dir: Option<PathBuf>,
    pub(super) euid: u32,
    pub(super) xdg_runtime_dir: Option<PathBuf>,
    pub(super) home: Option<PathBuf>,
}

impl DirEnv {
    pub(super) fn from_process() -> DirEnv {
        let var = |k| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        DirEnv {
            lock_dir: var("HERMES_LOCK_DIR"),
            euid: nix::unistd::geteuid().as_raw(),
            xdg_runtime_dir: var("XDG_RUNTIME_DIR"),
            home: var("HOME"),
        }
    }
}

/// Where this user's token locks live, so that every gateway of the user finds the same place
/// and nobody else can touch it (docs/health.md#token-locks): `HERMES_LOCK_DIR`; for root,
/// `/run/hermes-svc`; else `$XDG_RUNTIME_DIR/hermes-svc`; else `/run/user/UID/hermes-svc` if
/// that runtime directory exists and is ours (a system unit's user with a session or linger);
/// else `$HOME/.local/state/hermes-svc/locks`. `is_own_dir(path, uid)` says whether `path` is
/// a directory owned by `uid`.
pub(super) fn choose_dir(env: &DirEnv, is_own_dir: impl Fn(&Path, u32) -> bool) -> Option<PathBuf> {
    if let Some(dir) = &env.lock_dir {
        return Some(dir.clone());
    }
    if env.euid == 0 {
        let run = if is_own_dir(Path::new("/run"), 0) {
            "/run/hermes-svc"
        } else {
            "/var/run/hermes-svc"
        };
        return Some(PathBuf::from(run));
    }
    // The spec requires an absolute path; anything else is ignored, as systemd does.
    if let Some(xdg) = env.xdg_runtime_dir.as_ref().filter(|p| p.is_absolute()) {
        return Some(xdg.join("hermes-svc"));
    }
    let run_user = PathBuf::from(format!("/run/user/{}", env.euid));
    if is_own_dir(&run_user, env.euid) {
        return Some(run_user.join("hermes-svc"));
    }
    let home = env.home.as_ref().filter(|p| p.is_absolute())?;
    Some(home.join(".local/state/hermes-svc/locks"))
}

pub(super) fn is_own_dir(path: &Path, uid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_dir() && m.uid() == uid)
}

/// Check each of `parents` (real paths) of the lock directory `dir` with [`judge_parent`].
pub(super) fn check_parents<'a>(
    parents: impl Iterator<Item = &'a Path>,
    dir: &Path,
    euid: u32,
) -> Result<(), TokenLockError> {
    use std::os::unix::fs::MetadataExt;
    for parent in parents {
        let meta = std::fs::symlink_metadata(parent).map_err(|source| TokenLockError::DirIo {
            op: "check",
            path: parent.to_owned(),
            source,
        })?;
        judge_parent(meta.uid(), meta.mode(), euid).map_err(|why| {
            TokenLockError::UntrustedParent {
                parent: parent.to_owned(),
                dir: dir.to_owned(),
                why,
                uid: euid,
            }
        })?;
    }
    Ok(())
}

/// Why a directory (or the key) can't be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Distrust {
    Owner(u32),
    Writable(u32),
    NotFile,
    Symlink,
    Readable(u32),
    Size(u64),
}

impl std::fmt::Display for Distrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distrust::Owner(uid) => write!(f, "is owned by uid {uid}"),
            Distrust::Writable(mode) => {
                write!(f, "is writable by group or others (mode {mode:04o})")
            }
            Distrust::NotFile => f.write_str("is not a regular file"),
            Distrust::Symlink => f.write_str("is a symbolic link, which is never followed"),
            Distrust::Readable(mode) => {
                write!(f, "is readable by group or others (mode {mode:04o})")
            }
            Distrust::Size(n) => write!(f, "holds {n} bytes, not {KEY_LEN}"),
        }
    }
}

/// The lock directory itself: ours alone, so that nobody else can create, open, rename or
/// remove a lock in it. Root-owned is not enough for a user's gateway: root is trusted, but a
/// root-owned directory that a user can use is one every user can use.
pub(super) fn judge_dir(uid: u32, mode: u32, euid: u32) -> Result<(), Distrust> {
    if uid != euid {
        Err(Distrust::Owner(uid))
    } else if mode & 0o022 != 0 {
        Err(Distrust::Writable(mode & 0o7777))
    } else {
        Ok(())
    }
}

/// A directory on the way to the lock directory: whoever can write it can rename the lock
/// directory away and put one of their own in its place. So it must be root's or ours, and
/// writable by nobody else unless it is sticky (like /tmp, where only an entry's owner may
/// rename or remove it).
pub(super) fn judge_parent(uid: u32, mode: u32, euid: u32) -> Result<(), Distrust> {
    if uid != 0 && uid != euid {
        Err(Distrust::Owner(uid))
    } else if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        Err(Distrust::Writable(mode & 0o7777))
    } else {
        Ok(())
    }
}

//! One lock per bot credential, so that two gateways (or two profiles) of one user can never
//! fight over one bot token: the second one exits 78 naming the holder, and never signals it.
//!
//! The locks live in a directory that only this user (or root) can create, open or remove
//! anything in. A lock that anyone can open is a lock anyone can hold: the old shared,
//! world-writable directory let any local user keep a gateway down, forge the holder's name,
//! remove a held lock so that two gateways shared a token, or plant a symbolic link for a root
//! gateway to write through. Lock files are named by a keyed hash of the credential (HMAC with
//! a random key kept in the same directory), so a name can't be tested offline against a
//! guessed token, and the token itself is never written anywhere.

mod key;
mod lock_dir;
mod place;
#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::gateway::flock::{self, HeldLock, Holder, LockError, Owner};
use key::{keyed_hash, random_key, KEY_LEN};
use lock_dir::LockDir;
pub(crate) use place::Distrust;
use place::{choose_dir, is_own_dir, DirEnv};

#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenLockError {
    #[error("token for adapter {adapter} already held by {}", flock::describe(.holder))]
    Held { adapter: String, holder: Owner },
    #[error(
        "adapters {first} and {second} in {} use the same bot credential, so they would fight \
         over one session: remove one of them, or give each its own credential",
        .config.display()
    )]
    SameCredential {
        config: PathBuf,
        first: String,
        second: String,
    },
    #[error(
        "no place for token locks: XDG_RUNTIME_DIR and HOME are not set and /run/user/{uid} \
         does not exist: set HERMES_LOCK_DIR to a directory of your own"
    )]
    NoDir { uid: u32 },
    #[error(
        "lock directory {} {why}: remove it, or set HERMES_LOCK_DIR to a directory that only \
         uid {uid} owns and can write",
        .path.display()
    )]
    UntrustedDir {
        path: PathBuf,
        why: Distrust,
        uid: u32,
    },
    #[error(
        "{} {why}, so someone else could replace the lock directory {} inside it: set \
         HERMES_LOCK_DIR to a directory whose parents only root or uid {uid} can write",
        .parent.display(),
        .dir.display()
    )]
    UntrustedParent {
        parent: PathBuf,
        dir: PathBuf,
        why: Distrust,
        uid: u32,
    },
    #[error(
        "failed to {op} the lock directory {}: check its parent's owner and mode, or set \
         HERMES_LOCK_DIR",
        .path.display()
    )]
    DirIo {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot create {} in lock directory {}, which uid {uid} cannot write: make it writable \
         by its owner (chmod 700), or set HERMES_LOCK_DIR",
        .path.display(),
        .dir.display()
    )]
    NotWritable {
        path: PathBuf,
        dir: PathBuf,
        uid: u32,
        #[source]
        source: io::Error,
    },
    #[error("lock file {} {why}: remove it (it holds no state)", .path.display())]
    BadFile { path: PathBuf, why: Distrust },
    #[error(
        "failed to open the lock file {}: check the lock directory, or set HERMES_LOCK_DIR",
        .path.display()
    )]
    FileIo {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "lock key {} {why}: remove it while no gateway of uid {uid} runs (the next one makes \
         a new key)",
        .path.display()
    )]
    BadKey {
        path: PathBuf,
        why: Distrust,
        uid: u32,
    },
    #[error(
        "failed to {op} the lock key {}: check the lock directory, or set HERMES_LOCK_DIR",
        .path.display()
    )]
    KeyIo {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Lock(LockError),
}

impl TokenLockError {
    /// A real conflict, or a configuration a restart cannot fix (exit 78). Everything else is
    /// an I/O or trust problem with the lock directory (exit 1): a restart may well succeed
    /// once it is fixed, and it must not read as "another gateway has this token".
    pub(crate) fn is_conflict(&self) -> bool {
        matches!(
            self,
            TokenLockError::Held { .. } | TokenLockError::SameCredential { .. }
        )
    }
}

/// Take one lock for each adapter's identity (see `AdapterSpec::identity`), `(name, identity)`
/// in config order, that the run does not hold yet (`held`: none at the start, those a
/// reload keeps after), each with its identity. Two adapters of one profile with the same
/// identity are a configuration error naming both, found before any lock is taken. On a
/// conflict nothing new is kept: the locks taken so far are dropped.
pub(crate) fn acquire_new(
    config: &Path,
    adapters: &[(String, String)],
    held: &dyn Fn(&str) -> bool,
    me: &Holder,
) -> Result<Vec<(String, HeldLock)>, TokenLockError> {
    for (i, (first, identity)) in adapters.iter().enumerate() {
        if let Some((second, _)) = adapters[i + 1..].iter().find(|(_, id)| id == identity) {
            return Err(TokenLockError::SameCredential {
                config: config.to_owned(),
                first: first.clone(),
                second: second.clone(),
            });
        }
    }
    let wanted: Vec<&(String, String)> = adapters.iter().filter(|(_, id)| !held(id)).collect();
    if wanted.is_empty() {
        return Ok(vec![]);
    }
    let dir = LockDir::open()?;
    wanted
        .into_iter()
        .map(|(name, identity)| Ok((identity.clone(), dir.acquire(name, identity, me)?)))
        .collect()
}

/// A short, non-reversible name for a credential, for doctor (HSV006) to compare and show.
/// It is keyed like the lock files' names, so that it can't be tested offline either: with
/// this user's lock key when there is one, so that the hash shown is the name of the lock file
/// (for the same user and lock directory); otherwise with a key made up for this process and
/// never stored, which still compares every profile doctor reads in one run. Doctor never
/// creates a lock directory or a key.
pub(crate) fn fingerprint(identity: &str) -> String {
    static KEY: OnceLock<[u8; KEY_LEN]> = OnceLock::new();
    let key = KEY.get_or_init(|| {
        let env = DirEnv::from_process();
        choose_dir(&env, is_own_dir)
            .and_then(|dir| LockDir::open_at(&dir, env.euid, false).ok())
            .map(|dir| dir.key)
            .or_else(|| random_key().ok())
            // No /dev/urandom: a display-only key that is at worst guessable, never stored.
            .unwrap_or_else(|| std::array::from_fn(|_| fastrand::u8(..)))
    });
    keyed_hash(key, identity)
}

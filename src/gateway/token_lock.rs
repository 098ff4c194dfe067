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

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fstat, FileStat, Mode, SFlag};
use nix::unistd::{linkat, unlinkat, UnlinkatFlags};
use sha2::{Digest, Sha256};

use crate::gateway::flock::{self, HeldLock, Holder, LockError, Owner};

/// The key's file name in the lock directory.
const KEY_FILE: &str = "key";
const KEY_LEN: usize = 32;
/// Hex digits of the keyed hash in a lock file's name (64 bits: a collision between two of
/// one user's credentials is not a concern, and nothing can be tested offline anyway).
const HASH_HEX: usize = 16;

/// What the gateway's environment says about where locks may live.
#[derive(Clone, Debug, Default)]
struct DirEnv {
    /// `HERMES_LOCK_DIR`, when set and not empty.
    lock_dir: Option<PathBuf>,
    euid: u32,
    xdg_runtime_dir: Option<PathBuf>,
    home: Option<PathBuf>,
}

impl DirEnv {
    fn from_process() -> DirEnv {
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
fn choose_dir(env: &DirEnv, is_own_dir: impl Fn(&Path, u32) -> bool) -> Option<PathBuf> {
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

fn is_own_dir(path: &Path, uid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_dir() && m.uid() == uid)
}

/// Check each of `parents` (real paths) of the lock directory `dir` with [`judge_parent`].
fn check_parents<'a>(
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
pub enum Distrust {
    Owner(u32),
    Writable(u32),
    NotDir,
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
            Distrust::NotDir => f.write_str("is not a directory"),
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
fn judge_dir(uid: u32, mode: u32, euid: u32) -> Result<(), Distrust> {
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
fn judge_parent(uid: u32, mode: u32, euid: u32) -> Result<(), Distrust> {
    if uid != 0 && uid != euid {
        Err(Distrust::Owner(uid))
    } else if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        Err(Distrust::Writable(mode & 0o7777))
    } else {
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenLockError {
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
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            TokenLockError::Held { .. } | TokenLockError::SameCredential { .. }
        )
    }
}

/// Take one lock for each adapter's identity (see `AdapterSpec::identity`), `(name, identity)`
/// in config order. Two adapters of one profile with the same identity are a configuration
/// error naming both, found before any lock is taken.
pub fn acquire_all(
    config: &Path,
    adapters: &[(String, String)],
    me: &Holder,
) -> Result<Vec<HeldLock>, TokenLockError> {
    for (i, (first, identity)) in adapters.iter().enumerate() {
        if let Some((second, _)) = adapters[i + 1..].iter().find(|(_, id)| id == identity) {
            return Err(TokenLockError::SameCredential {
                config: config.to_owned(),
                first: first.clone(),
                second: second.clone(),
            });
        }
    }
    if adapters.is_empty() {
        return Ok(vec![]);
    }
    let dir = LockDir::open()?;
    adapters
        .iter()
        .map(|(name, identity)| dir.acquire(name, identity, me))
        .collect()
}

/// This user's lock directory, verified, with its key.
struct LockDir {
    path: PathBuf,
    fd: OwnedFd,
    key: [u8; KEY_LEN],
    euid: u32,
}

impl LockDir {
    /// Find this user's lock directory, create it (0700) and its key if missing, and check
    /// that nobody else can change either.
    fn open() -> Result<LockDir, TokenLockError> {
        let env = DirEnv::from_process();
        let path = choose_dir(&env, is_own_dir).ok_or(TokenLockError::NoDir { uid: env.euid })?;
        Self::open_at(&path, env.euid, true)
    }

    fn open_at(path: &Path, euid: u32, create: bool) -> Result<LockDir, TokenLockError> {
        let dir_io = |op, path: &Path| {
            let path = path.to_owned();
            move |source| TokenLockError::DirIo { op, path, source }
        };
        let absolute = std::path::absolute(path).map_err(dir_io("find", path))?;
        if create && std::fs::symlink_metadata(&absolute).is_err() {
            // Nothing is made inside a directory someone else could change: check the part
            // that exists first.
            let existing = absolute
                .ancestors()
                .find(|a| std::fs::symlink_metadata(a).is_ok())
                .unwrap_or(Path::new("/"));
            let real = std::fs::canonicalize(existing).map_err(dir_io("find", existing))?;
            check_parents(real.ancestors(), &absolute, euid)?;
            if let Some(parent) = absolute.parent() {
                std::fs::create_dir_all(parent).map_err(dir_io("create", &absolute))?;
            }
            match std::fs::DirBuilder::new().mode(0o700).create(&absolute) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                    return Err(dir_io("create", &absolute)(e))
                }
                _ => {}
            }
        }
        // From here on, the real path: no symbolic link in it can be swapped under us.
        let real = std::fs::canonicalize(&absolute).map_err(dir_io("find", &absolute))?;
        check_parents(real.ancestors().skip(1), &real, euid)?;
        let fd = nix::fcntl::open(
            &real,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| dir_io("open", &real)(e.into()))?;
        let st = fstat(&fd).map_err(|e| dir_io("check", &real)(e.into()))?;
        judge_dir(st.st_uid, st.st_mode as u32, euid).map_err(|why| {
            TokenLockError::UntrustedDir {
                path: real.clone(),
                why,
                uid: euid,
            }
        })?;
        let mut dir = LockDir {
            path: real,
            fd,
            key: [0; KEY_LEN],
            euid,
        };
        dir.key = dir.load_key(create)?;
        Ok(dir)
    }

    /// Read the key; make it first when it is missing and `create` is set. A new key is
    /// written whole to a temporary file and then linked into place, so that a gateway
    /// starting at the same moment never reads half a key, and two never make different ones.
    fn load_key(&self, create: bool) -> Result<[u8; KEY_LEN], TokenLockError> {
        let path = self.path.join(KEY_FILE);
        let key_io = |op| {
            let path = path.clone();
            move |e: Errno| TokenLockError::KeyIo {
                op,
                path,
                source: e.into(),
            }
        };
        let bad = |why| TokenLockError::BadKey {
            path: path.clone(),
            why,
            uid: self.euid,
        };
        for make in [create, false] {
            let fd = match openat(
                &self.fd,
                KEY_FILE,
                OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
                Mode::empty(),
            ) {
                Ok(fd) => fd,
                Err(Errno::ELOOP) => return Err(bad(Distrust::Symlink)),
                Err(Errno::ENOENT) if make => {
                    self.make_key()?;
                    continue;
                }
                Err(e) => return Err(key_io("open")(e)),
            };
            let st = fstat(&fd).map_err(key_io("check"))?;
            self.judge_file(&st).map_err(bad)?;
            if st.st_mode as u32 & 0o077 != 0 {
                return Err(bad(Distrust::Readable(st.st_mode as u32 & 0o7777)));
            }
            if st.st_size as u64 != KEY_LEN as u64 {
                return Err(bad(Distrust::Size(st.st_size as u64)));
            }
            let mut key = [0; KEY_LEN];
            File::from(fd)
                .read_exact(&mut key)
                .map_err(|source| TokenLockError::KeyIo {
                    op: "read",
                    path: path.clone(),
                    source,
                })?;
            return Ok(key);
        }
        Err(key_io("open")(Errno::ENOENT))
    }

    fn make_key(&self) -> Result<(), TokenLockError> {
        let path = self.path.join(KEY_FILE);
        let key_io = |op| {
            let path = path.clone();
            move |source| TokenLockError::KeyIo { op, path, source }
        };
        let key = random_key().map_err(key_io("make"))?;
        let tmp = format!("{KEY_FILE}.{}.tmp", std::process::id());
        // A leftover of a process that had our PID and died before it could clean up.
        let _ = unlinkat(&self.fd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
        let fd = openat(
            &self.fd,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| self.create_error(&path, e))?;
        let mut file = File::from(fd);
        let written = file.write_all(&key).and_then(|()| file.sync_all());
        let linked = written.map_err(key_io("write")).and_then(|()| {
            match linkat(&self.fd, tmp.as_str(), &self.fd, KEY_FILE, AtFlags::empty()) {
                // Another gateway made one first: use that one.
                Ok(()) | Err(Errno::EEXIST) => Ok(()),
                Err(e) => Err(key_io("write")(e.into())),
            }
        });
        let _ = unlinkat(&self.fd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
        linked
    }

    /// A file in the lock directory must be a regular file of ours. Nobody else can create one
    /// there, but a file root left behind in a user's directory is no lock of the user's.
    fn judge_file(&self, st: &FileStat) -> Result<(), Distrust> {
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            Err(Distrust::NotFile)
        } else if st.st_uid != self.euid {
            Err(Distrust::Owner(st.st_uid))
        } else {
            Ok(())
        }
    }

    fn create_error(&self, path: &Path, e: Errno) -> TokenLockError {
        match e {
            Errno::EACCES | Errno::EPERM | Errno::EROFS => TokenLockError::NotWritable {
                path: path.to_owned(),
                dir: self.path.clone(),
                uid: self.euid,
                source: e.into(),
            },
            e => TokenLockError::FileIo {
                path: path.to_owned(),
                source: e.into(),
            },
        }
    }

    /// The lock file's name for `identity`.
    fn file_name(&self, identity: &str) -> String {
        format!("token-{}.lock", keyed_hash(&self.key, identity))
    }

    /// Take the lock for `identity` on behalf of `adapter`. The file is opened relative to the
    /// verified directory, never through a symbolic link, and never truncated at open: the
    /// holder record is written only once the lock is ours.
    fn acquire(
        &self,
        adapter: &str,
        identity: &str,
        me: &Holder,
    ) -> Result<HeldLock, TokenLockError> {
        let name = self.file_name(identity);
        let path = self.path.join(&name);
        let fd = openat(
            &self.fd,
            name.as_str(),
            OFlag::O_RDWR
                | OFlag::O_CREAT
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC
                | OFlag::O_NONBLOCK,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| match e {
            Errno::ELOOP => TokenLockError::BadFile {
                path: path.clone(),
                why: Distrust::Symlink,
            },
            e => self.create_error(&path, e),
        })?;
        let st = fstat(&fd).map_err(|e| TokenLockError::FileIo {
            path: path.clone(),
            source: e.into(),
        })?;
        self.judge_file(&st)
            .map_err(|why| TokenLockError::BadFile {
                path: path.clone(),
                why,
            })?;
        HeldLock::lock(File::from(fd), &path, me).map_err(|e| match e {
            LockError::Held { holder, .. } => TokenLockError::Held {
                adapter: adapter.to_owned(),
                holder,
            },
            e => TokenLockError::Lock(e),
        })
    }
}

/// 32 bytes from the kernel's random source.
fn random_key() -> io::Result<[u8; KEY_LEN]> {
    let mut key = [0; KEY_LEN];
    File::open("/dev/urandom")?.read_exact(&mut key)?;
    Ok(key)
}

/// HMAC-SHA256 (RFC 2104), written out here rather than taken from the `hmac` crate: it is a
/// dozen lines over the `sha2` we already use, checked against RFC 4231's test vectors below.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| k.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// The keyed hash of a credential's identity, as hex: safe to show and to name files with.
fn keyed_hash(key: &[u8], identity: &str) -> String {
    hmac_sha256(key, identity.as_bytes())
        .iter()
        .take(HASH_HEX / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A short, non-reversible name for a credential, for doctor (HSV006) to compare and show.
/// It is keyed like the lock files' names, so that it can't be tested offline either: with
/// this user's lock key when there is one, so that the hash shown is the name of the lock file
/// (for the same user and lock directory); otherwise with a key made up for this process and
/// never stored, which still compares every profile doctor reads in one run. Doctor never
/// creates a lock directory or a key.
pub fn fingerprint(identity: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 1.
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // Test case 2: a key shorter than the hash.
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block is hashed first.
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn the_name_depends_on_the_key_and_is_not_the_plain_hash() {
        let id = "discord:secret";
        let a = keyed_hash(&[1; 32], id);
        assert_eq!(a.len(), HASH_HEX);
        assert_eq!(a, keyed_hash(&[1; 32], id), "stable for one key");
        assert_ne!(a, keyed_hash(&[2; 32], id), "another key, another name");
        assert_ne!(a, keyed_hash(&[1; 32], "discord:other"));
        assert!(!hex(&Sha256::digest(id)).starts_with(&a[..12]));
    }

    #[test]
    fn each_scope_has_a_place_only_its_user_can_change() {
        let user = DirEnv {
            euid: 1000,
            ..DirEnv::default()
        };
        let nothing_exists = |_: &Path, _: u32| false;
        let run_user_exists = |p: &Path, uid: u32| p == Path::new("/run/user/1000") && uid == 1000;
        let run_exists = |p: &Path, uid: u32| p == Path::new("/run") && uid == 0;
        let with = |f: fn(&mut DirEnv)| {
            let mut e = user.clone();
            f(&mut e);
            e
        };
        // The override wins, whoever runs.
        let e = with(|e| {
            e.lock_dir = Some("/srv/locks".into());
            e.euid = 0;
        });
        assert_eq!(choose_dir(&e, run_exists), Some("/srv/locks".into()));
        // Root (system units, and root's user units alike): a root-owned directory in /run.
        let e = with(|e| {
            e.euid = 0;
            e.xdg_runtime_dir = Some("/run/user/0".into());
        });
        assert_eq!(choose_dir(&e, run_exists), Some("/run/hermes-svc".into()));
        assert_eq!(
            choose_dir(&e, nothing_exists),
            Some("/var/run/hermes-svc".into())
        );
        // A user unit.
        let e = with(|e| e.xdg_runtime_dir = Some("/run/user/1000".into()));
        assert_eq!(
            choose_dir(&e, nothing_exists),
            Some("/run/user/1000/hermes-svc".into())
        );
        // A system unit's user: no XDG_RUNTIME_DIR, but its runtime directory exists.
        let e = with(|e| {
            e.xdg_runtime_dir = Some("relative".into());
            e.home = Some("/var/lib/hermes".into());
        });
        assert_eq!(
            choose_dir(&e, run_user_exists),
            Some("/run/user/1000/hermes-svc".into())
        );
        // ... or not: its home.
        assert_eq!(
            choose_dir(&e, nothing_exists),
            Some("/var/lib/hermes/.local/state/hermes-svc/locks".into())
        );
        assert_eq!(choose_dir(&user, nothing_exists), None);
    }

    #[test]
    fn only_our_own_directory_is_trusted_and_parents_must_not_let_others_swap_it() {
        assert_eq!(judge_dir(1000, 0o40700, 1000), Ok(()));
        assert_eq!(judge_dir(1000, 0o40755, 1000), Ok(()));
        assert_eq!(judge_dir(0, 0o40700, 1000), Err(Distrust::Owner(0)));
        assert_eq!(
            judge_dir(65534, 0o41777, 0),
            Err(Distrust::Owner(65534)),
            "a directory someone else made first"
        );
        assert_eq!(
            judge_dir(1000, 0o41777, 1000),
            Err(Distrust::Writable(0o1777))
        );
        assert_eq!(
            judge_dir(1000, 0o40770, 1000),
            Err(Distrust::Writable(0o770))
        );

        assert_eq!(judge_parent(0, 0o40755, 1000), Ok(()));
        assert_eq!(judge_parent(0, 0o41777, 1000), Ok(()), "/tmp");
        assert_eq!(judge_parent(1000, 0o40700, 1000), Ok(()));
        assert_eq!(
            judge_parent(0, 0o40777, 1000),
            Err(Distrust::Writable(0o777))
        );
        assert_eq!(
            judge_parent(1001, 0o40755, 1000),
            Err(Distrust::Owner(1001))
        );
    }

    #[test]
    fn same_identity_conflicts_and_the_directory_key_and_lock_are_ours_alone() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("hsv-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let euid = nix::unistd::geteuid().as_raw();
        let locks = LockDir::open_at(&dir, euid, true).unwrap();
        let me = Holder {
            pid: std::process::id(),
            profile: "coder".into(),
        };
        let held = locks.acquire("qq", "qqbot:1:s", &me).unwrap();
        let err = locks.acquire("qq", "qqbot:1:s", &me).unwrap_err();
        assert!(err.is_conflict());
        assert!(
            err.to_string().starts_with(&format!(
                "token for adapter qq already held by PID {} (",
                std::process::id()
            )),
            "{err}"
        );
        assert!(locks.acquire("qq", "qqbot:2:s", &me).is_ok());
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(KEY_FILE)), 0o600);
        assert_eq!(mode(held.path()), 0o600);
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names
            .iter()
            .all(|n| !n.contains("qqbot") && !n.contains(":s")));
        assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");

        // The same key the next time, so the same names.
        let again = LockDir::open_at(&dir, euid, false).unwrap();
        assert_eq!(again.file_name("x"), locks.file_name("x"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn two_adapters_with_one_identity_name_both() {
        let adapters = vec![
            ("a".to_owned(), "discord:t".to_owned()),
            ("b".to_owned(), "discord:u".to_owned()),
            ("c".to_owned(), "discord:t".to_owned()),
        ];
        let err =
            acquire_all(Path::new("/p/gateway.toml"), &adapters, &Holder::default()).unwrap_err();
        assert!(err.is_conflict());
        assert_eq!(
            err.to_string(),
            "adapters a and c in /p/gateway.toml use the same bot credential, so they would \
             fight over one session: remove one of them, or give each its own credential"
        );
        assert!(!err.to_string().contains("discord:t"));
    }
}

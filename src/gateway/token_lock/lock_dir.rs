//! The verified lock directory: opened once, its key loaded or made, and every lock file
//! opened relative to it, so that no path in it can be swapped between a check and a use.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fstat, FileStat, Mode, SFlag};
use nix::unistd::{linkat, unlinkat, UnlinkatFlags};

use super::key::{keyed_hash, random_key, KEY_FILE, KEY_LEN};
use super::place::{check_parents, choose_dir, is_own_dir, judge_dir, DirEnv, Distrust};
use super::TokenLockError;
use crate::gateway::flock::{HeldLock, Holder, LockError};

/// This user's lock directory, verified, with its key.
pub(super) struct LockDir {
    path: PathBuf,
    fd: OwnedFd,
    pub(super) key: [u8; KEY_LEN],
    euid: u32,
}

impl LockDir {
    /// Find this user's lock directory, create it (0700) and its key if missing, and check
    /// that nobody else can change either.
    pub(super) fn open() -> Result<LockDir, TokenLockError> {
        let env = DirEnv::from_process();
        let path = choose_dir(&env, is_own_dir).ok_or(TokenLockError::NoDir { uid: env.euid })?;
        Self::open_at(&path, env.euid, true)
    }

    pub(super) fn open_at(path: &Path, euid: u32, create: bool) -> Result<LockDir, TokenLockError> {
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
    pub(super) fn file_name(&self, identity: &str) -> String {
        format!("token-{}.lock", keyed_hash(&self.key, identity))
    }

    /// Take the lock for `identity` on behalf of `adapter`. The file is opened relative to the
    /// verified directory, never through a symbolic link, and never truncated at open: the
    /// holder record is written only once the lock is ours.
    pub(super) fn acquire(
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

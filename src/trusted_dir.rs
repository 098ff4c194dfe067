//! A directory of a profile home that nobody but its user can change, and the files in it.
//!
//! Whoever can write a profile home (a group-writable home, say) can put things in it before
//! the gateway does, and a file's content proves nothing about who wrote it: a spool of
//! theirs is read by the agent as events, a journal of theirs is posted by the bot, a link
//! where the gateway writes sends its bytes into someone else's file, a directory of theirs
//! where the API socket is looked for serves their socket. The owner checks on `gateway.toml`
//! and `.env` (`bounded_read`) do not reach any of that. So every directory the gateway and
//! the CLI use in a home (`state/`, `state/api/`, `inbox/`, `inbox/cursors/`, `outbox/`,
//! a platform's login directory, `logs/`) is opened here, under one rule, and every file in one is opened
//! relative to it under the same rule:
//!
//! - **A directory** is opened with `O_DIRECTORY | O_NOFOLLOW` relative to its parent's
//!   descriptor, and checked on its own descriptor: a link is refused, and what was checked
//!   is what is used, whatever is renamed meanwhile. It must belong to the user (or root) and
//!   be writable by nobody else, so that everything in it was put there by them. A missing
//!   one is made with mode 0700.
//! - **A file** is opened with `O_NOFOLLOW | O_NONBLOCK` relative to the checked directory,
//!   so a link is refused and a FIFO cannot block the open, and then checked on its
//!   descriptor: a regular file, the user's (or root's), writable by nobody else.
//! - **A new file** is written whole by `atomic_file`: a temporary file made with
//!   `O_CREAT | O_EXCL | O_NOFOLLOW` under a random name in the same directory, renamed over
//!   the target. Nothing planted at any name is ever opened, let alone followed.
//!
//! The home itself and the directories above it are opened as usual, links included: where
//! the home lives is its owner's choice, and those directories are theirs to keep. A home
//! that others can write lets them remove or rename what is in it (and so stop the gateway),
//! never make it read their files or write through their links.
//!
//! Who counts as "the user" is [`Owner`]'s rule, as for `bounded_read`: the process's own
//! user or root for what the process acts on; also the owner of the directory above, the
//! account the profile belongs to, for what root does on another account's profile.
//!
//! Every refusal names the path and the fix (docs/health.md#the-profile-homes-files-the-trust-model).

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{fcntl, open, openat, renameat, AtFlags, FcntlArg, OFlag};
use nix::sys::stat::{fchmod, fstat, fstatat, mkdirat, FileStat, Mode, SFlag};
use nix::unistd::{fsync, unlinkat, UnlinkatFlags};

use crate::bounded_read::{self, kind_name, ForeignOwner, Owner, ReadError};

/// Why a directory of a profile home, or a file in one, was not used. Each names the path
/// and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(
        "{path} is a symbolic link, which hermes-svc never follows inside a profile home: someone else may have put it there; check where it points, then remove it{}",
        if *directory { " (hermes-svc makes the directory again)" } else { "" }
    )]
    Symlink { path: PathBuf, directory: bool },
    #[error(
        "{path} is {kind}, not a directory: check it, then remove it (hermes-svc makes the directory again)"
    )]
    NotDirectory { path: PathBuf, kind: &'static str },
    #[error("{path} is {kind}, not a regular file: check it, then remove it")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(transparent)]
    Owner(#[from] ForeignOwner),
    #[error(
        "{path} is writable by group or others (mode {mode:04o}): someone else could {}; check {}, then run `chmod go-w {path}`",
        if *directory { "replace the files in it" } else { "change it" },
        if *directory { "what is in it" } else { "it" }
    )]
    Writable {
        path: PathBuf,
        mode: u32,
        directory: bool,
    },
    /// Too large, or not text: what a bounded read refuses once the file passed the checks.
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("cannot {op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl TrustError {
    /// Whether a person must change something first: everything but an I/O error, which a
    /// retry may not meet again.
    pub fn needs_a_fix(&self) -> bool {
        !matches!(self, TrustError::Io { .. })
    }

    /// An I/O error that says the file or directory is not there.
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, TrustError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

fn io_error<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(Errno) -> TrustError + 'a {
    move |errno| TrustError::Io {
        op,
        path: path.to_owned(),
        source: errno.into(),
    }
}

/// How a file in a checked directory is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Append { mode: u32 },
}

/// A checked directory of a profile home, held open: everything done in it is done relative
/// to this descriptor, so a directory swapped in at the same path later changes nothing.
#[derive(Debug)]
pub(crate) struct TrustedDir {
    path: PathBuf,
    fd: OwnedFd,
    /// Its owner, whom [`Owner::SelfRootOrDirectory`] also trusts for the files in it.
    uid: u32,
    mode: u32,
    owner: Owner,
}

impl TrustedDir {
    /// The directory `dir`, checked; `None` when it (or the directory above it) does not
    /// exist. For readers, which make nothing.
    pub(crate) fn open(dir: &Path, owner: Owner) -> Result<Option<TrustedDir>, TrustError> {
        open_below_parent(dir, owner, false)
    }

    /// The directory `dir`, checked, made first (mode 0700) when missing. The directories
    /// above it are made as usual when missing: they are the home and its parents.
    pub(crate) fn create(dir: &Path, owner: Owner) -> Result<TrustedDir, TrustError> {
        open_below_parent(dir, owner, true)?.ok_or_else(|| io_error("open", dir)(Errno::ENOENT))
    }

    /// The directory `name` in this one, checked the same way; `None` when missing.
    pub(crate) fn child(&self, name: &str) -> Result<Option<TrustedDir>, TrustError> {
        let name = self.entry(name)?;
        let path = self.path.join(name);
        open_child(self.fd.as_fd(), self.uid, path, name, self.owner, false)
    }

    /// The directory `name` in this one, checked, made first (mode 0700) when missing.
    pub(crate) fn create_child(&self, name: &str) -> Result<TrustedDir, TrustError> {
        let name = self.entry(name)?;
        let path = self.path.join(name);
        open_child(
            self.fd.as_fd(),
            self.uid,
            path.clone(),
            name,
            self.owner,
            true,
        )?
        .ok_or_else(|| io_error("open", &path)(Errno::ENOENT))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor everything in the directory is opened relative to.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Take away every permission beyond `mode` (0700 for a directory a socket or a token
    /// lives in), when the directory has more. The rule already refuses write access for
    /// others; this is for read and search access too.
    pub(crate) fn narrow_to(&mut self, mode: u32) -> Result<(), TrustError> {
        if self.mode & !mode == 0 {
            return Ok(());
        }
        fchmod(&self.fd, Mode::from_bits_truncate((self.mode & mode) as _))
            .map_err(io_error("set the mode of", &self.path))?;
        tracing::info!(path = %self.path.display(), from = format!("{:04o}", self.mode), to = format!("{:04o}", self.mode & mode), "directory narrowed");
        self.mode &= mode;
        Ok(())
    }

    /// The file `name` in this directory, opened to read and checked: a regular file, owned
    /// by someone [`Owner`] accepts, writable by nobody else. `None` when it does not exist.
    pub(crate) fn open_read(&self, name: impl AsRef<OsStr>) -> Result<Option<File>, TrustError> {
        Ok(self
            .open_checked(name.as_ref(), Access::Read)?
            .map(|(file, _)| file))
    }

    /// The file `name` in this directory, opened to read and append, made with `mode` (less
    /// the umask) when missing, and checked as [`TrustedDir::open_read`] checks: the spool,
    /// the outbox journal, the cron log. Never truncated at open.
    pub(crate) fn open_append(
        &self,
        name: impl AsRef<OsStr>,
        mode: u32,
    ) -> Result<File, TrustError> {
        let name = name.as_ref();
        self.open_checked(name, Access::Append { mode })?
            .map(|(file, _)| file)
            .ok_or_else(|| io_error("open", &self.path.join(name))(Errno::ENOENT))
    }

    /// The file `name`, at most `limit` bytes, through [`TrustedDir::open_read`]; `None` when
    /// it does not exist.
    pub(crate) fn read(
        &self,
        name: impl AsRef<OsStr>,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, TrustError> {
        let name = name.as_ref();
        let Some((file, stat)) = self.open_checked(name, Access::Read)? else {
            return Ok(None);
        };
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        Ok(Some(bounded_read::read_opened(
            file,
            size,
            &self.path.join(name),
            limit,
        )?))
    }

    /// What is at `name`, a link not followed; `None` when nothing is.
    pub(crate) fn stat(&self, name: impl AsRef<OsStr>) -> Result<Option<FileStat>, TrustError> {
        let name = self.entry(name.as_ref())?;
        match fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(io_error("inspect", &self.path.join(name))(e)),
        }
    }

    /// Rename `from` to `to`, both in this directory: whatever is at `to` (a link included)
    /// is replaced, never followed.
    pub(crate) fn rename(
        &self,
        from: impl AsRef<OsStr>,
        to: impl AsRef<OsStr>,
    ) -> Result<(), TrustError> {
        let (from, to) = (self.entry(from.as_ref())?, self.entry(to.as_ref())?);
        renameat(&self.fd, from, &self.fd, to).map_err(io_error("rename", &self.path.join(from)))
    }

    /// Remove the file `name`, if it is there.
    pub(crate) fn remove(&self, name: impl AsRef<OsStr>) -> Result<(), TrustError> {
        let name = self.entry(name.as_ref())?;
        match unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(io_error("remove", &self.path.join(name))(e)),
        }
    }

    /// fsync the directory, so that a file made or renamed in it survives a machine crash.
    pub(crate) fn sync(&self) -> Result<(), TrustError> {
        fsync(&self.fd).map_err(io_error("fsync", &self.path))
    }

    /// `name` as one entry of this directory: a name with a `/` in it would reach past the
    /// checked directory, so it is refused.
    fn entry<'n>(&self, name: &'n (impl AsRef<OsStr> + ?Sized)) -> Result<&'n OsStr, TrustError> {
        let name = name.as_ref();
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
            return Err(TrustError::Io {
                op: "open",
                path: self.path.join(name),
                source: io::Error::new(io::ErrorKind::InvalidInput, "not a name in the directory"),
            });
        }
        Ok(name)
    }

    fn open_checked(
        &self,
        name: &OsStr,
        access: Access,
    ) -> Result<Option<(File, FileStat)>, TrustError> {
        let name = self.entry(name)?;
        let path = self.path.join(name);
        let base = OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
        let (flags, mode) = match access {
            Access::Read => (OFlag::O_RDONLY, 0),
            Access::Append { mode } => (OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT, mode),
        };
        let fd = match openat(
            &self.fd,
            name,
            base | flags,
            Mode::from_bits_truncate(mode as _),
        ) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) if access == Access::Read => return Ok(None),
            Err(Errno::ELOOP) => {
                return Err(TrustError::Symlink {
                    path,
                    directory: false,
                })
            }
            // A FIFO with no reader, opened for writing without blocking.
            Err(Errno::ENXIO) => {
                return Err(TrustError::NotRegular {
                    path,
                    kind: kind_name(SFlag::S_IFIFO.bits()),
                })
            }
            Err(e) => return Err(io_error("open", &path)(e)),
        };
        let stat = fstat(&fd).map_err(io_error("inspect", &path))?;
        if file_type(&stat) != SFlag::S_IFREG {
            return Err(TrustError::NotRegular {
                path,
                kind: kind_name(stat.st_mode),
            });
        }
        self.judge(&path, &stat, self.uid, false)?;
        // Only the open had to be non-blocking; a descriptor handed on (a cron job's stdout)
        // behaves as usual.
        let flags = fcntl(&fd, FcntlArg::F_GETFL).map_err(io_error("configure", &path))?;
        let flags = OFlag::from_bits_truncate(flags) & !OFlag::O_NONBLOCK;
        fcntl(&fd, FcntlArg::F_SETFL(flags)).map_err(io_error("configure", &path))?;
        Ok(Some((File::from(fd), stat)))
    }

    /// The owner and mode rule, for a directory or a file.
    fn judge(
        &self,
        path: &Path,
        stat: &FileStat,
        dir_owner: u32,
        directory: bool,
    ) -> Result<(), TrustError> {
        judge(path, stat, dir_owner, self.owner, directory)
    }
}

fn judge(
    path: &Path,
    stat: &FileStat,
    dir_owner: u32,
    owner: Owner,
    directory: bool,
) -> Result<(), TrustError> {
    owner.check(path, stat.st_uid, dir_owner)?;
    let mode = permissions(stat);
    if mode & 0o022 != 0 {
        return Err(TrustError::Writable {
            path: path.to_owned(),
            mode,
            directory,
        });
    }
    Ok(())
}

/// A file's permission bits (`0o7777` of its mode).
// `mode_t` is a `u16` on macOS, where the cast is needed.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn permissions(stat: &FileStat) -> u32 {
    stat.st_mode as u32 & 0o7777
}

/// A file's device and inode, which say whether two names are one file.
// `dev_t` is an `i32` on macOS, where the casts are needed.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn identity(stat: &FileStat) -> (u64, u64) {
    (stat.st_dev as u64, stat.st_ino as u64)
}

fn file_type(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits())
}

/// `dir`'s parent (`.` for a bare name) and its own name.
fn split(dir: &Path) -> Result<(&Path, &OsStr), TrustError> {
    let name = dir.file_name().ok_or_else(|| TrustError::Io {
        op: "open",
        path: dir.to_owned(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "not a directory's name"),
    })?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((parent, name))
}

/// The home or a directory above it: opened as usual, links followed. `O_DIRECTORY` and
/// `O_NONBLOCK`, so that a FIFO there fails at once instead of blocking.
fn open_plain_dir(path: &Path) -> Result<OwnedFd, Errno> {
    open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    )
}

/// `dir`, below its parent opened as usual (made first, with `create`, as the home and its
/// parents are made).
fn open_below_parent(
    dir: &Path,
    owner: Owner,
    create: bool,
) -> Result<Option<TrustedDir>, TrustError> {
    let (parent, name) = split(dir)?;
    if create {
        std::fs::create_dir_all(parent).map_err(|source| TrustError::Io {
            op: "create",
            path: parent.to_owned(),
            source,
        })?;
    }
    let parent_fd = match open_plain_dir(parent) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) if !create => return Ok(None),
        Err(e) => return Err(io_error("open", parent)(e)),
    };
    let parent_uid = fstat(&parent_fd)
        .map_err(io_error("inspect", parent))?
        .st_uid;
    open_child(
        parent_fd.as_fd(),
        parent_uid,
        dir.to_owned(),
        name,
        owner,
        create,
    )
}

/// Open (and with `create`, first make) the directory `name` in `parent`, and check it.
fn open_child(
    parent: BorrowedFd<'_>,
    parent_uid: u32,
    path: PathBuf,
    name: &OsStr,
    owner: Owner,
    create: bool,
) -> Result<Option<TrustedDir>, TrustError> {
    if create {
        match mkdirat(parent, name, Mode::from_bits_truncate(0o700)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(io_error("create", &path)(e)),
        }
    }
    let fd = match openat(
        parent,
        name,
        OFlag::O_RDONLY
            | OFlag::O_DIRECTORY
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC
            | OFlag::O_NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) if !create => return Ok(None),
        // A link, or something else that is not a directory: which, from the entry itself.
        Err(Errno::ELOOP | Errno::ENOTDIR) => {
            let stat = fstatat(parent, name, AtFlags::AT_SYMLINK_NOFOLLOW)
                .map_err(io_error("inspect", &path))?;
            return Err(match file_type(&stat) {
                SFlag::S_IFLNK => TrustError::Symlink {
                    path,
                    directory: true,
                },
                _ => TrustError::NotDirectory {
                    kind: match file_type(&stat) {
                        SFlag::S_IFREG => "a regular file",
                        _ => kind_name(stat.st_mode),
                    },
                    path,
                },
            });
        }
        Err(e) => return Err(io_error("open", &path)(e)),
    };
    let stat = fstat(&fd).map_err(io_error("inspect", &path))?;
    judge(&path, &stat, parent_uid, owner, true)?;
    Ok(Some(TrustedDir {
        mode: permissions(&stat),
        uid: stat.st_uid,
        path,
        fd,
        owner,
    }))
}

#[cfg(test)]
mod tests;

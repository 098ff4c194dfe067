//! Whole-file writes that never leave a half-written file behind, and never write through a
//! link.
//!
//! A crash or a full disk mid-write leaves either the old file or the new one: the content goes
//! to a temporary file in the same directory, is synced, and is then renamed over the target.
//!
//! The temporary file is made with `O_CREAT | O_EXCL | O_NOFOLLOW` under a random name
//! (`.NAME.tmp.PID.RANDOM`), relative to the directory's descriptor. A predictable name opened
//! with create and truncate, as it once was, let anyone who could write the directory plant a
//! link there and have the gateway overwrite the file it pointed to (a pid file's JSON over
//! `~/.bashrc`; root's `login` wrote a token into another user's file the same way).
//! Now a planted entry is never opened: the name is taken afresh. The rename replaces
//! whatever is at the target, a link included, without following it.
//!
//! [`write()`] is for any path (unit files, man pages); [`write_in`] and [`TempFile`] are for
//! a checked directory of a profile home ([`TrustedDir`]).

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{open, openat, renameat, AtFlags, OFlag};
use nix::sys::stat::{fstatat, Mode, SFlag};
use nix::unistd::{fsync, unlinkat, UnlinkatFlags};

use crate::trusted_dir::{permissions, TrustError, TrustedDir};

/// How many random names are tried before giving up: each is 64 random bits, so more than
/// one means someone is planting names.
const TEMP_TRIES: usize = 8;

/// Write `contents` to `path` atomically, creating parent directories, with `mode` for a new
/// file (an existing regular file's mode is kept, so a person's `chmod` survives).
pub(crate) fn write(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    write_with(path, contents, mode, Sync::Durable)
}

/// Whether the new content must survive a machine crash, or only be replaced whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sync {
    /// fsync the file and its directory: unit files, pid files, anything a person relies on.
    Durable,
    /// Rename only: readers still never see a half file, but a crash may leave the previous
    /// version. For snapshots rewritten every few seconds, whose readers treat an old one as
    /// stale anyway; an fsync per tick would cost more than the snapshot is worth.
    Replace,
}

/// [`write()`] with a choice of durability.
pub(crate) fn write_with(path: &Path, contents: &[u8], mode: u32, sync: Sync) -> io::Result<()> {
    let (dir_path, name) = match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => (
            if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            },
            name,
        ),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "path has no parent",
            ))
        }
    };
    fs::create_dir_all(dir_path)?;
    let dir = open(
        dir_path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // An existing regular file's mode, never a link's target's.
    let mode = match fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st)
            if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFREG =>
        {
            permissions(&st)
        }
        _ => mode,
    };
    let mut temp = TempFile::create_at(dir.as_fd(), dir_path, name, mode)?;
    temp.file.write_all(contents)?;
    temp.persist_io(sync).map(drop)
}

/// Write `contents` to `name` in the checked directory `dir` atomically, with mode `mode`
/// (less the umask) whatever mode an earlier file had: the gateway's own files in a profile
/// home (the state file, a login) are never wider than it makes them.
pub(crate) fn write_in(
    dir: &TrustedDir,
    name: &str,
    contents: &[u8],
    mode: u32,
    sync: Sync,
) -> Result<(), TrustError> {
    let mut temp = TempFile::create_in(dir, name, mode)?;
    temp.file()
        .write_all(contents)
        .map_err(|source| TrustError::Io {
            op: "write",
            path: temp.path(),
            source,
        })?;
    temp.persist(sync).map(drop)
}

/// A temporary file that becomes `target` in the same directory, whole, when persisted, and
/// is removed if dropped before that.
#[derive(Debug)]
pub(crate) struct TempFile<'d> {
    dir: BorrowedFd<'d>,
    dir_path: &'d Path,
    name: OsString,
    target: OsString,
    file: File,
    persisted: bool,
}

impl<'d> TempFile<'d> {
    /// A new, empty temporary file for `target` in the checked directory `dir`, with mode
    /// `mode` less the umask.
    pub(crate) fn create_in(
        dir: &'d TrustedDir,
        target: &str,
        mode: u32,
    ) -> Result<TempFile<'d>, TrustError> {
        if target.is_empty() || target.contains('/') || target == "." || target == ".." {
            return Err(TrustError::Io {
                op: "write",
                path: dir.path().join(target),
                source: io::Error::new(io::ErrorKind::InvalidInput, "not a name in the directory"),
            });
        }
        Self::create_at(dir.fd(), dir.path(), OsStr::new(target), mode).map_err(|source| {
            TrustError::Io {
                op: "create a temporary file for",
                path: dir.path().join(target),
                source,
            }
        })
    }

    fn create_at(
        dir: BorrowedFd<'d>,
        dir_path: &'d Path,
        target: &OsStr,
        mode: u32,
    ) -> io::Result<TempFile<'d>> {
        let mut last = Errno::EEXIST;
        for _ in 0..TEMP_TRIES {
            let mut name = OsString::from(".");
            name.push(target);
            name.push(format!(
                ".tmp.{}.{:016x}",
                std::process::id(),
                fastrand::u64(..)
            ));
            match openat(
                dir,
                name.as_os_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(mode as _),
            ) {
                Ok(fd) => {
                    return Ok(TempFile {
                        dir,
                        dir_path,
                        name,
                        target: target.to_owned(),
                        file: File::from(fd),
                        persisted: false,
                    })
                }
                // Something is already there: never opened, another name tried.
                Err(Errno::EEXIST) => last = Errno::EEXIST,
                Err(e) => return Err(e.into()),
            }
        }
        Err(last.into())
    }

    /// The file, to write the content into.
    pub(crate) fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Where the temporary file is, for messages.
    pub(crate) fn path(&self) -> PathBuf {
        self.dir_path.join(&self.name)
    }

    /// Rename it over the target, which it then is (fsyncing it first, and the directory
    /// after, with [`Sync::Durable`]). The file stays open: it is the target now.
    pub(crate) fn persist(self, sync: Sync) -> Result<File, TrustError> {
        let path = self.dir_path.join(&self.target);
        self.persist_io(sync).map_err(|source| TrustError::Io {
            op: "write",
            path,
            source,
        })
    }

    fn persist_io(mut self, sync: Sync) -> io::Result<File> {
        if sync == Sync::Durable {
            self.file.sync_all()?;
        }
        renameat(
            self.dir,
            self.name.as_os_str(),
            self.dir,
            self.target.as_os_str(),
        )?;
        self.persisted = true;
        if sync == Sync::Durable {
            fsync(self.dir)?;
        }
        self.file.try_clone()
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if !self.persisted {
            let _ = unlinkat(self.dir, self.name.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
    }
}

/// Is `name` one of [`TempFile`]'s names (`.NAME.tmp.PID.RANDOM`, or `.NAME.tmp.PID` from
/// before the names were random), and which process made it?
pub(crate) fn temp_owner(name: &str) -> Option<u32> {
    let (_, tail) = name.strip_prefix('.')?.rsplit_once(".tmp.")?;
    let pid = match tail.split_once('.') {
        Some((pid, random))
            if random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            pid
        }
        Some(_) => return None,
        None => tail,
    };
    pid.parse().ok()
}

#[cfg(test)]
mod tests;

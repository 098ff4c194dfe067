//! Reading a small file that someone else may have tampered with: `gateway.toml`, `.env`,
//! `state/gateway.json` and `gateway.pid`.
//!
//! `std::fs::read` trusts the path. A FIFO there blocks the reader forever (doctor and the
//! gateway both hung on a FIFO `gateway.toml`), a symlink to `/dev/zero` never ends (the
//! gateway grew to 3 GB in 5 s), and a 3 GB sparse state file costs 3 GB of memory and
//! seconds of reading before `status` can say anything. So every such read here:
//!
//! - opens the directory, then the file in it with `O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
//!   O_NOCTTY`: a symlink as the last component is refused, and opening a FIFO or a device
//!   cannot block;
//! - checks the opened file (`fstat`, so nothing can be swapped in between): it must be a
//!   regular file, no larger than the caller's limit, and owned by someone the caller trusts
//!   ([`Owner`]);
//! - reads at most limit + 1 bytes, so a file that grows after the check is caught too.
//!
//! Every refusal names the file and says what to do about it.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{open, openat, OFlag};
use nix::sys::stat::{fstat, Mode, SFlag};

/// The limit for configs (`gateway.toml`, `.env`), state files and pid files. What the
/// gateway writes is a few KiB and a config that is a thousand times that is not one; the
/// limit keeps a hostile or broken file from costing more than a MiB to look at.
pub(crate) const LIMIT: u64 = 1024 * 1024;

/// Whose files a read accepts. Anyone else's file in a profile's home was put there by
/// someone who should not be able to configure (or fake the health of) that gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Root, or the user this process runs as: for what the process acts on, as the
    /// gateway does on its config and `.env`, and for `status` in user scope, which runs as
    /// the profile's user.
    SelfOrRoot,
    /// Also the owner of the directory the file is in, the account the profile belongs to:
    /// for reports (`doctor`, system-scope `status`) that root or another admin runs on a
    /// profile of another account. They only show what they read.
    SelfRootOrDirectory,
}

impl Owner {
    /// That a file (or a directory of a profile home) at `path`, owned by `owner`, in a
    /// directory owned by `dir_owner`, may be used by this process.
    pub(crate) fn check(self, path: &Path, owner: u32, dir_owner: u32) -> Result<(), ForeignOwner> {
        let euid = nix::unistd::geteuid().as_raw();
        if self.accepts(owner, euid, dir_owner) {
            return Ok(());
        }
        Err(ForeignOwner {
            path: path.to_owned(),
            owner,
            euid,
            dir_owner,
            dir_owner_trusted: self == Owner::SelfRootOrDirectory,
        })
    }

    /// Whether a file owned by `file_owner`, in a directory owned by `dir_owner`, may be read
    /// by a process running as `euid`.
    fn accepts(self, file_owner: u32, euid: u32, dir_owner: u32) -> bool {
        file_owner == 0
            || file_owner == euid
            || (self == Owner::SelfRootOrDirectory && file_owner == dir_owner)
    }
}

/// Why a file was not read. Each message names the file and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(
        "{path} is a symbolic link, which hermes-svc does not follow here: replace the link with the file itself"
    )]
    Symlink { path: PathBuf },
    #[error("{path} is {kind}, not a regular file: replace it with a regular file")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "{path} is too large ({}, the limit for this file is {}): it is not a file hermes-svc wrote; check it, then remove it or cut it down",
        size_text(*size),
        size_text(*limit)
    )]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error(transparent)]
    Owner(#[from] ForeignOwner),
    #[error("{path} is not UTF-8 text")]
    NotText { path: PathBuf },
    #[error("cannot {op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A file (or a directory of a profile home) that belongs to someone an [`Owner`] rule does
/// not accept.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path} is owned by uid {owner}, not by you (uid {euid}){}: someone else may have put it there; check it, then `chown` it or remove it",
    if *dir_owner_trusted { format!(", root or the owner of the directory it is in (uid {dir_owner})") } else { " or root".to_owned() }
)]
pub struct ForeignOwner {
    pub(crate) path: PathBuf,
    pub(crate) owner: u32,
    pub(crate) euid: u32,
    pub(crate) dir_owner: u32,
    pub(crate) dir_owner_trusted: bool,
}

/// `1048576 bytes (1 MiB)`: exact, with a size a person can take in at a glance.
fn size_text(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = "";
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    if unit.is_empty() {
        format!("{bytes} bytes")
    } else {
        format!("{bytes} bytes, {value:.1} {unit}")
    }
}

fn io_error<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(Errno) -> ReadError + 'a {
    move |errno| ReadError::Io {
        op,
        path: path.to_owned(),
        source: io::Error::from(errno),
    }
}

/// What a file type is called in a message. `mode_t`, not `u32`: it is a `u16` on macOS.
pub(crate) fn kind_name(mode: nix::sys::stat::mode_t) -> &'static str {
    match SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFIFO => "a FIFO (named pipe)",
        SFlag::S_IFCHR => "a character device",
        SFlag::S_IFBLK => "a block device",
        SFlag::S_IFDIR => "a directory",
        SFlag::S_IFSOCK => "a socket",
        _ => "a special file",
    }
}

/// The file at `path`, at most `limit` bytes, from an owner `owner` accepts; `None` when it
/// (or its directory) does not exist.
pub(crate) fn read(path: &Path, limit: u64, owner: Owner) -> Result<Option<Vec<u8>>, ReadError> {
    let Some(name) = path.file_name() else {
        return Err(ReadError::NotRegular {
            path: path.to_owned(),
            kind: "a directory",
        });
    };
    let dir_path = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // O_DIRECTORY: a FIFO where the directory should be fails at once instead of blocking.
    let dir = match open(
        dir_path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(io_error("open the directory of", path)(e)),
    };
    let dir_owner = fstat(&dir)
        .map_err(io_error("inspect the directory of", path))?
        .st_uid;
    let fd: OwnedFd = match openat(
        &dir,
        name,
        OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_CLOEXEC
            | OFlag::O_NOCTTY,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        Err(Errno::ELOOP) => {
            return Err(ReadError::Symlink {
                path: path.to_owned(),
            })
        }
        Err(e) => return Err(io_error("open", path)(e)),
    };
    let stat = fstat(&fd).map_err(io_error("inspect", path))?;
    if SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFREG {
        return Err(ReadError::NotRegular {
            path: path.to_owned(),
            kind: kind_name(stat.st_mode),
        });
    }
    owner.check(path, stat.st_uid, dir_owner)?;
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    read_opened(File::from(fd), size, path, limit).map(Some)
}

/// The rest of a bounded read, once `file` (of `size` bytes by its `fstat`) is open and
/// checked: refused from its size alone when over `limit`, and at most `limit` + 1 bytes
/// read, so a file that grows after the check is caught too.
pub(crate) fn read_opened(
    file: File,
    size: u64,
    path: &Path,
    limit: u64,
) -> Result<Vec<u8>, ReadError> {
    if size > limit {
        return Err(ReadError::TooLarge {
            path: path.to_owned(),
            size,
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| ReadError::Io {
            op: "read",
            path: path.to_owned(),
            source,
        })?;
    // It grew between the check and the read.
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            path: path.to_owned(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// [`read`], as UTF-8 text.
pub(crate) fn read_to_string(
    path: &Path,
    limit: u64,
    owner: Owner,
) -> Result<Option<String>, ReadError> {
    read(path, limit, owner)?
        .map(|bytes| {
            String::from_utf8(bytes).map_err(|_| ReadError::NotText {
                path: path.to_owned(),
            })
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hsv-bounded-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn reads_a_small_file_and_says_none_when_it_or_its_directory_is_missing() {
        let dir = temp_dir("small");
        let file = dir.join("gateway.toml");
        std::fs::write(&file, "x = 1\n").unwrap();
        assert_eq!(
            read_to_string(&file, LIMIT, Owner::SelfOrRoot).unwrap(),
            Some("x = 1\n".to_owned())
        );
        assert!(read(&dir.join("absent"), LIMIT, Owner::SelfOrRoot)
            .unwrap()
            .is_none());
        assert!(read(&dir.join("no/such/dir/f"), LIMIT, Owner::SelfOrRoot)
            .unwrap()
            .is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_fifo_is_refused_at_once_instead_of_blocking() {
        let dir = temp_dir("fifo");
        let fifo = dir.join("gateway.toml");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        let err = read(&fifo, LIMIT, Owner::SelfOrRoot).unwrap_err();
        assert!(matches!(err, ReadError::NotRegular { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("gateway.toml is a FIFO") && text.contains("replace it"),
            "{text}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_symlink_is_refused_even_to_a_regular_file_and_a_device_is_refused() {
        let dir = temp_dir("link");
        let target = dir.join("real.toml");
        std::fs::write(&target, "").unwrap();
        symlink(&target, dir.join("link.toml")).unwrap();
        symlink("/dev/zero", dir.join("zero.toml")).unwrap();
        for name in ["link.toml", "zero.toml"] {
            let err = read(&dir.join(name), LIMIT, Owner::SelfOrRoot).unwrap_err();
            assert!(matches!(err, ReadError::Symlink { .. }), "{name}: {err}");
            assert!(err.to_string().contains("symbolic link"), "{err}");
        }
        let err = read(Path::new("/dev/zero"), LIMIT, Owner::SelfOrRoot).unwrap_err();
        assert!(
            err.to_string()
                .contains("is a character device, not a regular file"),
            "{err}"
        );
        let err = read(&dir, LIMIT, Owner::SelfOrRoot).unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_huge_sparse_file_is_refused_without_reading_it() {
        let dir = temp_dir("sparse");
        let file = dir.join("gateway.json");
        File::create(&file)
            .unwrap()
            .set_len(3 * 1024 * 1024 * 1024)
            .unwrap();
        let started = std::time::Instant::now();
        let err = read(&file, LIMIT, Owner::SelfOrRoot).unwrap_err();
        assert!(matches!(err, ReadError::TooLarge { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("too large (3221225472 bytes, 3.0 GiB, the limit for this file is 1048576 bytes, 1.0 MiB)"),
            "{err}"
        );
        // Refused from fstat alone: not even one 1 MiB read.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // Exactly at the limit is fine; one byte over is not.
        File::create(&file).unwrap().set_len(16).unwrap();
        assert_eq!(
            read(&file, 16, Owner::SelfOrRoot).unwrap().unwrap().len(),
            16
        );
        assert!(read(&file, 15, Owner::SelfOrRoot).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_owner_rule() {
        let (root, me, them, dir) = (0, 1000, 1001, 1002);
        for owner in [Owner::SelfOrRoot, Owner::SelfRootOrDirectory] {
            assert!(owner.accepts(root, me, dir));
            assert!(owner.accepts(me, me, dir));
            assert!(!owner.accepts(them, me, dir), "{owner:?}");
            // Root running as itself trusts only root's files...
            assert!(!owner.accepts(them, root, dir), "{owner:?}");
        }
        // ...unless it is looking at the account whose directory it is.
        assert!(!Owner::SelfOrRoot.accepts(dir, root, dir));
        assert!(Owner::SelfRootOrDirectory.accepts(dir, root, dir));
        assert!(Owner::SelfRootOrDirectory.accepts(dir, me, dir));
    }

    #[test]
    fn invalid_utf8_is_an_error_naming_the_file() {
        let dir = temp_dir("utf8");
        let file = dir.join(".env");
        std::fs::write(&file, b"A=\xff\n").unwrap();
        let err = read_to_string(&file, LIMIT, Owner::SelfOrRoot).unwrap_err();
        assert!(err.to_string().ends_with(".env is not UTF-8 text"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}

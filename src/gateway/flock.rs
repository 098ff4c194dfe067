//! Locks held by the kernel, so that a dead process can never leave a stale lock behind.
//!
//! The lock file also records who holds it (a JSON line), written through the holder's own
//! locked descriptor. That record is only a hint: whoever can write the file can write anything
//! into it. So the loser names the holder from the kernel's lock table and from the holding
//! process itself, and uses the record only where the kernel agrees with it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg, OFlag};
use serde::{Deserialize, Serialize};

/// Who holds a lock, as written into the lock file by the holder.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Holder {
    pub(crate) pid: u32,
    pub(crate) profile: String,
}

/// Who holds a lock, as far as the kernel can confirm it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Owner {
    /// From the kernel's lock table: `None` when it named nobody (the lock was let go in the
    /// meantime, or `/proc` is not mounted, or there is none as on macOS), `Some(0)` for a
    /// process in another PID namespace.
    pub(crate) pid: Option<u32>,
    /// The profile that process serves, from its command line (`gateway run --profile P`).
    pub(crate) profile: Option<String>,
    /// The process's name (`/proc/PID/comm`) when it is not a gateway.
    pub(crate) comm: Option<String>,
    /// The process has exited. A flock belongs to the open file, not to the process that
    /// took it, and the kernel's table keeps naming that process while a child it started
    /// (which inherited the descriptor) still holds the lock.
    pub(crate) exited: bool,
}

impl Owner {
    /// Name the process `pid` that the kernel says holds the lock. `cmdline` and `comm` are
    /// read from its `/proc` entry (`None` if unreadable), and `exited` says it has none.
    /// `record` is what the lock file says; it is believed only when the process is running
    /// but can't be read, and it names that same PID.
    fn name(
        pid: Option<u32>,
        exited: bool,
        cmdline: Option<&[u8]>,
        comm: Option<&str>,
        record: Option<Holder>,
    ) -> Owner {
        let Some(pid) = pid.filter(|p| *p != 0) else {
            return Owner {
                pid,
                ..Owner::default()
            };
        };
        if exited {
            return Owner {
                pid: Some(pid),
                exited: true,
                ..Owner::default()
            };
        }
        match cmdline {
            Some(raw) => match gateway_profile(raw) {
                Some(profile) => Owner {
                    pid: Some(pid),
                    profile: Some(profile),
                    ..Owner::default()
                },
                None => Owner {
                    pid: Some(pid),
                    comm: comm.map(printable),
                    ..Owner::default()
                },
            },
            None => Owner {
                pid: Some(pid),
                profile: record
                    .filter(|r| r.pid == pid)
                    .and_then(|r| crate::profile::ProfileName::parse(&r.profile).ok())
                    .map(|p| p.to_string()),
                ..Owner::default()
            },
        }
    }
}

/// The profile of a `hermes-svc gateway run --profile P` command line (NUL-separated), if it
/// is one and P is a valid profile name.
fn gateway_profile(cmdline: &[u8]) -> Option<String> {
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let run = args
        .windows(2)
        .position(|w| w[0] == b"gateway" && w[1] == b"run")?;
    let rest = &args[run + 2..];
    let value = rest.iter().enumerate().find_map(|(i, a)| {
        if *a == b"--profile" {
            rest.get(i + 1).copied()
        } else {
            a.strip_prefix(b"--profile=")
        }
    })?;
    let name = std::str::from_utf8(value).ok()?;
    crate::profile::ProfileName::parse(name)
        .ok()
        .map(|p| p.to_string())
}

/// A process name as it may be shown: anyone can name a process anything, including a line
/// break followed by a fake log line.
fn printable(s: &str) -> String {
    s.trim_end_matches('\n')
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    #[error("{} is held by {}", .path.display(), describe(.holder))]
    Held { path: PathBuf, holder: Owner },
    #[error(
        "lock file {} is a symbolic link, which is never followed: remove it (it holds no state)",
        .path.display()
    )]
    Symlink { path: PathBuf },
    #[error("failed to lock {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// "profile coder (PID 1234)" for a gateway, "PID 99 (flock), which is not a hermes-svc
/// gateway" for anything else, "another process" when the kernel named no one.
pub(crate) fn describe(holder: &Owner) -> String {
    match holder {
        Owner { pid: None, .. } => "another process".into(),
        Owner { pid: Some(0), .. } => "a process in another PID namespace".into(),
        Owner {
            pid: Some(pid),
            exited: true,
            ..
        } => format!("a process that PID {pid} started before it exited"),
        Owner {
            pid: Some(pid),
            profile: Some(profile),
            ..
        } => format!("profile {profile} (PID {pid})"),
        Owner {
            pid: Some(pid),
            comm: Some(comm),
            ..
        } => format!("PID {pid} ({comm}), which is not a hermes-svc gateway"),
        Owner { pid: Some(pid), .. } => format!("PID {pid}"),
    }
}

/// An exclusive flock, released when dropped or when the process dies.
#[derive(Debug)]
pub(crate) struct HeldLock {
    _lock: Flock<File>,
}

impl HeldLock {
    /// Take the lock at `path` without waiting, creating the file (0600) if needed. A symbolic
    /// link is never followed. If another process holds the lock, say who.
    pub(crate) fn try_acquire(path: &Path, me: &Holder) -> Result<HeldLock, LockError> {
        let io_err = |source| LockError::Io {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        // Never truncated at open: until it is locked, the file may be another process's.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(OFlag::O_NOFOLLOW.bits())
            .open(path)
            .map_err(|e| match Errno::from_raw(e.raw_os_error().unwrap_or(0)) {
                Errno::ELOOP => LockError::Symlink {
                    path: path.to_owned(),
                },
                _ => io_err(e),
            })?;
        Self::lock(file, path, me)
    }

    /// Take the lock on `file`, already opened read-write at `path`, without waiting. The
    /// holder record is written only once the lock is ours, through our own descriptor.
    pub(crate) fn lock(mut file: File, path: &Path, me: &Holder) -> Result<HeldLock, LockError> {
        let io_err = |source| LockError::Io {
            path: path.to_owned(),
            source,
        };
        // A second try only when the kernel named no holder: it let go in between.
        for retry in [true, false] {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => {
                    let record = serde_json::to_string(me).expect("holder serialises") + "\n";
                    lock.set_len(0).map_err(io_err)?;
                    lock.write_all_at(record.as_bytes(), 0).map_err(io_err)?;
                    // Older versions made lock files 0644, which anyone could open and lock.
                    // Ours now: the mode can be fixed, and nothing depends on this succeeding.
                    let _ = nix::sys::stat::fchmod(
                        &*lock,
                        nix::sys::stat::Mode::from_bits_truncate(0o600),
                    );
                    return Ok(HeldLock { _lock: lock });
                }
                Err((f, Errno::EWOULDBLOCK)) => {
                    let holder = who_holds(&f);
                    if retry && holder.pid.is_none() {
                        file = f;
                        continue;
                    }
                    return Err(LockError::Held {
                        path: path.to_owned(),
                        holder,
                    });
                }
                Err((_, errno)) => return Err(io_err(io::Error::from(errno))),
            }
        }
        unreachable!("the second try returns")
    }
}

/// Who holds the flock on the file at `path`, as [`who_holds`] names them, without taking the
/// lock: for `reload`, which signals only a process that holds its profile's lock (where
/// there is a lock table to ask).
#[cfg(target_os = "linux")]
pub(crate) fn holder(path: &Path) -> Owner {
    match File::open(path) {
        Ok(file) => who_holds(&file),
        Err(_) => Owner::default(),
    }
}

/// The holder of the flock on `file`, from the kernel's lock table and the holder's `/proc`.
fn who_holds(file: &File) -> Owner {
    let pid = file
        .metadata()
        .ok()
        .and_then(|m| LockTable::read().holder_of(m.dev(), m.ino()));
    // At offset 0 whatever was read before: this may be the second look.
    let mut buf = [0u8; 4096];
    let n = file.read_at(&mut buf, 0).unwrap_or(0);
    let record = serde_json::from_str(String::from_utf8_lossy(&buf[..n]).trim()).ok();
    let proc = |what: &str| pid.and_then(|p| std::fs::read(format!("/proc/{p}/{what}")).ok());
    let exited = pid.is_some_and(|p| {
        std::fs::symlink_metadata(format!("/proc/{p}"))
            .is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
    });
    let cmdline = proc("cmdline");
    let comm = proc("comm").map(|c| String::from_utf8_lossy(&c).into_owned());
    Owner::name(pid, exited, cmdline.as_deref(), comm.as_deref(), record)
}

/// The holder record in a lock file: what the holder said when it took the lock. Only the
/// flock itself is the truth; see [`LockTable`] for that.
pub(crate) fn recorded_holder(path: &Path) -> Option<Holder> {
    serde_json::from_str(std::fs::read_to_string(path).ok()?.trim()).ok()
}

/// The kernel's table of flock holders (`/proc/locks`), read once, so that an onlooker such as
/// doctor can tell who holds a lock without taking it: a try-lock, however brief, could make a
/// gateway starting at that moment think its profile taken. Reading the table is slow (about
/// 15 ms on the project's machine, in proportion to every lock on it), so read it once per run
/// at most, and only when a cheaper answer will not do.
#[derive(Debug, Default)]
pub(crate) struct LockTable {
    /// `MAJ:MIN:INODE` of a locked file → the PID holding it.
    holders: std::collections::HashMap<String, u32>,
}

impl LockTable {
    pub(crate) fn read() -> Self {
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
    pub(crate) fn holder(&self, path: &Path) -> Option<u32> {
        let meta = std::fs::metadata(path).ok()?;
        self.holder_of(meta.dev(), meta.ino())
    }

    /// The process holding a flock on the file `ino` of device `dev`, if any.
    pub(crate) fn holder_of(&self, dev: u64, ino: u64) -> Option<u32> {
        self.holders
            .get(&format!("{}:{ino}", device_id(dev)))
            .copied()
    }
}

/// A device as `/proc/locks` names it: `MAJ:MIN` in hex.
#[cfg(target_os = "linux")]
fn device_id(dev: u64) -> String {
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    format!("{major:02x}:{minor:02x}")
}

/// The same, from macOS's `dev_t` (8 bits of major, 24 of minor: `major()`/`minor()` in
/// <sys/types.h>). macOS has no `/proc/locks`, so [`LockTable::read`] finds no table there
/// and names no one: a lock is then "held by another process", which is true if unspecific.
#[cfg(not(target_os = "linux"))]
fn device_id(dev: u64) -> String {
    let (major, minor) = ((dev >> 24) & 0xff, dev & 0xff_ffff);
    format!("{major:02x}:{minor:02x}")
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
    fn second_taker_learns_the_holder_from_the_kernel_and_lock_frees_on_drop() {
        let dir = std::env::temp_dir().join(format!("hsv-flock-{}", std::process::id()));
        let path = dir.join("x.lock");
        // The record lies about the PID; the kernel knows better.
        let me = Holder {
            pid: 42,
            profile: "coder".into(),
        };
        let held = HeldLock::try_acquire(&path, &me).unwrap();
        // flock is per open file description, so a second open in this process contends.
        match HeldLock::try_acquire(&path, &Holder::default()) {
            Err(LockError::Held { holder, .. }) => {
                assert_eq!(holder.pid, Some(std::process::id()));
                assert_eq!(holder.profile, None, "this test is not a gateway");
                assert!(holder.comm.is_some());
            }
            other => panic!("expected Held, got {other:?}"),
        }
        drop(held);
        HeldLock::try_acquire(&path, &me).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_symlink_is_never_followed_and_an_old_0644_file_becomes_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("hsv-flock-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("target");
        std::fs::write(&target, "keep me\n").unwrap();
        let path = dir.join("x.lock");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        match HeldLock::try_acquire(&path, &Holder::default()) {
            Err(e @ LockError::Symlink { .. }) => {
                assert!(e.to_string().contains("symbolic link"), "{e}")
            }
            other => panic!("expected Symlink, got {other:?}"),
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n");

        let old = dir.join("old.lock");
        std::fs::write(&old, "").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        let _held = HeldLock::try_acquire(&old, &Holder::default()).unwrap();
        let mode = std::fs::metadata(&old).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_gateway_is_named_by_its_command_line_and_anything_else_by_its_name() {
        let gw = b"/usr/bin/hermes-svc\0gateway\0run\0--profile\0coder\0";
        assert_eq!(gateway_profile(gw), Some("coder".into()));
        assert_eq!(
            gateway_profile(b"hermes-svc\0gateway\0run\0--profile=coder\0"),
            Some("coder".into())
        );
        assert_eq!(gateway_profile(b"flock\0-n\0x.lock\0sleep\0999\0"), None);
        assert_eq!(
            gateway_profile(b"x\0gateway\0run\0--profile\0Admin Approved\0"),
            None,
            "not a profile name"
        );

        let named = |pid, cmdline: Option<&[u8]>, comm, record| {
            describe(&Owner::name(pid, false, cmdline, comm, record))
        };
        let forged = || {
            Some(Holder {
                pid: 1,
                profile: "admin-approved".into(),
            })
        };
        assert_eq!(
            named(Some(1234), Some(gw), Some("hermes-svc\n"), forged()),
            "profile coder (PID 1234)"
        );
        assert_eq!(
            named(Some(99), Some(b"flock\0x\0"), Some("flock\n"), forged()),
            "PID 99 (flock), which is not a hermes-svc gateway"
        );
        assert_eq!(
            named(Some(99), Some(b"x\0"), Some("a\nerror: y"), None),
            "PID 99 (a?error: y), which is not a hermes-svc gateway",
            "a line break in a process name cannot fake a log line"
        );
        // The process can't be read: the record is believed only where the kernel agrees.
        assert_eq!(named(Some(99), None, None, forged()), "PID 99");
        assert_eq!(
            named(
                Some(1),
                None,
                None,
                Some(Holder {
                    pid: 1,
                    profile: "coder".into()
                })
            ),
            "profile coder (PID 1)"
        );
        assert_eq!(named(None, None, None, forged()), "another process");
        // A flock is the open file's: a child that inherited it holds it after the taker died.
        assert_eq!(
            describe(&Owner::name(Some(99), true, None, None, forged())),
            "a process that PID 99 started before it exited"
        );
        assert_eq!(
            named(Some(0), None, None, forged()),
            "a process in another PID namespace"
        );
    }
}

//! Making the API socket: its directories (`state/` and `state/api/`, the user's own, not
//! links, writable by nobody else; `api/` 0700), the socket (0600), and a stale socket from an
//! earlier run removed first.
//!
//! The directory's mode is what keeps other users out: the socket is made with the process
//! umask and only then set to 0600, and in that moment only a user who can enter the
//! directory could reach it. So a directory that is wider is narrowed (it is ours, so it was
//! a mistake), and one that is someone else's, one others can write, or a link to elsewhere
//! is refused ([`TrustedDir`]): whoever could change it could swap the socket for their own,
//! and clients would talk to that.

use std::ffi::OsStr;
use std::io;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use nix::sys::stat::{fchmodat, FchmodatFlags, Mode, SFlag};
use tracing::{debug, info, warn};

use super::{io_err, ApiError};
use crate::bounded_read::Owner;
use crate::trusted_dir::{identity, TrustError, TrustedDir};

/// `sun_path` is 108 bytes on Linux and 104 on macOS, with a terminating NUL.
#[cfg(target_os = "linux")]
const MAX_SOCKET_PATH: usize = 107;
#[cfg(not(target_os = "linux"))]
const MAX_SOCKET_PATH: usize = 103;

/// A bound socket, not yet accepting: [`Bound::serve`] does that.
#[derive(Debug)]
pub struct Bound {
    pub(super) listener: UnixListener,
    pub(super) path: PathBuf,
    /// The socket file's inode, so that only our own socket is removed at the end.
    pub(super) ino: u64,
}

impl Bound {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remove the socket file if it is still the one we made.
    #[cfg(test)]
    fn remove(&self) {
        remove_socket(&self.path, self.ino);
    }
}

/// Remove the socket file at `path` if it is still the one with inode `ino`: a later
/// gateway's socket is not ours to remove. Relative to its directory, checked again, so that
/// nothing is removed from a directory swapped in meanwhile.
pub(super) fn remove_socket(path: &Path, ino: u64) {
    let Ok(Some((dir, name))) = socket_dir(path) else {
        return;
    };
    match dir.stat(name) {
        Ok(Some(st)) if identity(&st).1 == ino => {
            if let Err(e) = dir.remove(name) {
                warn!(path = %path.display(), error = %e, "cannot remove the API socket");
            }
        }
        _ => {}
    }
}

/// The socket's directory, checked with the one above it (`state/api/` and `state/`), and
/// the socket's name in it; `None` when either directory is missing. For clients, which
/// must not talk to a socket someone else could have put there.
pub(crate) fn socket_dir(socket: &Path) -> Result<Option<(TrustedDir, &OsStr)>, TrustError> {
    let (state, api, name) = parts(socket)?;
    let Some(state) = TrustedDir::open(state, Owner::SelfOrRoot)? else {
        return Ok(None);
    };
    Ok(state.child(api)?.map(|api| (api, name)))
}

/// `state/`, `api` and the socket's name.
fn parts(socket: &Path) -> Result<(&Path, &str, &OsStr), TrustError> {
    let split = || {
        let name = socket.file_name()?;
        let api = socket.parent()?;
        let api_name = api.file_name()?.to_str()?;
        let state = api.parent().filter(|p| !p.as_os_str().is_empty())?;
        Some((state, api_name, name))
    };
    split().ok_or_else(|| TrustError::Io {
        op: "use",
        path: socket.to_owned(),
        source: io::Error::new(
            io::ErrorKind::InvalidInput,
            "an API socket is STATE/api/NAME in a profile home",
        ),
    })
}

/// The socket's directories made (0700) where missing and checked, `api/` narrowed to 0700.
fn api_dir(socket: &Path) -> Result<(TrustedDir, &OsStr), TrustError> {
    let (state, api, name) = parts(socket)?;
    let mut api = TrustedDir::create(state, Owner::SelfOrRoot)?.create_child(api)?;
    api.narrow_to(0o700)?;
    Ok((api, name))
}

/// Make `socket`'s directories safe, remove a stale socket, bind, and set the socket to 0600.
/// Needs no runtime; the error names the path and what to do.
pub fn bind(socket: &Path) -> Result<Bound, ApiError> {
    let len = socket.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(ApiError::PathTooLong {
            path: socket.to_owned(),
            len,
            max: MAX_SOCKET_PATH,
        });
    }
    let (dir, name) = api_dir(socket)?;
    remove_stale(&dir, name, socket)?;
    let listener = UnixListener::bind(socket).map_err(io_err("bind", socket))?;
    fchmodat(
        dir.fd(),
        name,
        Mode::from_bits_truncate(0o600),
        FchmodatFlags::FollowSymlink,
    )
    .map_err(|e| io_err("set mode 0600 on", socket)(e.into()))?;
    listener
        .set_nonblocking(true)
        .map_err(io_err("configure", socket))?;
    let ino = dir
        .stat(name)?
        .map(|st| identity(&st).1)
        .ok_or_else(|| io_err("stat", socket)(io::ErrorKind::NotFound.into()))?;
    info!(path = %socket.display(), "API socket bound");
    Ok(Bound {
        listener,
        path: socket.to_owned(),
        ino,
    })
}

/// A socket left by an earlier run is removed; one that still answers belongs to a live
/// process and is not; anything else at the path is not ours to remove.
fn remove_stale(dir: &TrustedDir, name: &OsStr, socket: &Path) -> Result<(), ApiError> {
    let Some(st) = dir.stat(name)? else {
        return Ok(());
    };
    if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFSOCK {
        return Err(ApiError::NotASocket {
            path: socket.to_owned(),
        });
    }
    if answers(socket) {
        return Err(ApiError::InUse {
            path: socket.to_owned(),
        });
    }
    debug!(path = %socket.display(), "removing a stale API socket");
    Ok(dir.remove(name)?)
}

/// Whether a process listens on `socket`. The connect does not block: a listener whose
/// backlog is full (busy, or wedged) would hold a blocking one, and the gateway's start with
/// it; it counts as listening.
fn answers(socket: &Path) -> bool {
    use socket2::{Domain, SockAddr, Socket, Type};
    let Ok(sock) = Socket::new(Domain::UNIX, Type::STREAM, None) else {
        return false;
    };
    let Ok(addr) = SockAddr::unix(socket) else {
        return false;
    };
    if sock.set_nonblocking(true).is_err() {
        return false;
    }
    match sock.connect(&addr) {
        Ok(()) => true,
        Err(e) => e.kind() == io::ErrorKind::WouldBlock,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, Permissions};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hsv-api-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn the_directory_is_made_or_narrowed_to_0700_and_a_stale_socket_replaced() {
        let root = temp("bind");
        let sock = root.join("state/api/agent.sock");
        let bound = bind(&sock).unwrap();
        assert_eq!(mode(sock.parent().unwrap()), 0o700);
        assert_eq!(mode(&sock), 0o600);
        // A second bind while the first still listens is refused, and leaves it alone.
        assert!(matches!(bind(&sock), Err(ApiError::InUse { .. })));
        drop(bound); // closes, but the file stays: stale
        assert!(sock.exists());
        fs::set_permissions(sock.parent().unwrap(), Permissions::from_mode(0o755)).unwrap();
        let again = bind(&sock).unwrap();
        assert_eq!(mode(sock.parent().unwrap()), 0o700);
        again.remove();
        assert!(!sock.exists());
        let _ = fs::remove_dir_all(root);
    }

    #[test]
    fn a_link_a_file_or_a_long_path_is_refused_with_the_path_named() {
        let root = temp("refuse");
        fs::create_dir_all(root.join("elsewhere")).unwrap();
        fs::create_dir_all(root.join("state")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("state/api")).unwrap();
        let sock = root.join("state/api/agent.sock");
        let err = bind(&sock).unwrap_err();
        assert!(matches!(err, ApiError::Untrusted(_)), "{err}");
        assert!(err.needs_a_fix(), "a restart meets the same link");
        assert!(
            err.to_string().contains("state/api is a symbolic link"),
            "{err}"
        );
        // The directory above it too: `state` swapped for a link to someone else's.
        fs::remove_file(root.join("state/api")).unwrap();
        fs::remove_dir(root.join("state")).unwrap();
        fs::create_dir_all(root.join("elsewhere/api")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("state")).unwrap();
        let err = bind(&sock).unwrap_err();
        assert!(
            err.to_string().contains("state is a symbolic link"),
            "{err}"
        );
        fs::remove_file(root.join("state")).unwrap();
        fs::create_dir_all(root.join("state/api")).unwrap();
        fs::write(&sock, b"").unwrap();
        let err = bind(&sock).unwrap_err();
        assert!(matches!(err, ApiError::NotASocket { .. }), "{err}");

        let long = root.join("x".repeat(120)).join("agent.sock");
        assert!(matches!(bind(&long), Err(ApiError::PathTooLong { .. })));
        let _ = fs::remove_dir_all(root);
    }

    #[test]
    fn another_users_directory_or_one_others_can_write_is_refused() {
        assert!(nix::unistd::geteuid().is_root(), "the tests run as root");
        let root = temp("foreign");
        let dir = root.join("state/api");
        fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        let err = bind(&dir.join("agent.sock")).unwrap_err();
        assert!(
            err.to_string().contains("state/api is owned by uid 65534"),
            "{err}"
        );
        std::os::unix::fs::chown(&dir, Some(0), Some(0)).unwrap();
        fs::set_permissions(root.join("state"), Permissions::from_mode(0o777)).unwrap();
        let err = bind(&dir.join("agent.sock")).unwrap_err();
        assert!(
            err.to_string()
                .contains("state is writable by group or others (mode 0777)"),
            "{err}"
        );
        assert_eq!(mode(&root.join("state")), 0o777, "refused, not changed");
        let _ = fs::remove_dir_all(root);
    }
}

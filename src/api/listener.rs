//! Making the API socket: its directory (0700, ours, not a link), the socket (0600), and a
//! stale socket from an earlier run removed first.
//!
//! The directory's mode is what keeps other users out: the socket is made with the process
//! umask and only then set to 0600, and in that moment only a user who can enter the
//! directory could reach it. So a directory that is wider is narrowed (it is ours, so it was
//! a mistake), and one that is someone else's or a link to elsewhere is refused: its owner
//! could swap the socket for their own.

use std::fs::{self, DirBuilder, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use tracing::{debug, info, warn};

use super::{io_err, ApiError};

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
/// gateway's socket is not ours to remove.
pub(super) fn remove_socket(path: &Path, ino: u64) {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.ino() == ino => {
            if let Err(e) = fs::remove_file(path) {
                warn!(path = %path.display(), error = %e, "cannot remove the API socket");
            }
        }
        _ => {}
    }
}

/// Make `socket`'s directory safe, remove a stale socket, bind, and set the socket to 0600.
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
    let dir = socket.parent().ok_or_else(|| ApiError::NotADirectory {
        path: socket.to_owned(),
    })?;
    ensure_private_dir(dir)?;
    remove_stale(socket)?;
    let listener = UnixListener::bind(socket).map_err(io_err("bind", socket))?;
    fs::set_permissions(socket, Permissions::from_mode(0o600))
        .map_err(io_err("set mode 0600 on", socket))?;
    listener
        .set_nonblocking(true)
        .map_err(io_err("configure", socket))?;
    let ino = fs::symlink_metadata(socket)
        .map_err(io_err("stat", socket))?
        .ino();
    info!(path = %socket.display(), "API socket bound");
    Ok(Bound {
        listener,
        path: socket.to_owned(),
        ino,
    })
}

/// Create `dir` (0700) if missing; refuse a link, a non-directory or another user's
/// directory; narrow a wider mode of our own.
fn ensure_private_dir(dir: &Path) -> Result<(), ApiError> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_err("create", dir))?;
        }
        Err(e) => return Err(io_err("stat", dir)(e)),
        Ok(_) => {}
    }
    let meta = fs::symlink_metadata(dir).map_err(io_err("stat", dir))?;
    if meta.file_type().is_symlink() {
        return Err(ApiError::SymlinkDir {
            path: dir.to_owned(),
        });
    }
    if !meta.is_dir() {
        return Err(ApiError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(ApiError::ForeignDir {
            path: dir.to_owned(),
            owner: meta.uid(),
            me,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode != 0o700 {
        fs::set_permissions(dir, Permissions::from_mode(0o700))
            .map_err(io_err("set mode 0700 on", dir))?;
        info!(path = %dir.display(), mode = format!("{mode:o}"), "API directory narrowed to mode 0700");
    }
    Ok(())
}

/// A socket left by an earlier run is removed; one that still answers belongs to a live
/// process and is not; anything else at the path is not ours to remove.
fn remove_stale(socket: &Path) -> Result<(), ApiError> {
    let meta = match fs::symlink_metadata(socket) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("stat", socket)(e)),
        Ok(meta) => meta,
    };
    if !meta.file_type().is_socket() {
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
    fs::remove_file(socket).map_err(io_err("remove the stale socket", socket))
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
        assert!(matches!(err, ApiError::SymlinkDir { .. }), "{err}");
        assert!(err.needs_a_fix(), "a restart meets the same link");
        assert!(
            err.to_string().contains("state/api is a symbolic link"),
            "{err}"
        );

        fs::remove_file(root.join("state/api")).unwrap();
        fs::create_dir(root.join("state/api")).unwrap();
        fs::write(&sock, b"").unwrap();
        let err = bind(&sock).unwrap_err();
        assert!(matches!(err, ApiError::NotASocket { .. }), "{err}");

        let long = root.join("x".repeat(120)).join("agent.sock");
        assert!(matches!(bind(&long), Err(ApiError::PathTooLong { .. })));
        let _ = fs::remove_dir_all(root);
    }

    #[test]
    fn another_users_directory_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            return; // only root can make a directory someone else owns
        }
        let root = temp("foreign");
        let dir = root.join("state/api");
        fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        let err = bind(&dir.join("agent.sock")).unwrap_err();
        assert!(
            matches!(err, ApiError::ForeignDir { owner: 65534, .. }),
            "{err}"
        );
        let _ = fs::remove_dir_all(root);
    }
}

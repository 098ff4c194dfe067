//! The sd_notify protocol: datagrams of `KEY=VALUE` lines to `$NOTIFY_SOCKET`.
//!
//! A dozen lines of code, so no crate: the socket may be a path or, when it starts with `@`, a
//! Linux abstract address. Without `NOTIFY_SOCKET` (a foreground run, launchd) every call is a
//! no-op, and the gateway's self-watchdog takes over.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

pub(crate) struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
}

impl Notifier {
    /// Read `NOTIFY_SOCKET` once. The variable is left in place: children never see it anyway
    /// because cron jobs get a cleaned environment.
    pub(crate) fn from_env() -> io::Result<Notifier> {
        let Some(raw) = std::env::var_os("NOTIFY_SOCKET").filter(|v| !v.is_empty()) else {
            return Ok(Notifier { target: None });
        };
        let raw = raw.to_string_lossy().into_owned();
        let addr = if let Some(name) = raw.strip_prefix('@') {
            abstract_addr(name.as_bytes())?
        } else {
            SocketAddr::from_pathname(&raw)?
        };
        Ok(Notifier {
            target: Some((UnixDatagram::unbound()?, addr)),
        })
    }

    #[cfg(test)]
    pub(crate) fn is_active(&self) -> bool {
        self.target.is_some()
    }

    /// Send one state update, e.g. `READY=1\nSTATUS=...`.
    pub(crate) fn send(&self, state: &str) -> io::Result<()> {
        match &self.target {
            Some((socket, addr)) => socket.send_to_addr(state.as_bytes(), addr).map(drop),
            None => Ok(()),
        }
    }
}

#[cfg(target_os = "linux")]
fn abstract_addr(name: &[u8]) -> io::Result<SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    SocketAddr::from_abstract_name(name)
}

#[cfg(not(target_os = "linux"))]
fn abstract_addr(_: &[u8]) -> io::Result<SocketAddr> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "abstract NOTIFY_SOCKET addresses exist only on Linux",
    ))
}

/// The watchdog interval systemd expects, if it set one for this very process.
pub(crate) fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// Strip characters that would end the `STATUS=` line early.
pub(crate) fn status_line(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("STATUS={line}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receive_via(addr_env: &str, server: &UnixDatagram) {
        std::env::set_var("NOTIFY_SOCKET", addr_env);
        let n = Notifier::from_env().unwrap();
        std::env::remove_var("NOTIFY_SOCKET");
        assert!(n.is_active());
        n.send("READY=1").unwrap();
        let mut buf = [0u8; 64];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1");
    }

    // One test touches NOTIFY_SOCKET, so no other test races on the variable.
    #[test]
    fn path_and_abstract_sockets_and_none() {
        let dir = std::env::temp_dir().join(format!("hsv-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let server = UnixDatagram::bind(&path).unwrap();
        receive_via(path.to_str().unwrap(), &server);

        let name = format!("hsv-notify-test-{}", std::process::id());
        let server = UnixDatagram::bind_addr(&abstract_addr(name.as_bytes()).unwrap()).unwrap();
        receive_via(&format!("@{name}"), &server);

        let n = Notifier::from_env().unwrap();
        assert!(!n.is_active());
        n.send("READY=1").unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn status_lines_stay_on_one_line() {
        assert_eq!(status_line("a\nb"), "STATUS=a b");
    }
}

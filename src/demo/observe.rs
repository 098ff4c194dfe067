//! What the demo watches and how it says it: the scratch directory and the gateway child
//! (both cleaned up if the demo ends early), the gateway's log and its notify messages
//! (collected on threads as they come), the clock every line is stamped with, and the state
//! file's view of each adapter.

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A temporary directory removed on drop.
pub(super) struct Scratch(pub(super) PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The gateway child, killed if the demo ends early.
pub(super) struct Gateway(pub(super) Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) struct Clock(pub(super) Instant);

impl Clock {
    pub(super) fn say(&self, msg: impl AsRef<str>) {
        println!(
            "[{:>5.1}s] {}",
            self.0.elapsed().as_secs_f64(),
            msg.as_ref()
        );
    }
}

/// Lines as they arrived, each with its time.
pub(super) type Lines = Arc<Mutex<Vec<(Instant, String)>>>;

pub(super) fn lines(l: &Lines) -> std::sync::MutexGuard<'_, Vec<(Instant, String)>> {
    l.lock().unwrap_or_else(|e| e.into_inner())
}

/// What systemd would have received on the notify socket, said as it arrives. The watchdog
/// pings are only counted: one a second would drown every other line.
pub(super) struct Notify {
    notes: Lines,
    shown: usize,
    pub(super) watchdogs: usize,
}

impl Notify {
    pub(super) fn new(notes: Lines) -> Self {
        Self {
            notes,
            shown: 0,
            watchdogs: 0,
        }
    }

    /// Wait for READY=1, as systemd holds a `Type=notify` start until it comes.
    pub(super) async fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !lines(&self.notes)
            .iter()
            .any(|(_, n)| n.contains("READY=1"))
        {
            if Instant::now() > deadline {
                anyhow::bail!("the gateway did not send READY=1 within 20 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Say the messages that arrived since the last call.
    pub(super) fn show(&mut self, clock: &Clock) {
        let notes = lines(&self.notes);
        for (_, n) in &notes[self.shown..] {
            if n == "WATCHDOG=1" {
                self.watchdogs += 1;
                continue;
            }
            clock.say(format!("systemd <- {}", n.replace('\n', "  ")));
        }
        self.shown = notes.len();
    }
}

/// The gateway's log, line by line.
pub(super) fn collect_log(stderr: ChildStderr) -> Lines {
    let log: Lines = Arc::default();
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            lines(&sink).push((Instant::now(), line));
        }
    });
    log
}

/// Every datagram on the notify socket, as systemd would receive them.
pub(super) fn collect_notes(notify: UnixDatagram) -> Lines {
    let notes: Lines = Arc::default();
    let sink = notes.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            match notify.recv(&mut buf) {
                Ok(n) => lines(&sink).push((
                    Instant::now(),
                    String::from_utf8_lossy(&buf[..n]).into_owned(),
                )),
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => return,
            }
        }
    });
    notes
}

/// The state file's summary and one line per component.
pub(super) fn print_status(clock: &Clock, profile_home: &Path) {
    let Some(state) =
        crate::gateway::state_file::StateFile::read(&profile_home.join("state/gateway.json"))
    else {
        return;
    };
    clock.say(format!("state file: {}", state.summary));
    for c in state.components {
        println!(
            "         {:<5} {:<8} {:<10} last proof of life {:>5} ms ago, reconnects {}{}",
            c.name,
            c.kind,
            c.state,
            c.last_beat_age_ms,
            c.reconnects,
            c.last_error
                .map(|e| format!(", last error: {e}"))
                .unwrap_or_default()
        );
    }
}

//! A `busctl monitor` beside a command, for the messages it put on a bus: not `sendmsg`s
//! under strace, since one write can carry many messages. Shared by the tests and, through
//! `#[path]`, the benches.

// The benches count calls by destination and read no other field.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A running `busctl … monitor`; killed when dropped.
pub struct BusMonitor(Child);

/// One method call the monitor saw: who sent it, to whom, and which method.
#[derive(Debug)]
pub struct Call {
    pub sender: String,
    pub destination: String,
    pub member: String,
}

impl BusMonitor {
    /// Start `monitor` (`busctl --user monitor`, say, in the right environment) and return
    /// once it monitors: it says so on stderr.
    pub fn start(mut monitor: Command) -> Self {
        let mut child = monitor
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("busctl monitor starts");
        let mut said = String::new();
        BufReader::new(child.stderr.take().unwrap())
            .read_line(&mut said)
            .unwrap();
        Self(child)
    }

    /// The calls seen before the first `GetId`: the caller's own marker, a call it makes to
    /// the bus daemon once what it measures has run.
    pub fn calls_before_get_id(mut self) -> Vec<Call> {
        BufReader::new(self.0.stdout.take().unwrap())
            .lines()
            .map_while(Result::ok)
            .take_while(|l| !l.contains("Member=GetId"))
            .filter_map(|l| {
                let field = |key: &str| {
                    l.split_whitespace()
                        .find_map(|w| w.strip_prefix(key))
                        .map(str::to_owned)
                };
                Some(Call {
                    sender: field("Sender=")?,
                    destination: field("Destination=")?,
                    member: field("Member=")?,
                })
            })
            .collect()
    }
}

impl Drop for BusMonitor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

//! The agent link as `status` and `/v1/health` show it: is the agent there, since when, what
//! it took last, and how long the oldest message has been waiting for it.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::gateway::state_file::{AgentHealth, Taken};

/// Shared by the bridge, which reports, and the runtime's tick, which reads.
#[derive(Clone)]
pub struct Link(Arc<Mutex<AgentHealth>>);

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

impl Link {
    pub fn new(kind: &str, endpoint: String) -> Self {
        Link(Arc::new(Mutex::new(AgentHealth {
            kind: kind.to_owned(),
            endpoint,
            connected: false,
            since: now(),
            last_taken: None,
            oldest_waiting: None,
            last_error: None,
        })))
    }

    fn with<T>(&self, f: impl FnOnce(&mut AgentHealth) -> T) -> T {
        f(&mut self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    pub fn health(&self) -> AgentHealth {
        self.with(|h| h.clone())
    }

    pub fn connected(&self, connected: bool) {
        self.with(|h| {
            if h.connected != connected {
                h.connected = connected;
                h.since = now();
            }
        });
    }

    /// The agent took `event`.
    pub fn taken(&self, event: &str) {
        self.with(|h| {
            h.last_taken = Some(Taken {
                event: event.to_owned(),
                at: now(),
            });
        });
    }

    /// The oldest message waiting for the agent arrived at `received_at` (RFC 3339);
    /// `None`: nothing waits.
    pub fn waiting(&self, received_at: Option<&str>) {
        self.with(|h| h.oldest_waiting = received_at.map(str::to_owned));
    }

    pub fn error(&self, error: impl Into<String>) {
        let error = error.into();
        self.with(|h| h.last_error = Some(error));
    }
}

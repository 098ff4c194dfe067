//! The platform side of a configuration, the built-in mock or the independent server, and
//! what it has seen, read the same way from both.

use hermes_svc::mock_platform::MockPlatform;

use crate::independent::Independent;

/// The platform side of one configuration.
pub(super) enum Server {
    Mock(MockPlatform),
    Independent(Independent),
}

/// What the platform has seen so far.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Seen {
    pub(super) heartbeats: u64,
    pub(super) connections: u64,
    pub(super) identifies: u64,
    pub(super) resumes: u64,
    /// Connections open now.
    pub(super) open: u64,
    /// 4009 closes for a missed heartbeat (the independent server enforces the deadline).
    pub(super) timeouts: Option<u64>,
}

impl Server {
    pub(super) fn http_base(&self) -> String {
        match self {
            Server::Mock(m) => m.http_base(),
            Server::Independent(i) => format!("http://127.0.0.1:{}", i.port),
        }
    }

    pub(super) fn pid(&self) -> Option<u32> {
        match self {
            Server::Mock(_) => None,
            Server::Independent(i) => Some(i.child.id()),
        }
    }

    pub(super) async fn seen(&self) -> Seen {
        match self {
            Server::Mock(m) => {
                let s = m.stats();
                Seen {
                    heartbeats: s.heartbeats,
                    connections: s.connections,
                    identifies: s.identifies,
                    resumes: s.resumes,
                    open: s.spans.iter().filter(|s| s.closed.is_none()).count() as u64,
                    timeouts: None,
                }
            }
            Server::Independent(i) => {
                let v = i.stats().await;
                let n = |k: &str| v[k].as_u64().unwrap_or(0);
                Seen {
                    heartbeats: n("heartbeats"),
                    connections: n("ws_connects"),
                    identifies: n("identifies"),
                    resumes: n("resumes"),
                    open: n("connections"),
                    timeouts: Some(n("heartbeat_timeouts")),
                }
            }
        }
    }
}

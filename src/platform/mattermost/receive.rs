//! A Mattermost adapter: the WebSocket `/api/v4/websocket` kept up for the life of the
//! gateway, and the REST catch-up after every (re)connection.
//!
//! Each connection starts with `GET /api/v4/users/me` (the bot's id, and the token's check:
//! a 401 ends the adapter with the fix, exit 78), then the upgrade with the token in its
//! `Authorization` header, an `authentication_challenge` (`seq` 1) as the official clients
//! send it, and a `ping` action whose answer ends the handshake (`handshake.rs`). A
//! reconnection names the last connection's `connection_id` and the `seq` after the last
//! event handled, as the web app's client does; a 7.x+ server that still holds the gap
//! replays it on the same connection id, without a `hello`, and one that does not (the gap
//! past its 128-event dead queue, the connection forgotten after 5 minutes or a restart)
//! answers with a `hello` and a new id. Either way what was posted while the adapter was away
//! is then read by REST (`catch_up.rs`; why even after a resume: `session.rs`). Posts are
//! stored by post id, so one read twice (replayed and caught up, or read again after a
//! crash) is stored once.
//!
//! The catch-up's mark is the newest `create_at` stored, kept on disk
//! (`inbox/cursors/ADAPTER`) only after the post is in the spool: a crash in between reads
//! the post again, never loses it.

mod catch_up;
mod events;
mod handshake;
mod session;

use std::path::PathBuf;
use std::time::Duration;

use super::api::Api;
use super::Config;
use crate::config::{AdapterSpec, Secret};
use crate::gateway::adapter::cursor_file::{Cursor, CursorFile};
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::supervise::{supervise, Ended, Link, Pace, Step, Transport};
use crate::gateway::adapter::{AdapterExit, Deps};
use crate::gateway::health::State;
use session::{End, Session};

/// The longest `users/me` may hold a connection up.
const ME_DEADLINE: Duration = Duration::from_secs(10);

pub(super) async fn run(spec: AdapterSpec<Config>, token: Secret, deps: Deps) -> AdapterExit {
    let cursor_file = deps.spool.dir().join("cursors").join(&spec.name);
    let transport = Socket {
        api: Api {
            server_url: spec.protocol.server_url.clone(),
            token,
        },
        ping_interval: spec.protocol.ping_interval,
        mark: Mark::open(&spec.name, cursor_file),
        resume: None,
    };
    supervise(&spec.name, &spec.timing, transport, deps).await
}

/// The WebSocket transport, and what one connection hands the next.
struct Socket {
    api: Api,
    ping_interval: Duration,
    mark: Mark,
    /// The last connection's `connection_id` and the last `seq` read on it.
    resume: Option<(String, u64)>,
}

impl Transport for Socket {
    async fn connect(&mut self, link: &mut Link<'_>) -> Ended {
        let (name, deps) = (link.name, &*link.deps);
        deps.heartbeat.enter(State::Connecting);
        deps.heartbeat.attempt();
        let me = match tokio::time::timeout(ME_DEADLINE, self.api.me(&deps.shared)).await {
            Ok(Ok(me)) => me,
            Ok(Err(PlatformError::Fatal(m))) => return Ended::unconnected(Step::Fatal(m)),
            Ok(Err(PlatformError::Retry(m) | PlatformError::Unreachable(m))) => {
                return Ended::unconnected(Step::again(m, Pace::Backoff))
            }
            Err(_) => {
                let m = format!("users/me gave no answer within {ME_DEADLINE:?}");
                return Ended::unconnected(Step::again(m, Pace::Backoff));
            }
        };
        deps.shared.whoami.set(name, me.clone());
        let session = Session {
            adapter: name,
            api: &self.api,
            me: &me,
            resume: self.resume.take(),
            ping_interval: self.ping_interval,
            timing: link.timing,
            deps,
            mark: &mut self.mark,
        };
        let mut shutdown = deps.shutdown.clone();
        let out = session.run(&mut shutdown).await;
        self.resume = out.resume;
        let step = match out.end {
            End::Shutdown => Step::Shutdown,
            End::Failed(m) => Step::again(m, Pace::Backoff),
            End::Spool(m) => Step::again(format!("the spool refused an event: {m}"), Pace::Backoff),
            End::Closed(code) => lost(name, format!("the server closed the connection (code {code:?})")),
            End::Zombie(z) => lost(name, z.to_string()),
            End::Gap(m) => lost(name, m),
        };
        Ended {
            step,
            connected_for: out.connected_for,
            progressed: out.stored > 0,
        }
    }
}

fn lost(name: &str, reason: String) -> Step {
    tracing::warn!(adapter = %name, reason = %reason, "mattermost connection lost; reconnecting");
    Step::again(reason, Pace::Resume)
}

/// The catch-up's mark: the newest `create_at` (ms) stored, on disk.
pub(super) struct Mark {
    file: CursorFile,
    at: Option<i64>,
}

impl Mark {
    fn open(adapter: &str, path: PathBuf) -> Mark {
        let file = CursorFile::open(adapter, path);
        let at = file.current().trim().parse().ok().filter(|t: &i64| *t > 0);
        Mark { file, at }
    }

    /// Where the next catch-up starts, if anything was ever marked.
    pub(super) fn since(&self) -> Option<i64> {
        self.at
    }

    /// `at` (ms) is stored: keep it, if it is newer than the mark.
    pub(super) fn advance(&mut self, at: i64) -> Result<(), String> {
        if self.at.is_some_and(|m| m >= at) || at <= 0 {
            return Ok(());
        }
        let cursor = Cursor::take(&at.to_string()).map_err(|e| e.to_string())?;
        self.file.stage(cursor);
        self.file.commit()?;
        self.at = Some(at);
        Ok(())
    }
}

//! A Slack adapter: Socket Mode kept up for the life of the gateway.
//!
//! Every connection starts with `apps.connections.open` (`open`: a fresh URL, good for one
//! connection), then one connection (`session`). How it ends decides what comes next: a
//! `disconnect` with `refresh_requested` or `warning` is Slack's planned refresh, and the next
//! connection opens at once (unacknowledged envelopes come again on it, and the spool drops
//! what it already holds); `link_disabled` (Socket Mode turned off) and a token Slack refuses
//! end the adapter, and the gateway exits 78 with the fix; `too_many_websockets` and anything
//! else are retried with backoff.

mod open;
mod session;

use std::time::Duration;

use super::Config;
use crate::config::{AdapterSpec, Secret};
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::supervise::{supervise, Ended, Link, Pace, Step, Transport};
use crate::gateway::adapter::{AdapterExit, Deps};
use crate::gateway::health::State;
use session::{End, Session};

/// What to do about `apps.connections.open`'s refusal `error`, when no retry helps.
pub(super) fn refusal_fix(error: &str) -> Option<&'static str> {
    open::fatal(error)
}

/// Run a Slack adapter until shutdown or a fatal refusal.
pub(super) async fn run(spec: AdapterSpec<Config>, app_token: Secret, deps: Deps) -> AdapterExit {
    let transport = SocketMode {
        api_base: spec.protocol.api_base.clone(),
        ping_interval: spec.protocol.ping_interval,
        app_token,
    };
    supervise(&spec.name, &spec.timing, transport, deps).await
}

/// The Socket Mode transport: a URL from `apps.connections.open`, then one connection.
struct SocketMode {
    api_base: String,
    ping_interval: Duration,
    app_token: Secret,
}

impl Transport for SocketMode {
    async fn connect(&mut self, link: &mut Link<'_>) -> Ended {
        let (name, hb) = (link.name, link.deps.heartbeat.clone());
        hb.enter(State::Connecting);
        let url = tokio::select! {
            r = open::open(&link.deps.shared, &self.api_base, &self.app_token) => r,
            _ = crate::gateway::until_shutdown(&mut link.deps.shutdown) => {
                return Ended::unconnected(Step::Shutdown)
            }
        };
        let url = match url {
            Ok(url) => url,
            Err(PlatformError::Fatal(m)) => return Ended::unconnected(Step::Fatal(m)),
            Err(PlatformError::Retry(m) | PlatformError::Unreachable(m)) => {
                tracing::warn!(adapter = %name, error = %m, "no socket mode url");
                return Ended::unconnected(Step::again(m, Pace::Backoff));
            }
        };
        let session = Session {
            adapter: name,
            url: &url,
            ping_interval: self.ping_interval,
            timing: link.timing,
            heartbeat: &hb,
            spool: &link.deps.spool,
            proxies: &link.deps.shared.proxies,
            fence: &link.deps.shared.fence,
        };
        let out = session.run(&mut link.deps.shutdown).await;
        let step = match out.end {
            End::Shutdown => Step::Shutdown,
            End::Disconnect(reason) => disconnected(name, &reason),
            End::Spool(e) => {
                tracing::warn!(adapter = %name, error = %e, "the spool failed; reconnecting after backoff");
                Step::again(e, Pace::Backoff)
            }
            End::Failed(m) => Step::again(m, Pace::Backoff),
            End::Zombie(z) => lost(name, z.to_string()),
            End::Closed(Some(c)) => lost(name, format!("closed by Slack with code {c}")),
            End::Closed(None) => lost(name, "the connection closed".into()),
        };
        Ended {
            step,
            connected_for: out.connected_for,
            progressed: out.stored > 0,
        }
    }
}

fn lost(name: &str, reason: String) -> Step {
    tracing::warn!(adapter = %name, reason = %reason, "socket mode connection lost; reconnecting");
    Step::again(reason, Pace::Resume)
}

/// What a `disconnect` message asks for.
fn disconnected(name: &str, reason: &str) -> Step {
    match reason {
        "refresh_requested" | "warning" => {
            tracing::info!(adapter = %name, reason, "slack asked for a new connection");
            Step::Again {
                error: None,
                pace: Pace::Resume,
            }
        }
        "link_disabled" => Step::Fatal(
            "Slack sent disconnect: link_disabled (Socket Mode was turned off for this app): \
             turn it on under the app's Settings › Socket Mode"
                .into(),
        ),
        other => Step::again(format!("Slack sent disconnect: {other}"), Pace::Backoff),
    }
}

//! A Slack adapter: Socket Mode kept up for the life of the gateway.
//!
//! Every connection starts with `apps.connections.open` (`open`: a fresh URL, good for one
//! connection), then one connection (`session`). How it ends decides what comes next: a
//! `disconnect` with `refresh_requested` or `warning` is Slack's planned refresh: the next
//! connection is opened while the old one still reads and acknowledges, and the old one is
//! closed only once the new one said `hello` (Slack allows ten per app), so no window of
//! events goes unread; `link_disabled` (Socket Mode turned off) and a token Slack refuses
//! end the adapter, and the gateway exits 78 with the fix; `too_many_websockets` and anything
//! else are retried with backoff.
//!
//! Before a connection, until Slack has said, the adapter asks who its bot is (`auth.test`
//! with the bot token: its `user_id`, the id a mention of it is written with), within
//! [`AUTH_TEST_DEADLINE`]; one that failed is asked again before a later connection, and Slack
//! replaces every connection within hours ("refresh_requested").

mod me;
mod open;
mod session;

use std::time::Duration;

use super::Config;
use crate::config::{AdapterSpec, Secret};
use crate::gateway::adapter::chain::{self, Run};
use crate::gateway::adapter::supervise::{supervise, Ended, Link, Pace, Step, Transport};
use crate::gateway::adapter::{AdapterExit, Deps};
use crate::gateway::health::State;
use crate::platform::bot_lookup::BotLookup;
use session::{End, Session};

/// The longest `auth.test` may hold a connection up.
const AUTH_TEST_DEADLINE: Duration = Duration::from_secs(5);

/// What to do about `apps.connections.open`'s refusal `error`, when no retry helps.
pub(super) fn refusal_fix(error: &str) -> Option<&'static str> {
    open::fatal(error)
}

/// Run a Slack adapter until shutdown or a fatal refusal; `bot_token` only asks who the bot is.
pub(super) async fn run(
    spec: AdapterSpec<Config>,
    app_token: Secret,
    bot_token: Secret,
    deps: Deps,
) -> AdapterExit {
    let transport = SocketMode {
        api_base: spec.protocol.api_base.clone(),
        ping_interval: spec.protocol.ping_interval,
        app_token,
        me: BotLookup::new(&spec.name, deps.shared.whoami.clone(), None),
        bot_token,
    };
    supervise(&spec.name, &spec.timing, transport, deps).await
}

/// The Socket Mode transport: a URL from `apps.connections.open`, then one connection.
struct SocketMode {
    api_base: String,
    ping_interval: Duration,
    app_token: Secret,
    bot_token: Secret,
    /// `auth.test`, until it is answered.
    me: BotLookup,
}

impl Transport for SocketMode {
    /// One connection, and the ones that replace it on Slack's planned refreshes, as one
    /// [`chain`]: each successor is opened while its predecessor still reads and
    /// acknowledges, and the predecessor is closed only once the successor said `hello`.
    async fn connect(&mut self, link: &mut Link<'_>) -> Ended {
        let (name, hb) = (link.name, link.deps.heartbeat.clone());
        if self.me.due() {
            let asked = me::auth_test(&link.deps.shared, &self.api_base, &self.bot_token);
            self.me.ask_if_due(AUTH_TEST_DEADLINE, asked).await;
        }
        let deps = &*link.deps;
        let (api_base, token, timing, hb) = (&self.api_base, &self.app_token, link.timing, &hb);
        let ping_interval = self.ping_interval;
        let start = |mut s: chain::Start| -> Run<'_, End> {
            Box::pin(async move {
                let url = match s.address(name, open::open(&deps.shared, api_base, token)).await {
                    Ok(url) => url,
                    Err(ended) => return ended,
                };
                let session = Session {
                    adapter: name,
                    url,
                    signals: s.signals,
                    successor: s.successor,
                    ping_interval,
                    timing,
                    heartbeat: hb,
                    spool: &deps.spool,
                    proxies: &deps.shared.proxies,
                    fence: &deps.shared.fence,
                    grid: &deps.shared.grid,
                };
                session.run(&mut s.stop).await
            })
        };
        hb.enter(State::Connecting);
        let out = chain::run(name, deps.shutdown.clone(), start).await;
        out.settle(hb, |end| step_after(name, end))
    }
}

/// What the supervisor does after the chain of connections ended with `end`.
fn step_after(name: &str, end: End) -> Step {
    match end {
        End::Shutdown => Step::Shutdown,
        End::Refused(m) => Step::Fatal(m),
        End::Disconnect(reason) => disconnected(name, &reason),
        End::Spool(e) => {
            tracing::warn!(adapter = %name, error = %e, "the spool failed; reconnecting after backoff");
            Step::again(e, Pace::Backoff)
        }
        End::Failed(m) => Step::again(m, Pace::Backoff),
        End::Zombie(z) => lost(name, z.to_string()),
        End::Closed(Some(c)) => lost(name, format!("closed by Slack with code {c}")),
        End::Closed(None) => lost(name, "the connection closed".into()),
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
        "too_many_websockets" => Step::again(
            "Slack sent disconnect: too_many_websockets (the app already holds the ten Socket \
             Mode connections Slack allows: another gateway or program runs this app; stop it, \
             or give this profile an app of its own)",
            Pace::Backoff,
        ),
        other => Step::again(format!("Slack sent disconnect: {other}"), Pace::Backoff),
    }
}

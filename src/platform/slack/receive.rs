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

use tokio::sync::{mpsc, watch};

use super::Config;
use crate::config::{AdapterSpec, Secret};
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::supervise::{supervise, Ended, Link, Pace, Step, Transport};
use crate::gateway::adapter::{AdapterExit, Deps};
use crate::gateway::health::State;
use crate::platform::bot_lookup::BotLookup;
use session::{End, Outcome, Session, Signal};

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
    /// One connection, and the ones that replace it on Slack's planned refreshes: each
    /// successor is opened while its predecessor still reads and acknowledges, and the
    /// predecessor is closed only once the successor said `hello`, so no window of events
    /// goes to a socket nobody reads. To the supervisor the chain is one connection.
    async fn connect(&mut self, link: &mut Link<'_>) -> Ended {
        let (name, hb) = (link.name, link.deps.heartbeat.clone());
        if self.me.due() {
            let asked = me::auth_test(&link.deps.shared, &self.api_base, &self.bot_token);
            self.me.ask_if_due(AUTH_TEST_DEADLINE, asked).await;
        }
        let (signals, mut signalled) = mpsc::unbounded_channel();
        let mut shutdown = link.deps.shutdown.clone();
        let deps = &*link.deps;
        let start = |generation: u64, successor: bool| {
            let (stop, mut stopped) = watch::channel(false);
            let signals = signals.clone();
            let (api_base, token, timing, hb) = (&self.api_base, &self.app_token, link.timing, &hb);
            let ping_interval = self.ping_interval;
            let run = Box::pin(async move {
                let url = tokio::select! {
                    r = open::open(&deps.shared, api_base, token) => r,
                    _ = crate::gateway::until_shutdown(&mut stopped) => return Outcome::ended(End::Shutdown),
                };
                let url = match url {
                    Ok(url) => url,
                    Err(PlatformError::Fatal(m)) => return Outcome::ended(End::Refused(m)),
                    Err(PlatformError::Retry(m) | PlatformError::Unreachable(m)) => {
                        tracing::warn!(adapter = %name, error = %m, "no socket mode url");
                        return Outcome::ended(End::Failed(m));
                    }
                };
                let session = Session {
                    adapter: name,
                    url,
                    signals,
                    generation,
                    successor,
                    ping_interval,
                    timing,
                    heartbeat: hb,
                    spool: &deps.spool,
                    proxies: &deps.shared.proxies,
                    fence: &deps.shared.fence,
                    grid: &deps.shared.grid,
                };
                session.run(&mut stopped).await
            });
            Live { run, stop, generation }
        };
        hb.enter(State::Connecting);
        let mut current = start(0, false);
        let mut next: Option<Live<'_>> = None;
        // The successor said hello: the current connection is being closed for it.
        let mut handing_over = false;
        let (mut connected_for, mut stored) = (None::<Duration>, 0);
        let end = loop {
            let woke = tokio::select! {
                out = &mut current.run => Woke::Current(out),
                out = successor(&mut next) => Woke::Next(out),
                Some((generation, signal)) = signalled.recv() => Woke::Signal(generation, signal),
                _ = crate::gateway::until_shutdown(&mut shutdown) => Woke::Shutdown,
            };
            match woke {
                Woke::Current(out) => {
                    stored += out.stored;
                    if let Some(d) = out.connected_for {
                        connected_for = Some(connected_for.unwrap_or_default() + d);
                    }
                    match next.take() {
                        // Closed for its successor, or by Slack before the successor was up:
                        // either way the successor goes on.
                        Some(successor) if handing_over || out.end != End::Shutdown => {
                            if !handing_over {
                                tracing::info!(adapter = %name, "the refreshed connection ended before its successor was up");
                            }
                            current = successor;
                            handing_over = false;
                        }
                        _ => break out.end,
                    }
                }
                Woke::Next(out) => {
                    // The successor ended before it took over; the current one goes on, and
                    // when it ends, the next connection is opened as after any end.
                    stored += out.stored;
                    tracing::warn!(adapter = %name, end = ?out.end, "the connection opened for a refresh did not come up");
                    next = None;
                }
                Woke::Signal(generation, Signal::Refresh(reason)) => {
                    if generation == current.generation && next.is_none() {
                        tracing::info!(adapter = %name, reason, "slack asked for a new connection; opening it before closing this one");
                        next = Some(start(generation + 1, true));
                    }
                }
                Woke::Signal(generation, Signal::Up) => {
                    if next.as_ref().is_some_and(|n| n.generation == generation) {
                        handing_over = true;
                        let _ = current.stop.send(true);
                    }
                }
                Woke::Shutdown => {
                    // Each closes its socket with a close frame (a second at most) and
                    // flushes what it stored.
                    let _ = current.stop.send(true);
                    if let Some(mut n) = next.take() {
                        let _ = n.stop.send(true);
                        stored += n.run.as_mut().await.stored;
                    }
                    stored += current.run.as_mut().await.stored;
                    break End::Shutdown;
                }
            }
        };
        let step = step_after(name, end);
        if connected_for.is_none() && matches!(step, Step::Again { .. }) {
            hb.enter(State::Connecting);
        }
        Ended {
            step,
            connected_for,
            progressed: stored > 0,
        }
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

/// What woke the chain's runner.
enum Woke {
    Current(Outcome),
    Next(Outcome),
    Signal(u64, Signal),
    Shutdown,
}

/// The successor's end, if there is one running; otherwise never.
async fn successor(next: &mut Option<Live<'_>>) -> Outcome {
    match next {
        Some(n) => n.run.as_mut().await,
        None => std::future::pending().await,
    }
}

/// One connection of a chain: its run (opening its URL, then the session), the switch that
/// stops it, and its place in the chain.
struct Live<'a> {
    run: std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send + 'a>>,
    stop: watch::Sender<bool>,
    generation: u64,
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

//! A WeCom AI-bot adapter: the long connection kept up for the life of the gateway.
//!
//! Each connection is subscribed afresh (`session`). How it ends decides what comes next:
//!
//! - `disconnected_event` is WeCom telling this connection that another one subscribed the
//!   same bot: WeCom keeps one connection per bot and closes the older. Subscribing again
//!   would kick the other holder in turn, and the two would take the bot from each other for
//!   ever (Hermes's adapter does exactly that), so the adapter stops, fatal, and the gateway
//!   exits 78 naming the other holder, as a token lock held elsewhere does.
//! - A subscription answered with an `errcode` (a wrong or revoked secret, a bot without the
//!   long-connection API mode) three times in a row ends the adapter the same way, with the
//!   fix; once or twice is retried with backoff, as a server's bad moment may be.
//! - Anything else (a dead socket, a close, a FIN) is retried: at once after a connection
//!   that lived, with backoff otherwise.

mod session;

use std::sync::Arc;
use std::time::Duration;

use super::Config;
use crate::config::{AdapterSpec, Secret};
use crate::gateway::adapter::outlet::Outlet;
use crate::gateway::adapter::supervise::{supervise, Ended, Link, Pace, Step, Transport};
use crate::gateway::adapter::{AdapterExit, Deps};
pub(super) use session::ERRCODE;
use session::{End, Session};

/// Refused subscriptions in a row before the adapter gives up.
const REFUSALS: u32 = 3;

/// Run a WeCom adapter until shutdown, a kick or a refused bot.
pub(super) async fn run(
    spec: AdapterSpec<Config>,
    bot_id: Secret,
    secret: Secret,
    deps: Deps,
) -> AdapterExit {
    let transport = LongConnection {
        url: spec.protocol.url.clone(),
        bot_id_env: spec.protocol.bot_id_env.clone(),
        ping_interval: spec.protocol.ping_interval,
        outlet: deps.shared.outlets.get(&spec.name),
        bot_id,
        secret,
        refused: 0,
    };
    supervise(&spec.name, &spec.timing, transport, deps).await
}

struct LongConnection {
    url: String,
    bot_id_env: String,
    ping_interval: Duration,
    outlet: Arc<Outlet>,
    bot_id: Secret,
    secret: Secret,
    /// Subscriptions refused in a row.
    refused: u32,
}

impl Transport for LongConnection {
    async fn connect(&mut self, link: &mut Link<'_>) -> Ended {
        let (name, hb) = (link.name, link.deps.heartbeat.clone());
        let session = Session {
            adapter: name,
            url: &self.url,
            bot_id: &self.bot_id,
            secret: &self.secret,
            ping_interval: self.ping_interval,
            timing: link.timing,
            heartbeat: &hb,
            spool: &link.deps.spool,
            proxies: &link.deps.shared.proxies,
            fence: &link.deps.shared.fence,
            grid: &link.deps.shared.grid,
            outlet: &self.outlet,
        };
        let out = session.run(&mut link.deps.shutdown).await;
        if out.connected_for.is_some() {
            self.refused = 0;
        }
        let step = match out.end {
            End::Shutdown => Step::Shutdown,
            End::Kicked => Step::Fatal(kicked(name, &self.bot_id_env)),
            End::Refused { errcode, errmsg } => self.refusal(name, errcode, &errmsg),
            End::Failed(m) => Step::again(m, Pace::Backoff),
            End::Spool(e) => {
                tracing::warn!(adapter = %name, error = %e, "the spool failed; reconnecting after backoff");
                Step::again(e, Pace::Backoff)
            }
            End::Zombie(z) => lost(name, z.to_string()),
            End::Closed(Some(c)) => lost(name, format!("closed by WeCom with code {c}")),
            End::Closed(None) => lost(name, "the connection closed".into()),
        };
        Ended {
            step,
            connected_for: out.connected_for,
            progressed: out.stored > 0,
        }
    }
}

impl LongConnection {
    fn refusal(&mut self, name: &str, errcode: i64, errmsg: &str) -> Step {
        self.refused += 1;
        tracing::warn!(adapter = %name, errcode, errmsg, refused = self.refused, "wecom refused the subscription");
        if self.refused < REFUSALS {
            return Step::again(
                format!("WeCom refused aibot_subscribe: errcode {errcode} ({errmsg})"),
                Pace::Backoff,
            );
        }
        Step::Fatal(format!(
            "WeCom refused the bot's subscription {REFUSALS} times in a row (errcode {errcode}: \
             {errmsg}): check the bot id in {} and its secret in the profile's .env against the \
             bot's page in the WeCom admin console (API mode: long connection), then restart",
            self.bot_id_env
        ))
    }
}

/// The fatal reason of a kick: who took the bot, and what to do.
fn kicked(name: &str, bot_id_env: &str) -> String {
    tracing::error!(adapter = %name, "wecom kicked this connection: another connection subscribed the bot");
    format!(
        "conflict: another holder subscribed this bot (the bot in {bot_id_env}) and WeCom, which \
         keeps one long connection per bot, closed this one (disconnected_event); another \
         gateway, a Hermes gateway or a program with the official SDK runs the same bot. \
         Reconnecting would take it back and start a fight neither side wins: stop the other \
         holder, or give this profile a bot of its own, then restart"
    )
}

fn lost(name: &str, reason: String) -> Step {
    tracing::warn!(adapter = %name, reason = %reason, "wecom long connection lost; reconnecting");
    Step::again(reason, Pace::Resume)
}

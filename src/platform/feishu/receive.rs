//! A Feishu/Lark adapter: the long connection ("长连接") kept up for the life of the gateway.
//!
//! Every connection starts with endpoint discovery (`discovery`: a fresh URL and the server's
//! ClientConfig), then one connection (`session`: pings, pongs, events into the spool before
//! their ack, split events put back together by `reassembly`), and ends in one of a few ways
//! that decide what comes next: a refusal the server calls permanent (`handshake`, or a
//! discovery code) ends the adapter and the gateway exits 78; anything else is retried, for
//! ever. The health model and `max-outage` decide when a long outage is the gateway's to
//! end, not the server's ReconnectCount, after which the SDKs give up and leave the process up
//! and deaf; past it, `status` says that the server keeps refusing.
//!
//! Reconnect delays are the runtime's backoff, with the server's settings as floors: after a
//! connection that lived, a random part of ReconnectNonce (the SDKs' first-reconnect jitter,
//! which spreads a crowd the server dropped at once); after an attempt the server refused, or
//! a connection it accepted that failed, at least ReconnectInterval; after one that reached
//! no server at all, the backoff alone.
//!
//! Until Feishu has said who the app's bot is (`bot_info`: its `open_id`, which a mention of it
//! carries), the adapter asks before a connection and, while connected, beside it
//! ([`BotLookup`]), never holding the connection up for it.

mod discovery;
mod handshake;
mod reassembly;
mod session;

use std::time::Duration;

use super::bot_info::bot_info;
use super::token::FeishuToken;
use super::Config;
use crate::config::{AdapterSpec, Secret};
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::supervise::{self, supervise, Ended, Link, Pace, Step, Transport};
use crate::gateway::adapter::{AdapterExit, Deps};
use crate::gateway::health::State;
use crate::platform::bot_lookup::BotLookup;
use discovery::ClientConfig;
use handshake::Refusal;
use session::{End, Session};

/// The longest a question of who the bot is (a tenant token, then `bot/v3/info`) may take
/// before a connection.
const BOT_INFO_DEADLINE: Duration = Duration::from_secs(5);

/// Run a Feishu adapter until shutdown or a fatal refusal.
pub(super) async fn run(
    spec: AdapterSpec<Config>,
    secret: Option<Secret>,
    deps: Deps,
) -> AdapterExit {
    let c = &spec.protocol;
    let secret = secret.unwrap_or_else(|| Secret::new(String::new()));
    let token = FeishuToken::new(&c.api_base, &c.app_id, secret.clone());
    let transport = LongConnection {
        app_id: c.app_id.clone(),
        api_base: c.api_base.clone(),
        secret,
        config: ClientConfig::default(),
        refused: 0,
        me: BotLookup::new(&spec.name, deps.shared.whoami.clone(), None),
        token,
    };
    supervise(&spec.name, &spec.timing, transport, deps).await
}

/// The long-connection transport: endpoint discovery, then one connection.
struct LongConnection {
    app_id: String,
    api_base: String,
    secret: Secret,
    /// The server's settings, from discovery and from pongs.
    config: ClientConfig,
    /// Attempts in a row that got no connection: compared with the server's ReconnectCount.
    refused: u64,
    /// `bot/v3/info`, until it is answered, with the tenant token it is asked with.
    me: BotLookup,
    token: FeishuToken,
}

impl Transport for LongConnection {
    async fn connect(&mut self, link: &mut Link<'_>) -> Ended {
        let (name, hb) = (link.name, link.deps.heartbeat.clone());
        hb.enter(State::Connecting);
        if self.me.due() {
            let asked = bot_info(&link.deps.shared, &self.api_base, &self.token);
            self.me.ask_if_due(BOT_INFO_DEADLINE, asked).await;
        }
        let endpoint = tokio::select! {
            r = discovery::discover(&link.deps.shared, &self.api_base, &self.app_id, &self.secret, self.config) => r,
            _ = crate::gateway::until_shutdown(&mut link.deps.shutdown) => {
                return Ended::unconnected(Step::Shutdown)
            }
        };
        let endpoint = match endpoint {
            Ok(e) => e,
            Err(PlatformError::Fatal(m)) => return Ended::unconnected(Step::Fatal(m)),
            Err(PlatformError::Retry(m)) => {
                return Ended::unconnected(self.refused(name, m, self.after_failure()))
            }
            Err(PlatformError::Unreachable(m)) => {
                return Ended::unconnected(self.refused(name, m, Pace::Backoff))
            }
        };
        self.config = endpoint.config;
        let session = Session {
            adapter: name,
            url: &endpoint.url,
            config: self.config,
            timing: link.timing,
            heartbeat: &hb,
            spool: &link.deps.spool,
            proxies: &link.deps.shared.proxies,
            fence: &link.deps.shared.fence,
            grid: &link.deps.shared.grid,
        };
        let (shared, api_base, token) = (&link.deps.shared, &self.api_base, &self.token);
        let run = session.run(&mut link.deps.shutdown);
        let out = self
            .me
            .beside(BOT_INFO_DEADLINE, run, || bot_info(shared, api_base, token))
            .await;
        self.config = out.config;
        if out.connected_for.is_some() {
            self.refused = 0;
        }
        let lived = supervise::lived(out.connected_for, link.timing);
        let step = match out.end {
            End::Shutdown => Step::Shutdown,
            End::Refused(Refusal::Fatal(m)) => Step::Fatal(m),
            // The endpoint never answered the upgrade (refused, reset, no answer in time).
            End::Failed(m) if out.connected_for.is_none() => self.refused(name, m, Pace::Backoff),
            End::Refused(Refusal::Retry(m)) | End::Failed(m) => {
                self.refused(name, m, self.after_failure())
            }
            // Nothing after the failed event was acknowledged; a spool that cannot write
            // gets the backoff, not a reconnect at once.
            End::Spool(e) => {
                tracing::warn!(adapter = %name, error = %e, "the spool failed; reconnecting after backoff");
                Step::again(e, self.after_failure())
            }
            End::Zombie(z) => self.lost(name, z.to_string(), lived),
            End::Closed(Some(c)) => {
                self.lost(name, format!("closed by the server with code {c}"), lived)
            }
            End::Closed(None) => self.lost(name, "the connection closed".into(), lived),
        };
        Ended {
            step,
            connected_for: out.connected_for,
            progressed: out.stored > 0,
        }
    }
}

impl LongConnection {
    /// After a connection that lived, a random part of ReconnectNonce (the SDKs'
    /// first-reconnect jitter, which spreads a crowd the server dropped at once); after one
    /// that got nothing done, at least ReconnectInterval.
    fn lost(&self, name: &str, reason: String, lived: bool) -> Step {
        tracing::warn!(adapter = %name, reason = %reason, "long connection lost; reconnecting");
        let pace = if lived {
            Pace::Wait(self.config.reconnect_nonce.mul_f64(fastrand::f64()))
        } else {
            self.after_failure()
        };
        Step::again(reason, pace)
    }

    /// The wait after an attempt the server refused, or a connection it accepted that got
    /// nothing done: the backoff, but never shorter than the server's ReconnectInterval.
    fn after_failure(&self) -> Pace {
        Pace::AtLeast(self.config.reconnect_interval)
    }

    /// A failed attempt; past the server's ReconnectCount, `status` says that the server keeps
    /// refusing and that the adapter, unlike the SDKs, carries on.
    fn refused(&mut self, name: &str, error: String, pace: Pace) -> Step {
        self.refused += 1;
        let refused = self.refused;
        tracing::warn!(adapter = %name, error, refused, "connecting failed");
        let count = self.config.reconnect_count;
        if u64::try_from(count).is_ok_and(|c| refused > c) {
            return Step::again(
                format!(
                    "{error}; the server has refused {refused} attempts in a row, more than its \
                     ReconnectCount of {count}: still retrying with backoff"
                ),
                pace,
            );
        }
        Step::again(error, pace)
    }
}

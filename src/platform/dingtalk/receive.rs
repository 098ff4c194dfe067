//! A DingTalk adapter: the Stream connection kept up for the life of the gateway. Every
//! connection starts with `connections/open` (`open`: a fresh endpoint and one-use ticket),
//! then one connection (`session`). How it ends decides what comes next: the credentials
//! refused end the adapter (exit 78 with the fix, where the SDKs retry every 10 s for ever);
//! a `disconnect` is a planned reconnect, at once and not counted as an outage; anything else
//! is retried with the runtime's backoff.

mod open;
mod session;

pub(super) use open::{OPEN_PATH, ROBOT_TOPIC};

use super::Config;
use crate::config::{AdapterSpec, Secret};
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::supervise::{supervise, Ended, Link, Pace, Step, Transport};
use crate::gateway::adapter::{AdapterExit, Deps};
use crate::gateway::health::State;
use session::{End, Session};

pub(super) async fn run(spec: AdapterSpec<Config>, secret: Option<Secret>, deps: Deps) -> AdapterExit {
    let c = &spec.protocol;
    let transport = Stream {
        client_id: c.client_id.clone(),
        api_base: c.api_base.clone(),
        ping_interval: c.ping_interval,
        secret: secret.unwrap_or_else(|| Secret::new(String::new())),
    };
    supervise(&spec.name, &spec.timing, transport, deps).await
}

struct Stream {
    client_id: String,
    api_base: String,
    ping_interval: std::time::Duration,
    secret: Secret,
}

impl Transport for Stream {
    async fn connect(&mut self, link: &mut Link<'_>) -> Ended {
        let (name, hb) = (link.name, link.deps.heartbeat.clone());
        hb.enter(State::Connecting);
        let url = tokio::select! {
            r = open::open(&link.deps.shared, &self.api_base, &self.client_id, &self.secret) => r,
            _ = crate::gateway::until_shutdown(&mut link.deps.shutdown) => {
                return Ended::unconnected(Step::Shutdown)
            }
        };
        let url = match url {
            Ok(url) => url,
            Err(PlatformError::Fatal(m)) => return Ended::unconnected(Step::Fatal(m)),
            Err(PlatformError::Retry(m) | PlatformError::Unreachable(m)) => {
                tracing::warn!(adapter = %name, error = %m, "no stream endpoint");
                return Ended::unconnected(Step::again(m, Pace::Backoff));
            }
        };
        let session = Session {
            adapter: name,
            url,
            ping_interval: self.ping_interval,
            timing: link.timing,
            heartbeat: &hb,
            spool: &link.deps.spool,
            proxies: &link.deps.shared.proxies,
            fence: &link.deps.shared.fence,
            grid: &link.deps.shared.grid,
        };
        let out = session.run(&mut link.deps.shutdown).await;
        let step = match out.end {
            End::Shutdown => Step::Shutdown,
            End::Disconnect => Step::Again { error: None, pace: Pace::Resume },
            End::Failed(m) => Step::again(m, Pace::Backoff),
            End::Spool(e) => {
                tracing::warn!(adapter = %name, error = %e, "the spool failed; reconnecting after backoff");
                Step::again(e, Pace::Backoff)
            }
            End::Zombie(z) => lost(name, z.to_string()),
            End::Closed(Some(c)) => lost(name, format!("closed by DingTalk with code {c}")),
            End::Closed(None) => lost(name, "the connection closed".into()),
        };
        Ended { step, connected_for: out.connected_for, progressed: out.stored > 0 }
    }
}

fn lost(name: &str, reason: String) -> Step {
    tracing::warn!(adapter = %name, reason = %reason, "dingtalk stream connection lost; reconnecting");
    Step::again(reason, Pace::Resume)
}

//! A DingTalk adapter: the Stream connection kept up for the life of the gateway. Every
//! connection starts with `connections/open` (`open`: a fresh endpoint and one-use ticket),
//! then one connection (`session`). How it ends decides what comes next: the credentials
//! refused end the adapter (exit 78 with the fix, where the SDKs retry every 10 s for ever);
//! anything else is retried with the runtime's backoff.
//!
//! A SYSTEM `disconnect` is a planned move, made without a gap, as one [`chain`]: the server
//! keeps the old connection open for about 10 s after it, so the next one (a fresh ticket and
//! socket) is opened while the old one still reads and acknowledges, and the old one is
//! closed once the new one is up, as the Java SDK's session pool does (`DefaultSessionPool`:
//! the old session marked going away, a new connection opened at once). A successor that does
//! not come up leaves the old one to its end, and then the next connection is opened at once:
//! no outage either way.

mod open;
mod session;

pub(super) use open::{OPEN_PATH, ROBOT_TOPIC};

use super::Config;
use crate::config::{AdapterSpec, Secret};
use crate::gateway::adapter::chain::{self, Run};
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
        let deps = &*link.deps;
        let (api_base, client_id, secret) = (&self.api_base, &self.client_id, &self.secret);
        let (timing, ping_interval, hb) = (link.timing, self.ping_interval, &hb);
        let start = |mut s: chain::Start| -> Run<'_, End> {
            Box::pin(async move {
                let open = open::open(&deps.shared, api_base, client_id, secret);
                let url = match s.address(name, open).await {
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
        // Closed by the server after its `disconnect`, with no successor up to take over.
        End::Disconnect => Step::Again { error: None, pace: Pace::Resume },
        End::Failed(m) => Step::again(m, Pace::Backoff),
        End::Spool(e) => {
            tracing::warn!(adapter = %name, error = %e, "the spool failed; reconnecting after backoff");
            Step::again(e, Pace::Backoff)
        }
        End::Zombie(z) => lost(name, z.to_string()),
        End::Closed(Some(c)) => lost(name, format!("closed by DingTalk with code {c}")),
        End::Closed(None) => lost(name, "the connection closed".into()),
    }
}

fn lost(name: &str, reason: String) -> Step {
    tracing::warn!(adapter = %name, reason = %reason, "dingtalk stream connection lost; reconnecting");
    Step::again(reason, Pace::Resume)
}

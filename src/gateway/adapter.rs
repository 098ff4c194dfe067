//! An adapter: one platform connection kept alive for the life of the gateway.
//!
//! The runner owns everything that outlives a single connection (resume state, backoff, the
//! platform's access token) and decides, from how each connection ended, whether to resume at
//! once, back off, identify afresh or give up. Its health is published to the registry on
//! every transition, so supervision reads facts rather than guesses.

pub mod backoff;
pub mod close_code;
pub mod connect;
pub mod liveness;
pub mod platform;
pub mod proxy;
pub mod session;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::config::{AdapterSpec, Secret};
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::spool::Spool;
use backoff::Backoff;
use close_code::CloseAction;
use platform::{Platform, PlatformError};
use session::{ResumeState, Session, SessionEnd};

/// How an adapter stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum AdapterExit {
    Shutdown,
    /// Retrying cannot help; the gateway exits 78 with this reason.
    Fatal(String),
}

/// What the adapter shares with the rest of the gateway.
pub struct Deps {
    pub spool: Arc<Spool>,
    pub heartbeat: Heartbeat,
    pub http: reqwest::Client,
    /// The proxy settings the WebSocket follows (the HTTPS client reads the same ones).
    pub proxies: proxy::ProxyEnv,
    pub shutdown: watch::Receiver<bool>,
}

/// The deadline of a component that is backing off: it must come back and try within this.
pub fn retry_deadline(spec: &AdapterSpec, backoff_max: Duration) -> Duration {
    backoff_max + spec.timing.connect_timeout + spec.timing.hello_timeout + Duration::from_secs(5)
}

/// Run until shutdown or a fatal error.
pub async fn run(spec: AdapterSpec, secret: Option<Secret>, mut deps: Deps) -> AdapterExit {
    let hb = deps.heartbeat.clone();
    let mut platform = Platform::new(spec.clone(), secret, deps.http.clone());
    let mut backoff = Backoff::new(spec.timing.backoff_min, spec.timing.backoff_max);
    let mut resume: Option<ResumeState> = None;
    let mut delay: Option<Duration> = None;
    let retry_deadline = retry_deadline(&spec, backoff.max().max(Duration::from_secs(60)));
    loop {
        if let Some(d) = delay.take() {
            hb.enter(State::Retrying);
            hb.set_deadline(retry_deadline);
            tracing::info!(adapter = %spec.name, delay_ms = d.as_millis() as u64, "reconnecting after backoff");
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = crate::gateway::until_shutdown(&mut deps.shutdown) => return AdapterExit::Shutdown,
            }
        }
        if *deps.shutdown.borrow() {
            return AdapterExit::Shutdown;
        }
        hb.set_deadline(retry_deadline);
        let prepared = match platform
            .prepare(resume.as_ref().and_then(|r| r.resume_url.as_deref()))
            .await
        {
            Ok(p) => p,
            Err(PlatformError::Fatal(e)) => return fatal(&hb, &spec.name, e),
            Err(PlatformError::Retry(e)) => {
                hb.error(&e);
                tracing::warn!(adapter = %spec.name, error = %e, "setup failed");
                delay = Some(backoff.next_delay(fastrand::f64));
                continue;
            }
        };
        let session = Session {
            adapter: &spec.name,
            url: &prepared.url,
            authorization: prepared.authorization.as_deref(),
            dialect: &prepared.dialect,
            timing: &spec.timing,
            heartbeat: &hb,
            spool: &deps.spool,
            proxies: &deps.proxies,
        };
        let outcome = session.run(resume.take(), &mut deps.shutdown).await;
        resume = outcome.resume;
        if outcome
            .connected_for
            .is_some_and(|c| c >= spec.timing.stable_after)
        {
            backoff.reset();
        }
        let was_connected = outcome.connected_for.is_some();
        // Resume at once only after a connection that lived a while; a server that drops us
        // right after READY over and over gets backoff, not a tight loop.
        let at_once = outcome
            .connected_for
            .is_some_and(|c| c >= spec.timing.backoff_min);
        if was_connected && outcome.end != SessionEnd::Shutdown {
            hb.reconnected();
        }
        match outcome.end {
            SessionEnd::Shutdown => return AdapterExit::Shutdown,
            SessionEnd::Zombie(z) => {
                // Drop and resume at once: the server still has the session.
                hb.error(z);
                tracing::warn!(adapter = %spec.name, reason = %z, "connection is dead; resuming");
                if !at_once {
                    delay = Some(backoff.next_delay(fastrand::f64));
                }
            }
            SessionEnd::Reconnect => {
                tracing::info!(adapter = %spec.name, "server asked to reconnect (op 7); resuming");
                if !at_once {
                    delay = Some(backoff.next_delay(fastrand::f64));
                }
            }
            SessionEnd::InvalidSession { resumable } => {
                if !resumable {
                    resume = None;
                }
                tracing::info!(adapter = %spec.name, resumable, "invalid session (op 9)");
                // Discord asks for a short random wait before identifying again.
                delay = Some(spec.timing.backoff_min.mul_f64(fastrand::f64()));
            }
            SessionEnd::Closed(code) => {
                // The table is the QQ Bot / Discord protocol's; a plain WebSocket server's own
                // codes mean nothing to us, so it is simply reconnected.
                let action = match prepared.dialect {
                    session::Dialect::Gateway { .. } => close_code::classify(code),
                    session::Dialect::Plain { .. } => CloseAction::Resume,
                };
                hb.error(format!(
                    "closed with code {}",
                    code.map_or("none".into(), |c| c.to_string())
                ));
                tracing::info!(adapter = %spec.name, ?code, ?action, "connection closed");
                match action {
                    // A server closing everyone at once (a deploy) must not get everyone back
                    // in the same millisecond: a short jitter spreads the herd.
                    CloseAction::Resume if at_once => {
                        delay = Some(spec.timing.backoff_min.mul_f64(fastrand::f64()));
                    }
                    CloseAction::Resume => delay = Some(backoff.next_delay(fastrand::f64)),
                    CloseAction::Reidentify => {
                        resume = None;
                        if !at_once {
                            delay = Some(backoff.next_delay(fastrand::f64));
                        }
                    }
                    CloseAction::PushBack(at_least) => {
                        backoff.push_back(at_least);
                        delay = Some(backoff.next_delay(fastrand::f64));
                    }
                    CloseAction::Fatal(why) => {
                        return fatal(
                            &hb,
                            &spec.name,
                            format!("closed with code {}: {why}", code.unwrap_or(0)),
                        )
                    }
                }
            }
            SessionEnd::Failed(e) | SessionEnd::Spool(e) => {
                hb.error(&e);
                tracing::warn!(adapter = %spec.name, error = %e, "connection attempt failed");
                platform.invalidate();
                delay = Some(backoff.next_delay(fastrand::f64));
            }
        }
    }
}

fn fatal(hb: &Heartbeat, name: &str, reason: String) -> AdapterExit {
    hb.enter(State::Fatal);
    hb.error(&reason);
    tracing::error!(adapter = name, %reason, "fatal; not retrying");
    AdapterExit::Fatal(reason)
}

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

mod discovery;
mod handshake;
mod reassembly;
mod session;

use std::time::Duration;

use super::Config;
use crate::config::{AdapterSpec, Secret};
use crate::gateway::adapter::backoff::Backoff;
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::{fatal, retry_deadline, wait, AdapterExit, Deps};
use crate::gateway::health::State;
use discovery::ClientConfig;
use handshake::Refusal;
use session::{End, Session};

/// Run a Feishu adapter until shutdown or a fatal refusal.
pub(super) async fn run(
    spec: AdapterSpec<Config>,
    secret: Option<Secret>,
    mut deps: Deps,
) -> AdapterExit {
    let hb = deps.heartbeat.clone();
    let Config {
        app_id, api_base, ..
    } = &spec.protocol;
    let secret = secret.unwrap_or_else(|| Secret::new(String::new()));
    let mut backoff = Backoff::new(spec.timing.backoff_min, spec.timing.backoff_max);
    let retry_deadline = retry_deadline(&spec.timing, backoff.max().max(Duration::from_secs(60)));
    let mut config = ClientConfig::default();
    let mut delay: Option<Duration> = None;
    // Attempts in a row that got no connection: compared with the server's ReconnectCount.
    let mut refused: u64 = 0;
    loop {
        if let Some(d) = delay.take() {
            hb.enter(State::Retrying);
            hb.set_deadline(retry_deadline);
            tracing::info!(adapter = %spec.name, delay_ms = d.as_millis() as u64, "reconnecting after backoff");
            if wait(&hb, tokio::time::Instant::now() + d, &mut deps.shutdown).await {
                return AdapterExit::Shutdown;
            }
        }
        if *deps.shutdown.borrow() {
            return AdapterExit::Shutdown;
        }
        hb.set_deadline(retry_deadline);
        hb.enter(State::Connecting);
        let outage = hb.outage_since();
        let endpoint = tokio::select! {
            r = discovery::discover(&deps.shared, api_base, app_id, &secret, config) => r,
            _ = crate::gateway::until_shutdown(&mut deps.shutdown) => return AdapterExit::Shutdown,
        };
        let endpoint = match endpoint {
            Ok(e) => e,
            Err(PlatformError::Fatal(m)) => return fatal(&hb, &spec.name, m),
            Err(PlatformError::Retry(m)) => {
                refused += 1;
                delay = Some(after_failure(&mut backoff, &config));
                report(&hb, &spec.name, &m, refused, &config);
                continue;
            }
            Err(PlatformError::Unreachable(m)) => {
                refused += 1;
                delay = Some(unanswered(&mut backoff));
                report(&hb, &spec.name, &m, refused, &config);
                continue;
            }
        };
        config = endpoint.config;
        let session = Session {
            adapter: &spec.name,
            url: &endpoint.url,
            config,
            timing: &spec.timing,
            heartbeat: &hb,
            spool: &deps.spool,
            proxies: &deps.shared.proxies,
        };
        let out = session.run(&mut deps.shutdown).await;
        config = out.config;
        if out
            .connected_for
            .is_some_and(|c| c >= spec.timing.stable_after)
        {
            backoff.reset();
        }
        // A connection that dropped at once (or never came up) did not end the outage it
        // interrupted, unless it stored events: then it did its job, however short.
        let lived = out
            .connected_for
            .is_some_and(|c| c >= spec.timing.backoff_min);
        if !lived && out.stored == 0 {
            hb.continue_outage(outage);
        }
        if out.connected_for.is_some() {
            refused = 0;
            if out.end != End::Shutdown {
                hb.reconnected();
            }
        }
        let reason = match out.end {
            End::Shutdown => return AdapterExit::Shutdown,
            End::Refused(Refusal::Fatal(m)) => return fatal(&hb, &spec.name, m),
            // The endpoint never answered the upgrade (refused, reset, no answer in time).
            End::Failed(m) if out.connected_for.is_none() => {
                refused += 1;
                delay = Some(unanswered(&mut backoff));
                report(&hb, &spec.name, &m, refused, &config);
                continue;
            }
            End::Refused(Refusal::Retry(m)) | End::Failed(m) => {
                refused += 1;
                delay = Some(after_failure(&mut backoff, &config));
                report(&hb, &spec.name, &m, refused, &config);
                continue;
            }
            // Nothing after the failed event was acknowledged; a spool that cannot write
            // gets the backoff, not a reconnect at once.
            End::Spool(e) => {
                hb.error(&e);
                tracing::warn!(adapter = %spec.name, error = %e, "the spool failed; reconnecting after backoff");
                delay = Some(after_failure(&mut backoff, &config));
                continue;
            }
            End::Zombie(z) => z.to_string(),
            End::Closed(code) => match code {
                Some(c) => format!("closed by the server with code {c}"),
                None => "the connection closed".into(),
            },
        };
        hb.error(&reason);
        tracing::warn!(adapter = %spec.name, reason = %reason, "long connection lost; reconnecting");
        delay = Some(if lived {
            config.reconnect_nonce.mul_f64(fastrand::f64())
        } else {
            after_failure(&mut backoff, &config)
        });
    }
}

/// The wait after an attempt that got no answer at all, as after a laptop wakes or a VPN
/// reconnects: our backoff alone. ReconnectInterval is the server's word, and the server said
/// nothing; its default (120 s, until a server says otherwise) made a one-second blip at the
/// first connect two minutes deaf.
fn unanswered(backoff: &mut Backoff) -> Duration {
    backoff.next_delay(fastrand::f64)
}

/// The wait after an attempt the server refused, or a connection it accepted that got nothing
/// done: our backoff, but never shorter than the server's ReconnectInterval.
fn after_failure(backoff: &mut Backoff, config: &ClientConfig) -> Duration {
    backoff.push_back(config.reconnect_interval);
    backoff.next_delay(fastrand::f64)
}

/// Record a failed attempt; past the server's ReconnectCount, `status` says that the server
/// keeps refusing and that the adapter, unlike the SDKs, carries on.
fn report(
    hb: &crate::gateway::health::Heartbeat,
    name: &str,
    error: &str,
    refused: u64,
    config: &ClientConfig,
) {
    let past_count = u64::try_from(config.reconnect_count).is_ok_and(|c| refused > c);
    if past_count {
        hb.error(format!(
            "{error}; the server has refused {refused} attempts in a row, more than its \
             ReconnectCount of {}: still retrying with backoff",
            config.reconnect_count
        ));
    } else {
        hb.error(error);
    }
    tracing::warn!(adapter = %name, error, refused, "connecting failed");
}

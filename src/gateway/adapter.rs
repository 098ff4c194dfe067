//! An adapter: one platform connection kept alive for the life of the gateway.
//!
//! The runner owns everything that outlives a single connection (resume state, backoff, the
//! platform's access token, which for QQ sits in `qq_token` where the sender finds it too)
//! and decides, from how each connection ended, whether to resume at once, back off,
//! identify afresh or give up. Its health is published to the registry on
//! every transition, so supervision reads facts rather than guesses.
//!
//! What every transport shares sits beside the runner: proof of life (`liveness`), spool
//! before ack and the resume cursor (`inbox`), how a connection ended (`outcome`), `backoff`,
//! and the platform's session start limit (`identify_queue`). A transport is one connection,
//! from connect to end, that returns an `Outcome`. Today that is the WebSocket connection
//! (`session`), speaking Discord's and QQ Bot's op-code dialect or plain JSON (`dialect`,
//! `opcode`, with close codes per platform in `close_code`); a plain socket that can send
//! takes its sender's frames through its `outlet`. Feishu's binary-frame long connection has
//! its own runner and connection (`feishu`), built from the same pieces, since nothing of the
//! op-code dialect's resume and identify applies to it. The HTTP long-poll kinds (Telegram's
//! `telegram`, Weixin's `weixin` with the account its sender shares, `weixin_account`) share
//! one loop, `long_poll`: a deadline on every poll, spool before cursor.

pub(crate) mod answer_batch;
pub(crate) mod backoff;
pub mod batch;
pub(crate) mod close_code;
pub(crate) mod connect;
mod context_tokens;
pub(crate) mod dialect;
mod feishu;
pub(crate) mod identify_queue;
pub(crate) mod inbox;
pub(crate) mod liveness;
mod long_poll;
pub(crate) mod opcode;
pub(crate) mod outcome;
pub(crate) mod outlet;
pub(crate) mod platform;
pub mod proxy;
pub(crate) mod qq_token;
pub(crate) mod session;
mod shared;
pub(crate) mod telegram;
pub(crate) mod token_cache;
mod weixin;
pub(crate) mod weixin_account;

pub use shared::Shared;

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::Secret;
use crate::gateway::health::{Heartbeat, State};
use crate::gateway::spool::Spool;
use crate::platform::feishu::Config as FeishuConfig;
use crate::platform::qqbot::Config as QqBotConfig;
use crate::platform::websocket::Config as WebSocketConfig;
use crate::platform::{AdapterSpec, Protocol};
use backoff::Backoff;
use close_code::{CloseAction, GatewayPlatform};
use dialect::Dialect;
use inbox::ResumeState;
use outcome::SessionEnd;
use platform::{Platform, PlatformError};
use session::Session;

/// How an adapter stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum AdapterExit {
    Shutdown,
    /// Retrying cannot help; the gateway exits 78 with this reason.
    Fatal(String),
    /// The component's task panicked, with this message: a bug, and a restart (exit 75).
    Crashed(String),
}

/// What the adapter shares with the rest of the gateway.
pub struct Deps {
    pub spool: Arc<Spool>,
    pub heartbeat: Heartbeat,
    pub shared: Shared,
    pub shutdown: watch::Receiver<bool>,
}

/// The deadline of a component that is backing off: it must come back and try within this.
pub fn retry_deadline(spec: &AdapterSpec, backoff_max: Duration) -> Duration {
    backoff_max + spec.timing.connect_timeout + spec.timing.hello_timeout + Duration::from_secs(5)
}

/// Resumes in a row that fail or die within `backoff-min` before the session is dropped and
/// the adapter identifies afresh: a session the platform keeps accepting and killing is dead.
const MAX_SHORT_RESUMES: u32 = 3;

/// Stale-token closes (QQ 4004) in a row answered with an immediate refresh; past this they
/// back off like any failure, so a platform that keeps rejecting fresh tokens is not hammered.
const IMMEDIATE_TOKEN_REFRESHES: u32 = 1;

/// A wait for an Identify slot up to this long happens on the open connection, heartbeating;
/// a longer one is waited out before connecting.
const IDENTIFY_WAIT_CONNECTED: Duration = Duration::from_secs(10);

/// Run until shutdown or a fatal error.
pub async fn run(spec: AdapterSpec, secrets: Vec<Secret>, mut deps: Deps) -> AdapterExit {
    // Every transport so far is keyed on one secret at most.
    let secret = secrets.into_iter().next();
    crate::test_hook::panic_if_asked(&spec.name);
    if let Protocol::Feishu(_) = spec.protocol {
        // Boxed: its state would otherwise enlarge every adapter's task.
        return Box::pin(feishu::run(spec, secret, deps)).await;
    }
    if let Protocol::Telegram(_) | Protocol::Weixin(_) = spec.protocol {
        return Box::pin(long_poll::start(spec, secret, deps)).await;
    }
    let hb = deps.heartbeat.clone();
    let identify = deps
        .shared
        .identify
        .queue(&credential_key(&spec, secret.as_ref()));
    let mut platform = Platform::new(spec.clone(), secret, deps.shared.clone());
    let mut backoff = Backoff::new(spec.timing.backoff_min, spec.timing.backoff_max);
    let mut resume: Option<ResumeState> = None;
    let mut delay: Option<Duration> = None;
    let mut short_resumes = 0;
    let mut stale_tokens = 0;
    let retry_deadline = retry_deadline(&spec, backoff.max().max(Duration::from_secs(60)));
    let outlet = match &spec.protocol {
        Protocol::WebSocket(WebSocketConfig {
            send_frame: Some(_),
            ..
        }) => Some(deps.shared.outlets.get(&spec.name)),
        _ => None,
    };
    loop {
        if let Some(d) = delay.take() {
            hb.enter(State::Retrying);
            hb.set_deadline(retry_deadline);
            tracing::info!(adapter = %spec.name, delay_ms = d.as_millis() as u64, "reconnecting after backoff");
            if wait(&hb, Instant::now() + d, &mut deps.shutdown).await {
                return AdapterExit::Shutdown;
            }
        }
        if *deps.shutdown.borrow() {
            return AdapterExit::Shutdown;
        }
        hb.set_deadline(retry_deadline);
        // Boxed: token and gateway-URL requests live only while they run.
        let prepared =
            match Box::pin(platform.prepare(resume.as_ref().and_then(|r| r.resume_url.as_deref())))
                .await
            {
                Ok(p) => p,
                Err(PlatformError::Fatal(e)) => return fatal(&hb, &spec.name, e),
                Err(PlatformError::Retry(e) | PlatformError::Unreachable(e)) => {
                    hb.error(&e);
                    tracing::warn!(adapter = %spec.name, error = %e, "setup failed");
                    delay = Some(backoff.next_delay(fastrand::f64));
                    continue;
                }
            };
        if let Some(limit) = prepared.limit {
            identify.update(limit);
        }
        // A long wait for the session start limit (a spent daily budget) is waited out here,
        // holding no connection; the slot itself is booked when Identify is about to go out.
        if let (None, Dialect::Gateway(gateway)) = (&resume, &prepared.dialect) {
            let at = identify.earliest(gateway.shard.map_or(0, |s| s[0]));
            if at > Instant::now() + IDENTIFY_WAIT_CONNECTED {
                hb.enter(State::Retrying);
                let secs = at.saturating_duration_since(Instant::now()).as_secs_f64();
                hb.error(format!(
                    "waiting {secs:.0}s for the platform's session start limit"
                ));
                tracing::info!(adapter = %spec.name, wait_s = secs, "identify queued by the session start limit");
                if wait(&hb, at, &mut deps.shutdown).await {
                    return AdapterExit::Shutdown;
                }
            }
        }
        let session = Session {
            adapter: &spec.name,
            url: &prepared.url,
            authorization: prepared.authorization.as_deref(),
            dialect: &prepared.dialect,
            timing: &spec.timing,
            heartbeat: &hb,
            spool: &deps.spool,
            proxies: &deps.shared.proxies,
            identify: &identify,
            outlet: outlet.as_deref(),
        };
        let resuming = resume.is_some();
        let outage = hb.outage_since();
        let outcome = session.run(resume.take(), &mut deps.shutdown).await;
        resume = outcome.resume;
        if outcome
            .connected_for
            .is_some_and(|c| c >= spec.timing.stable_after)
        {
            backoff.reset();
        }
        let was_connected = outcome.connected_for.is_some();
        // A connection that lived a while may come back at once; one that the server dropped
        // right after READY (or never got there) gets backoff, not a tight loop, and did not
        // end the outage it interrupted.
        let lived = outcome
            .connected_for
            .is_some_and(|c| c >= spec.timing.backoff_min);
        // A connection that stored dispatches did its job, however short it was: a resume
        // that replays a long backlog and then dies still moved the session on, and dropping
        // that session would lose what it had yet to replay.
        let progressed = outcome.stored > 0;
        if lived || progressed {
            short_resumes = 0;
        } else {
            hb.continue_outage(outage);
            if resuming {
                short_resumes += 1;
            }
        }
        if lived {
            stale_tokens = 0;
        }
        if short_resumes >= MAX_SHORT_RESUMES && resume.is_some() {
            tracing::warn!(adapter = %spec.name, short_resumes, "resumes keep failing; identifying afresh");
            resume = None;
            short_resumes = 0;
        }
        if was_connected && outcome.end != SessionEnd::Shutdown {
            hb.reconnected();
        }
        match outcome.end {
            SessionEnd::Shutdown => return AdapterExit::Shutdown,
            SessionEnd::Zombie(z) => {
                // Drop and resume at once: the server still has the session.
                hb.error(z);
                tracing::warn!(adapter = %spec.name, reason = %z, "connection is dead; resuming");
                if !lived {
                    delay = Some(backoff.next_delay(fastrand::f64));
                }
            }
            SessionEnd::Reconnect => {
                tracing::info!(adapter = %spec.name, "server asked to reconnect (op 7); resuming");
                if !lived {
                    delay = Some(backoff.next_delay(fastrand::f64));
                }
            }
            SessionEnd::InvalidSession { resumable } => {
                if !resumable {
                    resume = None;
                }
                hb.error(format!("invalid session (op 9, resumable: {resumable})"));
                tracing::info!(adapter = %spec.name, resumable, "invalid session (op 9)");
                // Discord asks for a short random wait before identifying again; a platform
                // that answers every Identify with op 9 gets the growing backoff, so that it
                // is not asked twice a second for ever (each Identify spends the daily budget).
                delay = if lived {
                    Some(spec.timing.backoff_min.mul_f64(fastrand::f64()))
                } else {
                    Some(backoff.next_delay(fastrand::f64))
                };
            }
            SessionEnd::Closed(code) => {
                // A plain WebSocket server's own codes mean nothing to us: it is reconnected.
                let (action, meaning) = match prepared.dialect {
                    Dialect::Gateway(gateway) => gateway.platform.classify(code),
                    Dialect::Plain { .. } => (CloseAction::Resume, "closed"),
                };
                let code_text = code.map_or("none".into(), |c| c.to_string());
                hb.error(format!("closed with code {code_text} ({meaning})"));
                tracing::info!(adapter = %spec.name, code = %code_text, ?action, meaning, "connection closed");
                match action {
                    // A server closing everyone at once (a deploy) must not get everyone back
                    // in the same millisecond: a short jitter spreads the herd.
                    CloseAction::Resume if lived => {
                        delay = Some(spec.timing.backoff_min.mul_f64(fastrand::f64()));
                    }
                    CloseAction::Resume => delay = Some(backoff.next_delay(fastrand::f64)),
                    CloseAction::Reidentify => {
                        resume = None;
                        if !lived {
                            delay = Some(backoff.next_delay(fastrand::f64));
                        }
                    }
                    CloseAction::RefreshToken => {
                        platform.drop_token();
                        stale_tokens += 1;
                        if stale_tokens > IMMEDIATE_TOKEN_REFRESHES {
                            delay = Some(backoff.next_delay(fastrand::f64));
                        }
                    }
                    CloseAction::PushBack(at_least) => {
                        backoff.push_back(at_least);
                        delay = Some(backoff.next_delay(fastrand::f64));
                    }
                    CloseAction::Fatal => {
                        let hint = fatal_hint(&spec, code);
                        return fatal(
                            &hb,
                            &spec.name,
                            format!("closed with code {code_text}: {meaning}{hint}"),
                        );
                    }
                }
            }
            SessionEnd::Failed(e) | SessionEnd::Spool(e) => {
                hb.error(&e);
                tracing::warn!(adapter = %spec.name, error = %e, "connection attempt failed");
                platform.invalidate();
                // A resume URL that could not be reached is not tried again; the session
                // may still resume through the normal gateway URL.
                if let Some(r) = resume.as_mut() {
                    r.resume_url = None;
                }
                delay = Some(backoff.next_delay(fastrand::f64));
            }
        }
    }
}

/// Sleep until `until`, beating on the way: waiting out a schedule (a backoff, the platform's
/// session start limit) is progress, however long the platform asks for. True on shutdown.
async fn wait(hb: &Heartbeat, until: Instant, shutdown: &mut watch::Receiver<bool>) -> bool {
    const STEP: Duration = Duration::from_secs(5);
    loop {
        let now = Instant::now();
        if now >= until {
            return false;
        }
        hb.beat();
        tokio::select! {
            _ = tokio::time::sleep_until(until.min(now + STEP)) => {}
            _ = crate::gateway::until_shutdown(shutdown) => return true,
        }
    }
}

/// What the user can do about a fatal close, where the code says more than its meaning.
fn fatal_hint(spec: &AdapterSpec, code: Option<u16>) -> String {
    match (&spec.protocol, code) {
        (Protocol::QqBot(QqBotConfig { intents, .. }), Some(4014)) => {
            let gated = crate::platform::qqbot::gated_intents(*intents);
            if gated.is_empty() {
                "; the platform has not granted one of the configured intents".into()
            } else {
                format!(
                    "; remove {} from intents in gateway.toml, or apply for it on the QQ \
                     open platform",
                    gated.join(", ")
                )
            }
        }
        (Protocol::Discord(_), Some(4014)) => {
            "; enable the privileged intents (message-content, guild-members) for the bot in \
             the Discord developer portal, or remove them from intents"
                .into()
        }
        _ => String::new(),
    }
}

/// Which session start limit an adapter counts against: its platform and credential,
/// hashed, so the key never holds a secret.
fn credential_key(spec: &AdapterSpec, secret: Option<&Secret>) -> String {
    let (platform, identity) = match &spec.protocol {
        Protocol::QqBot(QqBotConfig { app_id, .. }) => (GatewayPlatform::QqBot, app_id.as_str()),
        Protocol::Discord(_) => (
            GatewayPlatform::Discord,
            secret.map(Secret::expose).unwrap_or(""),
        ),
        Protocol::WebSocket(WebSocketConfig { url, .. }) => return format!("websocket:{url}"),
        // Feishu has no session start limit; its own runner never books a slot.
        Protocol::Feishu(FeishuConfig { app_id, .. }) => return format!("feishu:{app_id}"),
        // The long-poll kinds have no session start limit either.
        Protocol::Telegram(_) | Protocol::Weixin(_) => {
            return format!("{}:{}", spec.protocol.kind(), spec.name)
        }
    };
    let digest = Sha256::digest(format!("{platform:?}\0{identity}"));
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn fatal(hb: &Heartbeat, name: &str, reason: String) -> AdapterExit {
    hb.enter(State::Fatal);
    hb.error(&reason);
    tracing::error!(adapter = %name, %reason, "fatal; not retrying");
    AdapterExit::Fatal(reason)
}

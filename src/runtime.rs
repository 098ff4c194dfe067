//! A gateway run, the composition root of `hermes-svc gateway run --profile NAME`: it claims
//! the profile, opens the stores, starts the front end and the components, waits for them to
//! report in, runs the loop, and drains. Each phase is a step of [`serve`], in that order,
//! and each hands the next what it made.
//!
//! The order is fixed: ownership of the profile (the instance lock), the config, ownership of
//! its credentials (token locks), the pid file, the spool and the outbox, the front end (the
//! local API, which the caller provides: the runtime names none), the cron ticker, the
//! adapters and the outbox workers; `READY=1` once every adapter has reported in. The loop is
//! one `select!` over signals, the components' ends, the loss of ownership and the watchdog
//! tick, which feeds systemd only while every component is fresh; a stale one is named in
//! `STATUS=` and the feed stops, so systemd restarts the gateway. Without a systemd watchdog
//! the same rule drives a self-watchdog that exits 75, with the deadline launchd's plist
//! passes in `HERMES_WATCHDOG_SEC`.
//!
//! How a run ended becomes an exit status in one place, `gateway::exit`, which knows how the
//! manager (`HERMES_SERVICE_MANAGER`) reads it.

mod component;
mod components;
mod frontend;
mod frontends;
mod media;
mod outbound;
mod ownership;
pub(crate) mod reload;
mod supervision;
mod watchdog;

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::config::{self, ClusterSpec, ConfigError, Secret};
use crate::gateway::adapter;
use crate::gateway::cron::CronContext;
use crate::gateway::exit::{self, Outcome, Requested};
use crate::gateway::flock::{self, Holder, LockError, Owner};
use crate::gateway::notify;
use crate::gateway::pid_file::{PidFile, PidRecord};
use crate::gateway::spool::{Spool, SpoolError};
use crate::gateway::state_file::StateFile;
use crate::gateway::token_lock::TokenLockError;
use crate::launchd::plist::WATCHDOG_ENV;
use crate::logging::Component;
use crate::platform::{AdapterSpec, GatewayConfig};
use crate::profile::Profile;
use crate::service::manager::{Manager, UnknownManager};
use components::Components;
use frontend::StoreParts;
pub(crate) use frontend::{Env, Frontend, FrontendError, Started, Stores};
use frontends::Frontends;
use ownership::{ClusterOwnership, LocalOwnership, Ownership};
use reload::Reloader;
use supervision::{Stop, Supervision, Tick};
use watchdog::BadWatchdogEnv;

/// The longest interval between ticks (state file, STATUS=, self-watchdog).
const MAX_TICK: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub(crate) enum GatewayError {
    #[error("profile {profile} is already running: {}", flock::describe(.holder))]
    AlreadyRunning { profile: String, holder: Owner },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    TokenLock(TokenLockError),
    #[error("adapter {adapter}: {reason}")]
    AdapterFatal { adapter: String, reason: String },
    /// Ask the supervisor for a clean restart (exit 75).
    #[error("restarting: {0}")]
    Restart(String),
    #[error("failed to {what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Lock(LockError),
    #[error(transparent)]
    Profile(#[from] crate::profile::ProfileError),
    #[error(transparent)]
    Manager(#[from] UnknownManager),
    #[error(transparent)]
    WatchdogEnv(#[from] BadWatchdogEnv),
    #[error(transparent)]
    Frontend(#[from] FrontendError),
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
    #[error("cannot open the spool in {}", dir.display())]
    Spool {
        dir: std::path::PathBuf,
        #[source]
        source: SpoolError,
    },
}

impl GatewayError {
    /// What the service manager should do about this error; `exit::status` turns it into a
    /// code for the manager at hand.
    pub(crate) fn outcome(&self) -> Outcome {
        match self {
            GatewayError::AlreadyRunning { .. }
            | GatewayError::Config(_)
            | GatewayError::AdapterFatal { .. }
            | GatewayError::Profile(_)
            | GatewayError::Manager(_)
            | GatewayError::WatchdogEnv(_)
            // A TLS file or an endpoint only a person can fix; an etcd that is down is
            // waited for as a standby, never an error.
            | GatewayError::Cluster(_) => Outcome::StayDown,
            GatewayError::TokenLock(e) if e.is_conflict() => Outcome::StayDown,
            // A path only a person can fix: restarting would meet it again.
            GatewayError::Frontend(e) if e.needs_a_fix => Outcome::StayDown,
            // An inbox someone else owns, a link, a FIFO: receiving cannot start until a
            // person looks, and flapping against it would only fill the journal.
            GatewayError::Spool {
                source: SpoolError::Untrusted(e),
                ..
            } if e.needs_a_fix() => Outcome::StayDown,
            GatewayError::Restart(_) => Outcome::Restart,
            GatewayError::Io { .. }
            | GatewayError::Lock(_)
            | GatewayError::TokenLock(_)
            | GatewayError::Frontend(_)
            | GatewayError::Spool { .. } => Outcome::Failed,
        }
    }
}

/// `error` and its causes on one line, as `report` prints them after `error:`.
pub(crate) fn reason(error: &GatewayError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> GatewayError {
    let what = what.into();
    move |source| GatewayError::Io { what, source }
}

/// Run until SIGTERM or SIGINT (Ok), or until something ends the run with an error, whose
/// reason is then also left in the state file, for `status` to show. `frontend` is the
/// agent's way in (the local API), started once the stores are open.
pub(crate) async fn run(
    profile: &Profile,
    manager: Manager,
    frontends: Vec<Box<dyn Frontend>>,
) -> Result<Requested, GatewayError> {
    run_owned(profile, manager, frontends)
        .instrument(Component::Runtime.span())
        .await
}

/// `run` once the profile is claimed; its lines are the runtime's, each task's its own.
async fn run_owned(
    profile: &Profile,
    manager: Manager,
    frontends: Vec<Box<dyn Frontend>>,
) -> Result<Requested, GatewayError> {
    let home = profile.home();
    std::fs::create_dir_all(&home).map_err(io(format!("create {}", home.display())))?;
    let me = Holder {
        pid: std::process::id(),
        profile: profile.name().to_string(),
    };
    let mut local = LocalOwnership::new(profile, me.clone());
    local.claim_profile()?;
    // Only while owning the profile: the state file belongs to its owner, so a second
    // instance refused above must not write it.
    let result = serve(profile, &me, &mut local, frontends).await;
    if let Err(e) = &result {
        let status = exit::status(manager, e.outcome());
        let last_words = StateFile::exited(profile.name().as_str(), status, manager, &reason(e));
        if let Err(e) = last_words.write(&profile.state_file()) {
            tracing::warn!(error = %e, "failed to write the exit reason to the state file");
        }
    }
    result
}

/// The run proper, phase by phase, from the config on, with the profile owned.
async fn serve(
    profile: &Profile,
    me: &Holder,
    local: &mut LocalOwnership,
    frontends: Vec<Box<dyn Frontend>>,
) -> Result<Requested, GatewayError> {
    let plan = Plan::read(profile)?;
    let mut across_hosts;
    let ownership: &mut dyn Ownership = match plan.config.cluster.clone() {
        Some(spec) => {
            across_hosts = ClusterOwnership::new(local, spec);
            &mut across_hosts
        }
        None => local,
    };
    // Signals first: from here on a SIGTERM is a clean stop, never the default's kill.
    let mut supervision = Supervision::new(&plan)?;
    let identities: Vec<(String, String)> = plan
        .adapters
        .iter()
        .map(|(spec, secrets)| (spec.name.clone(), spec.identity(secrets)))
        .collect();
    ownership.claim_credentials(&profile.config_file(), &identities)?;
    let _pid_file = write_pid_file(profile, me)?;
    note_membership(profile, plan.config.cluster.as_ref());

    let (spool, shared, outbound) = open_stores(profile, &plan, ownership)?;
    let syncer = spool.spawn_syncer(Duration::from_millis(100));

    // The front end, then the components.
    let mut components = Components::new();
    let media = media::open(profile, &plan.config, &plan.adapters, &shared);
    let stores = StoreParts {
        spool: spool.clone(),
        outbox: outbound.for_frontend(),
        whoami: shared.whoami.clone(),
        media: media
            .as_ref()
            .map(|(inbound, _)| inbound.clone())
            .map_err(Clone::clone),
    };
    let frontends = Frontends::start(frontends, stores, &plan.config, &mut components)?;
    let frontend_health = frontends.healths();
    let parts = reload::Parts {
        spool: spool.clone(),
        shared: shared.clone(),
        outbox: outbound.outbox().cloned(),
        in_cluster: plan.config.cluster.is_some(),
        media: media.ok(),
        frontends,
    };
    let mut reloader = Reloader::new(profile, &plan, parts);
    let mut tick = Tick {
        name: profile.name().to_string(),
        state_path: profile.state_file(),
        outbound: &outbound,
        cron: plan.config.cron.clone(),
        frontend_health,
        written: None,
        reload: None,
    };

    // In a cluster, nothing connects to a platform until this run is the active.
    let standby_stop = supervision
        .stand_by(
            ownership,
            &mut components,
            &mut tick,
            &shared.grid,
            &mut reloader,
        )
        .await?;
    let early_stop = match standby_stop {
        Some(signal) => Some(Stop::Signal(signal)),
        None => match take_over(ownership, &spool, outbound.outbox()).await {
            Err(why) => Some(Stop::Restart(why)),
            Ok(()) => {
                let mut cron_ctx =
                    CronContext::new(profile.home(), profile.logs_dir().join("cron.log"));
                cron_ctx.outbox = outbound.outbox().cloned();
                cron_ctx.env_remove.push("HERMES_TEST_FAULT".into());
                let ready_deadline = reloader.start(&mut components, cron_ctx);
                supervision
                    .wait_ready(&components, ready_deadline, me)
                    .await
                    .map(Stop::Signal)
            }
        },
    };
    let stop = match early_stop {
        Some(stop) => stop,
        None => {
            supervision
                .run_loop(
                    &mut components,
                    ownership,
                    &mut tick,
                    &shared.grid,
                    &mut reloader,
                )
                .await
        }
    };

    wind_down(&stop, &supervision, &mut components, ownership).await;
    syncer.abort();
    if let Err(e) = spool.sync().await {
        tracing::warn!(error = %e, "failed to sync the spool");
    }
    match stop {
        Stop::Signal(signal) => Ok(Requested(signal)),
        Stop::Fatal { adapter, reason } => Err(GatewayError::AdapterFatal { adapter, reason }),
        Stop::Restart(r) => Err(GatewayError::Restart(r)),
        // Campaign again, as a new run: under a manager, its restart.
        Stop::Fenced(r) => Err(GatewayError::Restart(format!("fenced: {r}"))),
    }
}

/// The stores: the spool, what the adapters share (its HTTP client, the fence), and the
/// outbox, each fenced by `ownership`.
fn open_stores(
    profile: &Profile,
    plan: &Plan,
    ownership: &dyn Ownership,
) -> Result<(Arc<Spool>, adapter::Shared, outbound::Outbound), GatewayError> {
    let spool = Arc::new(open_spool(profile)?);
    let mut shared = adapter::Shared::new(adapter::proxy::ProxyEnv::from_env())
        .map_err(|e| io("build the HTTP client")(std::io::Error::other(e)))?;
    shared.fence = ownership.fence();
    let outbound = outbound::open(profile, &plan.adapters, &shared);
    if let Some(outbox) = outbound.outbox() {
        outbox.set_fence(ownership.fence());
        if plan.config.cluster.is_some() {
            outbox.join_cluster();
        }
    }
    Ok((spool, shared, outbound))
}

/// Say why the run stops (the log, `STOPPING=1`), then end its components: drained, and the
/// ownership released after; or, fenced, aborted at once.
async fn wind_down(
    stop: &Stop,
    supervision: &Supervision,
    components: &mut Components,
    ownership: &mut dyn Ownership,
) {
    let why = match stop {
        Stop::Signal(s) => format!("stopping on {s}"),
        Stop::Fatal { adapter, reason } => format!("stopping: adapter {adapter}: {reason}"),
        Stop::Restart(r) => format!("restarting: {r}"),
        Stop::Fenced(r) => format!("fenced: {r}"),
    };
    // A stop nobody asked for is an error worth finding in the log (launchd's
    // `gateway.err.log`), the self-watchdog's reason above all.
    match stop {
        Stop::Signal(_) => tracing::info!(reason = %why, "draining"),
        Stop::Fatal { .. } | Stop::Restart(_) => tracing::error!(reason = %why, "draining"),
        Stop::Fenced(_) => tracing::error!(reason = %why, "closing every platform connection"),
    }
    supervision.send(&format!("STOPPING=1\n{}", notify::status_line(&why)));
    if let Stop::Fenced(_) = stop {
        // The fence has closed, so nothing more is sent; the connections close now, before
        // another host may take over, not after a drain.
        components.abort();
    } else {
        components
            .drain(|left| supervision.send(&format!("EXTEND_TIMEOUT_USEC={}", left.as_micros())))
            .await;
        // Only once nothing here acts any more: a standby may take over at once.
        ownership.release().await;
    }
}

/// Leave the note that this profile runs in a cluster, or warn that it did and its config no
/// longer says so: this run would then act beside the cluster's active.
fn note_membership(profile: &Profile, spec: Option<&ClusterSpec>) {
    let path = profile.cluster_membership();
    match spec {
        Some(spec) => {
            if let Err(e) = crate::cluster::Membership::of(spec).write(&path) {
                tracing::warn!(path = %path.display(), error = %e, "failed to note the cluster membership");
            }
        }
        None => {
            if let Some(was) = crate::cluster::Membership::read(&path) {
                tracing::warn!(
                    endpoints = %was.endpoints.join(", "),
                    node = %was.node,
                    note = %path.display(),
                    "this profile ran in an etcd cluster and gateway.toml has no [cluster] now: if the other hosts still run it there, this gateway runs the bot beside their active; add the same [cluster] table back, or remove the note once the profile has left the cluster"
                );
            }
        }
    }
}

/// A cluster's new active goes on from what its predecessor left in the replica: each
/// adapter's position, and the outbox's messages. Nothing to take on one machine.
async fn take_over(
    ownership: &dyn Ownership,
    spool: &Spool,
    outbox: Option<&Arc<crate::gateway::outbox::Outbox>>,
) -> Result<(), String> {
    let Some(replica) = ownership.replica() else {
        return Ok(());
    };
    spool.set_replica(replica.positions);
    if let Some(outbox) = outbox {
        outbox.inherit(replica.messages).await.map_err(|e| {
            format!(
                "cannot take the cluster's outbox: {}",
                crate::error_chain::one_line(&e)
            )
        })?;
    }
    Ok(())
}

/// What the run is asked to do, read before anything is claimed or written: the config, each
/// adapter's secret, and the watchdog's settings.
struct Plan {
    config: GatewayConfig,
    adapters: Vec<(AdapterSpec, Vec<Secret>)>,
    /// systemd's watchdog interval, when it set one.
    watchdog: Option<Duration>,
    /// The self-watchdog's deadline, which applies when systemd set no watchdog.
    self_watchdog: Duration,
}

impl Plan {
    fn read(profile: &Profile) -> Result<Plan, GatewayError> {
        Self::read_with(profile, &|var| std::env::var(var).ok())
    }

    /// [`Plan::read`] with the credential variables looked up by `env`: a reload's, which
    /// reads a renewed `.env` itself.
    fn read_with(
        profile: &Profile,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Plan, GatewayError> {
        let config_path = profile.config_file();
        let config = config::load(&config_path)?;
        let watchdog = notify::watchdog_interval();
        // Read only when it applies (with systemd's watchdog the variable means nothing).
        let self_watchdog = match watchdog {
            Some(_) => config.self_watchdog,
            None => watchdog::self_watchdog(
                std::env::var_os(WATCHDOG_ENV).as_deref(),
                config.self_watchdog,
            )?,
        };
        let mut adapters = vec![];
        for spec in &config.adapters {
            let secrets = spec.credentials_with(&config_path, &profile.env_file(), env)?;
            adapters.push((spec.clone(), secrets));
        }
        Ok(Plan {
            config,
            adapters,
            watchdog,
            self_watchdog,
        })
    }

    /// How often the state file is considered and the watchdog decided, at most
    /// [`MAX_TICK`]: under systemd's watchdog two fifths of `WatchdogSec`, so that no gap
    /// between two `WATCHDOG=1` reaches the half systemd asks for, however late a tick runs
    /// by a few milliseconds; else half the self-watchdog's.
    fn tick_every(&self) -> Duration {
        self.watchdog
            .map_or(self.self_watchdog / 2, |w| w * 2 / 5)
            .min(MAX_TICK)
            .max(Duration::from_millis(100))
    }
}

fn open_spool(profile: &Profile) -> Result<Spool, GatewayError> {
    Spool::open(&profile.inbox_dir()).map_err(|source| GatewayError::Spool {
        dir: profile.inbox_dir(),
        source,
    })
}

fn write_pid_file(profile: &Profile, me: &Holder) -> Result<PidFile, GatewayError> {
    PidFile::write(
        &profile.pid_file(),
        &PidRecord {
            pid: me.pid,
            profile: me.profile.clone(),
            home: profile.home(),
            started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        },
    )
    .map_err(io(format!("write {}", profile.pid_file().display())))
}

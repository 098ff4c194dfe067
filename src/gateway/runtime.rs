//! The gateway's run loop: one `select!` over signals, adapter exits and the watchdog tick.
//!
//! Start order is fixed: instance lock, config, secrets, token locks, pid file, spool, then the
//! components, and `READY=1` once every component has reported in. The watchdog tick feeds
//! systemd only while every component is fresh; a stale one is named in `STATUS=` and the feed
//! stops, so systemd restarts the gateway. Without a systemd watchdog the same rule drives a
//! self-watchdog that exits 75, with the deadline launchd's plist passes in
//! `HERMES_WATCHDOG_SEC` when it runs the gateway.
//!
//! How a run ended becomes an exit status in one place, `gateway::exit`, which knows how the
//! manager (`HERMES_SERVICE_MANAGER`) reads it.

mod component;
mod outbound;
mod watchdog;

use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;

use crate::api::ApiError;
use crate::config::{self, ConfigError};
use crate::gateway::adapter::{self, AdapterExit};
use crate::gateway::cron::{self, CronContext};
use crate::gateway::exit::{self, Outcome, Requested};
use crate::gateway::flock::{self, HeldLock, Holder, LockError, Owner};
use crate::gateway::health::{ComponentKind, Registry, State};
use crate::gateway::notify::{self, Notifier};
use crate::gateway::pid_file::{PidFile, PidRecord};
use crate::gateway::spool::{Spool, SpoolError};
use crate::gateway::state_file::StateFile;
use crate::gateway::token_lock::{self, TokenLockError};
use crate::launchd::plist::WATCHDOG_ENV;
use crate::logging::Component;
use crate::profile::Profile;
use crate::service::manager::{Manager, UnknownManager};
use watchdog::{BadWatchdogEnv, Watchdog};

/// How long shutdown waits for components before giving up on them. `TimeoutStopSec=` in the
/// unit is longer, so a drain is never cut short by SIGKILL.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
/// Draining longer than this is unusual; systemd is told so with `EXTEND_TIMEOUT_USEC=`.
const DRAIN_EXPECTED: Duration = Duration::from_secs(5);
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
    Api(#[from] ApiError),
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
            | GatewayError::WatchdogEnv(_) => Outcome::StayDown,
            GatewayError::TokenLock(e) if e.is_conflict() => Outcome::StayDown,
            // A path only a person can fix: restarting would meet it again.
            GatewayError::Api(e) if e.needs_a_fix() => Outcome::StayDown,
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
            | GatewayError::Api(_)
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

/// What woke the run loop.
enum Event {
    Signal(&'static str),
    /// A component's task ended: how, or its panic.
    Exited(Result<(String, AdapterExit), tokio::task::JoinError>),
    /// Time to write the state file and decide on the watchdog.
    Tick,
}

/// Why the loop ended.
enum Stop {
    Signal(&'static str),
    Fatal { adapter: String, reason: String },
    Restart(String),
}

/// Run until SIGTERM or SIGINT (Ok), or until something ends the run with an error, whose
/// reason is then also left in the state file, for `status` to show.
pub(crate) async fn run(profile: &Profile, manager: Manager) -> Result<Requested, GatewayError> {
    run_instance(profile, manager)
        .instrument(Component::Runtime.span())
        .await
}

/// `run` under the instance lock; its lines are the runtime's, each task's its own.
async fn run_instance(profile: &Profile, manager: Manager) -> Result<Requested, GatewayError> {
    let name = profile.name().to_string();
    let home = profile.home();
    std::fs::create_dir_all(&home).map_err(io(format!("create {}", home.display())))?;

    let me = Holder {
        pid: std::process::id(),
        profile: name.clone(),
    };
    let _instance = match HeldLock::try_acquire(&profile.lock_file(), &me) {
        Ok(lock) => lock,
        Err(LockError::Held { holder, .. }) => {
            return Err(GatewayError::AlreadyRunning {
                profile: name,
                holder,
            })
        }
        Err(e) => return Err(GatewayError::Lock(e)),
    };
    // Only while holding the instance lock: the state file belongs to the lock's holder, so a
    // second instance refused above must not write it.
    let result = serve(profile, &me).await;
    if let Err(e) = &result {
        let status = exit::status(manager, e.outcome());
        let last_words = StateFile::exited(&name, status, manager, &reason(e));
        if let Err(e) = last_words.write(&profile.state_file()) {
            tracing::warn!(error = %e, "failed to write the exit reason to the state file");
        }
    }
    result
}

/// The run proper, from the config on, under the instance lock `run` holds for it.
async fn serve(profile: &Profile, me: &Holder) -> Result<Requested, GatewayError> {
    let name = me.profile.clone();
    let home = profile.home();
    let config_path = profile.config_file();
    let config = config::load(&config_path)?;
    let watchdog = notify::watchdog_interval();
    // Read only when it applies (with systemd's watchdog the variable means nothing), and
    // with the config, before anything is held or written.
    let self_watchdog = match watchdog {
        Some(_) => config.self_watchdog,
        None => watchdog::self_watchdog(
            std::env::var_os(WATCHDOG_ENV).as_deref(),
            config.self_watchdog,
        )?,
    };
    let mut adapters = vec![];
    for spec in &config.adapters {
        let secret = spec.credential(&config_path, &profile.env_file())?;
        adapters.push((spec.clone(), secret));
    }
    let identities: Vec<(String, String)> = adapters
        .iter()
        .map(|(spec, secret)| (spec.name.clone(), spec.identity(secret.as_ref())))
        .collect();
    let _token_locks =
        token_lock::acquire_all(&config_path, &identities, me).map_err(GatewayError::TokenLock)?;

    let _pid_file = PidFile::write(
        &profile.pid_file(),
        &PidRecord {
            pid: me.pid,
            profile: name.clone(),
            home: home.clone(),
            started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        },
    )
    .map_err(io(format!("write {}", profile.pid_file().display())))?;

    let spool =
        Arc::new(
            Spool::open(&profile.inbox_dir()).map_err(|source| GatewayError::Spool {
                dir: profile.inbox_dir(),
                source,
            })?,
        );
    let syncer = spool.spawn_syncer(Duration::from_millis(100));

    let notifier = Notifier::from_env().map_err(io("open NOTIFY_SOCKET"))?;
    let tick_every = watchdog
        .map_or(self_watchdog / 2, |w| w / 2)
        .min(MAX_TICK)
        .max(Duration::from_millis(100));
    let mut sigterm = signal(SignalKind::terminate()).map_err(io("install SIGTERM handler"))?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(io("install SIGINT handler"))?;
    let send = |state: &str| {
        if let Err(e) = notifier.send(state) {
            tracing::warn!(error = %e, "failed to notify systemd");
        }
    };

    let registry = Registry::new();
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut tasks: JoinSet<(String, AdapterExit)> = JoinSet::new();
    // Each component's task, by name, so that a stale one can be given up at once on stop.
    let mut handles: Vec<(String, AbortHandle)> = vec![];
    let shared = adapter::Shared::new(adapter::proxy::ProxyEnv::from_env())
        .map_err(|e| io("build the HTTP client")(std::io::Error::other(e)))?;
    let mut outbound = outbound::open(profile, &adapters, &shared);
    let api = outbound::serve_api(
        profile,
        &spool,
        &outbound,
        &shutdown_rx,
        &mut tasks,
        &mut handles,
    )?;
    if !config.cron.is_empty() {
        let mut ctx = CronContext::new(home.clone(), profile.logs_dir().join("cron.log"));
        ctx.outbox = outbound.outbox().cloned();
        ctx.env_remove.push("HERMES_TEST_FAULT".into());
        // One name for the heartbeat, the task and the ticker's own logs.
        let component = ctx.name.clone();
        let hb = registry.register(&component, ComponentKind::Cron, cron::DEADLINE);
        let jobs = config.cron.clone();
        let rx = shutdown_rx.clone();
        let work = {
            let hb = hb.clone();
            async move {
                cron::run(jobs, hb, ctx, rx).await;
                AdapterExit::Shutdown
            }
        };
        handles.push((
            component.clone(),
            tasks.spawn(
                component::supervised(component, Some(hb), work).instrument(Component::Cron.span()),
            ),
        ));
    }
    let mut ready_deadline = Instant::now();
    for (spec, secret) in adapters {
        let hb = registry.register(
            &spec.name,
            ComponentKind::Adapter(spec.protocol.kind()),
            adapter::retry_deadline(&spec, spec.timing.backoff_max),
        );
        ready_deadline = ready_deadline
            .max(Instant::now() + spec.timing.connect_timeout + spec.timing.hello_timeout * 2);
        let deps = adapter::Deps {
            spool: spool.clone(),
            heartbeat: hb.clone(),
            shared: shared.clone(),
            shutdown: shutdown_rx.clone(),
        };
        let name = spec.name.clone();
        handles.push((
            name.clone(),
            tasks.spawn(
                component::supervised(name, Some(hb), adapter::run(spec, secret, deps))
                    .instrument(Component::Adapter.span()),
            ),
        ));
    }

    // After the adapters, whose connections coming back each worker watches.
    outbound::spawn_workers(
        &mut outbound,
        &registry,
        &shutdown_rx,
        &mut tasks,
        &mut handles,
    );

    // READY=1 once every component has reported in: connected, retrying or failed. A stop
    // requested meanwhile is honoured at once.
    let ready_deadline = ready_deadline.min(Instant::now() + Duration::from_secs(60));
    // Meanwhile STATUS= says what the start waits for, for `start` (and `systemctl status`)
    // to show; twice a second at most, and only when it changed.
    let (mut told, mut next_status) = (String::new(), Instant::now());
    let early_stop = loop {
        let snapshot = registry.snapshot();
        let starting = snapshot.components.iter().any(|c| {
            c.kind.is_adapter()
                && matches!(
                    c.state,
                    State::Starting | State::Connecting | State::Identifying | State::Resuming
                )
        });
        if !starting || Instant::now() >= ready_deadline {
            break None;
        }
        if Instant::now() >= next_status {
            let summary = format!("starting: {}", snapshot.summary());
            if summary != told {
                send(&notify::status_line(&summary));
                told = summary;
            }
            next_status = Instant::now() + Duration::from_millis(500);
        }
        tokio::select! {
            _ = sigterm.recv() => break Some("SIGTERM"),
            _ = sigint.recv() => break Some("SIGINT"),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    };
    if early_stop.is_none() {
        let snapshot = registry.snapshot();
        send(&format!(
            "READY=1\n{}",
            notify::status_line(&snapshot.summary())
        ));
        tracing::info!(profile = %name, pid = me.pid, ?watchdog, ?self_watchdog, summary = %snapshot.summary(), "gateway ready");
    }

    let state_path = profile.state_file();
    let stale_after = tick_every * 3 + Duration::from_secs(1);
    let mut tick = tokio::time::interval(tick_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut dog = Watchdog::new(
        watchdog.is_some(),
        self_watchdog,
        config.max_outage,
        registry.snapshot().summary(),
    );
    let stop = if let Some(signal) = early_stop {
        Stop::Signal(signal)
    } else {
        loop {
            let event = tokio::select! {
                biased;
                _ = sigterm.recv() => Event::Signal("SIGTERM"),
                _ = sigint.recv() => Event::Signal("SIGINT"),
                Some(done) = tasks.join_next() => Event::Exited(done),
                _ = tick.tick() => Event::Tick,
            };
            let stop = match event {
                Event::Signal(signal) => Some(Stop::Signal(signal)),
                Event::Exited(Ok((adapter, AdapterExit::Fatal(reason)))) => {
                    Some(Stop::Fatal { adapter, reason })
                }
                Event::Exited(Ok((_, AdapterExit::Shutdown))) => None,
                Event::Exited(Ok((component, AdapterExit::Crashed(what)))) => Some(Stop::Restart(
                    format!("component {component} panicked: {what}"),
                )),
                // Only an abort, which the run does only once it is stopping, ends a task
                // this way: a panic was caught by `component::supervised`.
                Event::Exited(Err(e)) => Some(Stop::Restart(format!("a component ended: {e}"))),
                Event::Tick => {
                    // No await in this branch: the span is left before the next select.
                    let _watchdog = Component::Watchdog.span().entered();
                    let snapshot = registry.snapshot();
                    let state = StateFile::from_snapshot(&snapshot, &name, stale_after)
                        .with_outbox(outbound.stats())
                        .with_deliveries(outbound::cron_deliveries(&outbound, &config.cron))
                        .with_api(api.health());
                    if let Err(e) = state.write(&state_path) {
                        tracing::warn!(error = %e, "failed to write the state file");
                    }
                    let decision = dog.on_tick(&snapshot);
                    if decision.feed {
                        send("WATCHDOG=1");
                    }
                    if !decision.stale.is_empty() {
                        let (stale, summary) = (&decision.stale, &decision.summary);
                        tracing::warn!(?stale, %summary, "component stale; not feeding the watchdog");
                    }
                    if decision.send_status {
                        send(&notify::status_line(&decision.summary));
                    }
                    decision.restart.map(Stop::Restart)
                }
            };
            if let Some(stop) = stop {
                break stop;
            }
        }
    };

    let why = match &stop {
        Stop::Signal(s) => format!("stopping on {s}"),
        Stop::Fatal { adapter, reason } => format!("stopping: adapter {adapter}: {reason}"),
        Stop::Restart(r) => format!("restarting: {r}"),
    };
    // A stop nobody asked for is an error worth finding in the log (launchd's
    // `gateway.err.log`), the self-watchdog's reason above all.
    match &stop {
        Stop::Signal(_) => tracing::info!(reason = %why, "draining"),
        Stop::Fatal { .. } | Stop::Restart(_) => tracing::error!(reason = %why, "draining"),
    }
    send(&format!("STOPPING=1\n{}", notify::status_line(&why)));
    let _ = shutdown_tx.send(true);
    drain(&registry, &handles, &mut tasks, &send).await;
    syncer.abort();
    if let Err(e) = spool.sync().await {
        tracing::warn!(error = %e, "failed to sync the spool");
    }
    match stop {
        Stop::Signal(signal) => Ok(Requested(signal)),
        Stop::Fatal { adapter, reason } => Err(GatewayError::AdapterFatal { adapter, reason }),
        Stop::Restart(r) => Err(GatewayError::Restart(r)),
    }
}

/// Wait for the components to finish, up to [`DRAIN_TIMEOUT`], then abort what is left.
async fn drain(
    registry: &Registry,
    handles: &[(String, AbortHandle)],
    tasks: &mut JoinSet<(String, AdapterExit)>,
    send: impl Fn(&str),
) {
    // A stale component has made no progress past its deadline, so it will not drain either:
    // waiting for it would only hold up the restart a person or systemd asked for.
    let snapshot = registry.snapshot();
    for c in snapshot.stale() {
        if let Some((_, handle)) = handles.iter().find(|(n, _)| *n == c.name) {
            tracing::warn!(stale = %c.name, state = %c.state, "stale: not waiting for it to drain");
            handle.abort();
        }
    }
    let started = Instant::now();
    let mut extended = false;
    while !tasks.is_empty() && started.elapsed() < DRAIN_TIMEOUT {
        if !extended && started.elapsed() >= DRAIN_EXPECTED {
            send(&format!(
                "EXTEND_TIMEOUT_USEC={}",
                (DRAIN_TIMEOUT - started.elapsed()).as_micros()
            ));
            extended = true;
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), tasks.join_next()).await;
    }
    tasks.abort_all();
}

//! The gateway's run loop: one `select!` over signals and the watchdog tick.
//!
//! Start order matters and is fixed here: resolve the profile, take the instance lock, write
//! the pid file, then tell systemd `READY=1`. Adapters and the cron ticker join the loop as
//! components of the health registry; the watchdog tick feeds systemd only while they are fresh.

use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};

use crate::exit_code;
use crate::gateway::flock::{self, HeldLock, Holder, LockError};
use crate::gateway::notify::{self, Notifier};
use crate::gateway::pid_file::{PidFile, PidRecord};
use crate::profile::Profile;

/// How often to tick when systemd set no watchdog (self-watchdog and state refresh).
const DEFAULT_TICK: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("profile {profile} is already running: {}", flock::describe(.holder))]
    AlreadyRunning {
        profile: String,
        holder: Option<Holder>,
    },
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
}

impl GatewayError {
    /// Conflicts exit 78 so that `RestartPreventExitStatus=78` keeps the unit from flapping.
    pub fn exit_code(&self) -> u8 {
        match self {
            GatewayError::AlreadyRunning { .. } | GatewayError::Profile(_) => exit_code::CONFIG,
            GatewayError::Io { .. } | GatewayError::Lock(_) => exit_code::FAILURE,
        }
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> GatewayError {
    let what = what.into();
    move |source| GatewayError::Io { what, source }
}

/// Run until SIGTERM or SIGINT, then drain and return (exit 0).
pub async fn run(profile: &Profile) -> Result<(), GatewayError> {
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

    let notifier = Notifier::from_env().map_err(io("open NOTIFY_SOCKET"))?;
    let watchdog = notify::watchdog_interval();
    let mut sigterm = signal(SignalKind::terminate()).map_err(io("install SIGTERM handler"))?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(io("install SIGINT handler"))?;

    let summary = "ready; no adapters configured".to_owned();
    let send = |state: &str| {
        if let Err(e) = notifier.send(state) {
            tracing::warn!(error = %e, "failed to notify systemd");
        }
    };
    send(&format!("READY=1\n{}", notify::status_line(&summary)));
    tracing::info!(profile = %name, pid = me.pid, ?watchdog, "gateway ready");

    let mut tick = tokio::time::interval(watchdog.map_or(DEFAULT_TICK, |w| w / 2));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let signal_name = loop {
        tokio::select! {
            _ = tick.tick() => {
                if watchdog.is_some() {
                    send("WATCHDOG=1");
                }
            }
            _ = sigterm.recv() => break "SIGTERM",
            _ = sigint.recv() => break "SIGINT",
        }
    };
    tracing::info!(signal = signal_name, "stopping");
    send(&format!("STOPPING=1\n{}", notify::status_line("stopping")));
    Ok(())
}

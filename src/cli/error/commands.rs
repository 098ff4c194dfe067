//! The errors of the commands whose failures are their own (following the events, reading
//! the logs, a reload), defined below the commands so that [`super::CliError`] wraps them
//! without naming the commands, and each command returns its own.

use std::path::PathBuf;
use std::time::Duration;

use crate::api::client::ClientError;
use crate::exit_code;
use crate::gateway::spool::cursor::CursorError;
use crate::gateway::spool::SpoolError;

/// Why `events --follow` stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FollowError {
    #[error(transparent)]
    Api(#[from] ClientError),
    #[error(transparent)]
    Cursor(#[from] CursorError),
    #[error(transparent)]
    Spool(#[from] SpoolError),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum LogsError {
    #[error("failed to run journalctl (is systemd's journal installed?)")]
    Journalctl(#[source] std::io::Error),
    #[error("failed to read journalctl's output")]
    JournalctlOutput(#[source] std::io::Error),
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write to stdout")]
    Write(#[source] std::io::Error),
}

/// Why a reload did not apply.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReloadError {
    #[error("the gateway for profile {profile} is not running (no live gateway holds its lock); start it with hermes-svc start --profile {profile}")]
    NotRunning { profile: String },
    #[error("reload refused, the gateway keeps its running configuration: {reason}")]
    Refused { reason: String },
    #[error("the gateway (PID {pid}) did not answer the reload within {}; its log says why (hermes-svc logs --profile {profile})", humantime::format_duration(*.waited))]
    NoAnswer {
        pid: u32,
        profile: String,
        waited: Duration,
    },
    #[error("the gateway (PID {pid}) exited during the reload; hermes-svc status --profile {profile} says why")]
    Exited { pid: u32, profile: String },
    #[error("cannot signal the gateway (PID {pid})")]
    Signal {
        pid: u32,
        #[source]
        source: nix::errno::Errno,
    },
}

impl ReloadError {
    /// A refused configuration is a configuration error (78); the rest, a failure (1).
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            ReloadError::Refused { .. } => exit_code::CONFIG,
            _ => exit_code::FAILURE,
        }
    }
}

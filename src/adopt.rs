//! `hermes-svc adopt`: a profile that Hermes's own gateway runs, switched to hermes-svc in
//! one command, and back with `--undo`.
//!
//! Hermes's home and the profile home are one directory. After the switch the gateway holds
//! every platform a wing serves (its credentials in the profile `.env`, its settings and
//! Hermes's access rules in `gateway.toml`), and Hermes runs as the agent unit in its own home,
//! `agent/hermes`, with its memory, sessions, skills and cron, and no platform credential
//! (docs/adopt.md). The order is such that no moment has two pollers on one token: Hermes's
//! gateway is stopped before anything of it moves, and ours starts last.
//!
//! Reading and mapping are pure (`crate::hermes_home`, `mapping` through each wing's
//! `Platform::from_hermes`, `cron`, `pairing`): data in, data out. `plan` turns their result
//! into the [`switch::Switch`]; `manifest`, `state` and `switch` are the effects on files.

pub mod cron;
pub mod manifest;
pub mod mapping;
pub mod pairing;
pub mod plan;
pub mod state;
pub mod switch;

use std::path::{Path, PathBuf};

use crate::bounded_read::ReadError;
use crate::trusted_dir::TrustError;

#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: ReadError,
    },
    #[error("{path}: {source}")]
    Trust {
        path: PathBuf,
        #[source]
        source: TrustError,
    },
    #[error("{path}: {why}")]
    Record { path: PathBuf, why: String },
    /// Hermes's settings for a platform a wing serves cannot be carried over as they are:
    /// nothing was changed, and each line names the setting and the fix.
    #[error("refusing to adopt: nothing was changed\n{}", .0.join("\n"))]
    Refused(Vec<String>),
    #[error("{name} is in both {from} and {to}: a Hermes ran in the profile home again after adopt began; keep the copy you want, remove the other, and run adopt again")]
    BothHomes {
        name: String,
        from: PathBuf,
        to: PathBuf,
    },
}

impl AdoptError {
    /// A refusal is the configuration's (78, as a reload's), everything else a failure.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            AdoptError::Refused(_) => crate::exit_code::CONFIG,
            _ => crate::exit_code::FAILURE,
        }
    }

    fn io(path: &Path, source: std::io::Error) -> AdoptError {
        AdoptError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

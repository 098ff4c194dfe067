//! Why a `gateway.toml` could not be used: one error type for every section, so a caller
//! matches on one enum whatever part of the file was wrong.

use std::path::PathBuf;

use crate::bounded_read::ReadError;

/// Why a config could not be used. Every variant says which file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read, or was refused (a FIFO, a symlink, too large, someone
    /// else's): the message names the file and the fix.
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{path}:{line}: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: adapter {adapter:?}: {message}")]
    Secret {
        path: PathBuf,
        adapter: String,
        message: String,
    },
}

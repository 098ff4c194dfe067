//! The job log: every job's stdout and stderr appended to one file, between header lines of
//! our own that say which job started and how it ended.

use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use tracing::debug;

use crate::bounded_read::Owner;
use crate::trusted_dir::TrustedDir;

/// Opened for appending, so every run of every job lands in one file in order. In a `logs/`
/// only the gateway's user can change ([`TrustedDir`]), and never through a link: a job's
/// output must not land in a file someone else pointed the log at.
pub(super) fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a file's path",
        ));
    };
    TrustedDir::create(dir, Owner::SelfOrRoot)
        .and_then(|dir| dir.open_append(name, 0o600))
        .map_err(std::io::Error::other)
}

/// A line of our own in the job log, so interleaved output can be told apart.
pub(super) fn log_line(mut file: &std::fs::File, job: &str, msg: &str) {
    let now = humantime::format_rfc3339_seconds(SystemTime::now());
    if let Err(e) = writeln!(file, "[{now}] cron {job}: {msg}") {
        debug!(job = %job, error = %e, "cannot write to cron log");
    }
}

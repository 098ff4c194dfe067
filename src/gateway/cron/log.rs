//! The job log: every job's stdout and stderr appended to one file, between header lines of
//! our own that say which job started and how it ended.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::SystemTime;

use tracing::debug;

/// Opened for appending, so every run of every job lands in one file in order.
pub(super) fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}

/// A line of our own in the job log, so interleaved output can be told apart.
pub(super) fn log_line(mut file: &std::fs::File, job: &str, msg: &str) {
    let now = humantime::format_rfc3339_seconds(SystemTime::now());
    if let Err(e) = writeln!(file, "[{now}] cron {job}: {msg}") {
        debug!(job = %job, error = %e, "cannot write to cron log");
    }
}

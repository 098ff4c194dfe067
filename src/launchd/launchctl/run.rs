//! One `launchctl` call: exact argv, no shell, a deadline, and what it printed kept for the
//! error that names it.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::error::{Failure, LaunchctlError};

/// The most of each stream kept. A `print` of one service is a few KiB and of a whole domain
/// tens of KiB; past this launchctl is not saying anything a status or an error needs.
const KEEP: u64 = 256 * 1024;

/// Whether a call's stdout is read. The domain probe prints every service in the domain, and
/// only its exit status is wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stdout {
    Keep,
    Discard,
}

/// What one finished call returned.
#[derive(Debug)]
pub(super) struct Output {
    /// `None` when launchctl was killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// This call as a typed failure, with what launchctl said and a hint for the person.
    pub fn failure(&self, program: &Path, argv: &[String], hint: Option<String>) -> LaunchctlError {
        LaunchctlError::Failed(Box::new(Failure {
            program: program.to_owned(),
            argv: argv.to_vec(),
            code: self.code,
            stderr: self.stderr.clone(),
            hint,
        }))
    }
}

/// Runs `program argv...` and waits for it, at most `timeout`. A call that overruns is killed:
/// launchctl that hangs must not hang `install` with it.
pub(super) async fn call(
    program: &Path,
    argv: &[String],
    timeout: Duration,
    stdout: Stdout,
) -> Result<Output, LaunchctlError> {
    tracing::debug!(program = %program.display(), ?argv, "launchctl");
    let mut cmd = Command::new(program);
    cmd.args(argv)
        .stdin(Stdio::null())
        .stdout(match stdout {
            Stdout::Keep => Stdio::piped(),
            Stdout::Discard => Stdio::null(),
        })
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|source| LaunchctlError::Spawn {
        program: program.to_owned(),
        source,
    })?;
    let out_pipe = child.stdout.take();
    let err_pipe = child.stderr.take();
    let finished = async {
        let (out, err, status) = tokio::join!(read(out_pipe), read(err_pipe), child.wait());
        status.map(|status| Output {
            code: status.code(),
            stdout: out,
            stderr: err,
        })
    };
    match tokio::time::timeout(timeout, finished).await {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(source)) => Err(LaunchctlError::Spawn {
            program: program.to_owned(),
            source,
        }),
        // Dropping the future drops the child, and kill_on_drop ends it.
        Err(_) => Err(LaunchctlError::TimedOut {
            program: program.to_owned(),
            argv: argv.to_vec(),
            after: timeout,
        }),
    }
}

/// Reads at most [`KEEP`] bytes, then drains the rest so the child never blocks on a full pipe.
async fn read(pipe: Option<impl AsyncRead + Unpin>) -> String {
    let Some(pipe) = pipe else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut limited = pipe.take(KEEP);
    let _ = limited.read_to_end(&mut kept).await;
    let _ = tokio::io::copy(&mut limited.into_inner(), &mut tokio::io::sink()).await;
    String::from_utf8_lossy(&kept).into_owned()
}

//! What a failed `launchctl` call tells the person: the exact command (with its domain), the
//! exit status, launchctl's own words, and what to do about it.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::safe_text;

/// Why a launchctl step did not happen. Nothing here is ever answered by running the gateway
/// some other way: a job launchd does not supervise is the failure this backend exists to avoid.
#[derive(Debug, thiserror::Error)]
pub enum LaunchctlError {
    #[error("cannot run {}: {source} (launchd and launchctl exist only on macOS)", program.display())]
    Spawn {
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "`{}` did not finish within {after:?} and was stopped",
        command_line(program, argv)
    )]
    TimedOut {
        program: PathBuf,
        argv: Vec<String>,
        after: Duration,
    },
    #[error("{0}")]
    Failed(Box<Failure>),
    #[error(
        "the plist path {} is not valid UTF-8, so it cannot be passed to launchctl exactly \
         (macOS file systems store names as UTF-8; was it made on another one?)",
        path.display()
    )]
    PathNotUtf8 { path: PathBuf },
    #[error(
        "launchd still had {target} loaded {waited:?} after `launchctl bootout {target}`; \
         it may be slow to exit (see its ExitTimeOut), so check `launchctl print {target}` and \
         run the command again"
    )]
    StillLoaded { target: String, waited: Duration },
}

impl LaunchctlError {
    /// launchctl's exit status, when it ran and failed.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            LaunchctlError::Failed(f) => f.code,
            _ => None,
        }
    }

    /// What launchctl printed on stderr, when it ran and failed.
    pub fn stderr(&self) -> Option<&str> {
        match self {
            LaunchctlError::Failed(f) => Some(&f.stderr),
            _ => None,
        }
    }
}

/// One launchctl call that ran and returned non-zero.
#[derive(Debug)]
pub struct Failure {
    pub program: PathBuf,
    /// The arguments after the program, exactly as passed; the domain is among them.
    pub argv: Vec<String>,
    /// `None` when launchctl was killed by a signal.
    pub code: Option<i32>,
    pub stderr: String,
    pub hint: Option<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` failed", command_line(&self.program, &self.argv))?;
        match self.code {
            Some(code) => write!(f, " with exit status {code}")?,
            None => write!(f, ", killed by a signal")?,
        }
        let said: Vec<_> = self
            .stderr
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(safe_text::visible)
            .collect();
        if !said.is_empty() {
            write!(f, ": {}", said.join(" / "))?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// The command as a person would type it, for messages (arguments are ours: a label, a
/// domain, a path; a path with a space is quoted so it can be pasted).
pub(super) fn command_line(program: &std::path::Path, argv: &[String]) -> String {
    let mut line = program.display().to_string();
    for arg in argv {
        line.push(' ');
        if arg.contains(char::is_whitespace) {
            line.push('\'');
            line.push_str(&arg.replace('\'', r"'\''"));
            line.push('\'');
        } else {
            line.push_str(arg);
        }
    }
    safe_text::visible(&line).into_owned()
}

//! Reading `launchctl print <domain>/<label>`: state, pid, last exit and runs, and nothing
//! guessed.
//!
//! launchctl(1) warns that what `print` shows is not API and may change from one release to the
//! next. So only the few top-level fields are read, each on its own, and whatever
//! does not read exactly as expected becomes `Unknown`: a status that says "unknown" sends the
//! person to look; a status that says "stopped" for a running gateway sends them to start a
//! second one. In particular:
//!
//! - only fields directly inside the job's own `<target> = { ... }` block count. Nested blocks
//!   (`endpoints`, `resource coalition`, ...) carry their own `state = active` and `pid`
//!   lines, and `job state = exited` is a different key that also ends in `state = ...`;
//! - an output that does not start with the job's header, or is cut off before its closing
//!   brace, yields nothing at all;
//! - a key that appears twice with different values is unknown;
//! - `state = not running` with a pid is a contradiction, so the state is unknown;
//! - `last terminating signal` outranks `last exit code` (launchd prints the signal instead of
//!   the code when a signal ended the job), and a signal line that does not read is unknown
//!   rather than falling back to a code.

use std::collections::HashMap;
use std::fmt;

/// Whether launchd has the job at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Service {
    /// `launchctl print` exited 113, "Could not find service": not bootstrapped in this domain.
    NotLoaded,
    Loaded(JobStatus),
}

/// What `launchctl print` says of a loaded job. Every field can be unknown on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobStatus {
    pub state: JobState,
    /// The `state` value as printed, for a person when it is not one this code reads (launchd
    /// also prints transient states such as `xpcproxy` and `spawn scheduled`).
    pub raw_state: Option<String>,
    pub pid: Option<u32>,
    pub last_exit: LastExit,
    /// How many times launchd has started the job since it was loaded.
    pub runs: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    Running,
    NotRunning,
    /// Not printed, printed in a way not read here, or contradicted by another field.
    Unknown,
}

/// How the job's previous process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LastExit {
    /// `last exit code = (never exited)`: no process of this job has ended since it was loaded.
    NeverExited,
    /// `last exit code = 1`, or `78: EX_CONFIG` with launchd's name for a sysexits code.
    Code(i32),
    /// `last terminating signal = Terminated: 15`.
    Signal {
        number: i32,
        name: String,
    },
    Unknown,
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JobState::Running => "running",
            JobState::NotRunning => "not running",
            JobState::Unknown => "unknown",
        })
    }
}

impl fmt::Display for LastExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LastExit::NeverExited => f.write_str("never exited"),
            LastExit::Code(code) => write!(f, "exit status {code}"),
            LastExit::Signal { number, name } => write!(f, "killed by signal {number} ({name})"),
            LastExit::Unknown => f.write_str("unknown"),
        }
    }
}

impl JobStatus {
    /// Nothing known: what output that cannot be read becomes.
    pub fn unknown() -> JobStatus {
        JobStatus {
            state: JobState::Unknown,
            raw_state: None,
            pid: None,
            last_exit: LastExit::Unknown,
            runs: None,
        }
    }
}

/// Reads the stdout of a successful `launchctl print <target>` for the job `label`.
///
/// The header names the job as `gui/501/<label> = {` on current macOS and as `<label> = {` on
/// 10.10 (boxen/puppet-boxen#104); any other header means this is not the job asked about.
pub fn parse(stdout: &str, target: &str, label: &str) -> JobStatus {
    let Some(fields) = top_level_fields(stdout, target, label) else {
        return JobStatus::unknown();
    };
    let raw_state = fields.get("state").cloned().flatten();
    let pid = field(&fields, "pid").and_then(|v| v.parse::<u32>().ok().filter(|&p| p > 0));
    let mut state = match raw_state.as_deref() {
        Some("running") => JobState::Running,
        Some("not running") => JobState::NotRunning,
        _ => JobState::Unknown,
    };
    if state == JobState::NotRunning && pid.is_some() {
        state = JobState::Unknown;
    }
    let runs = field(&fields, "runs").and_then(|v| v.parse().ok());
    let last_exit = match fields.get("last terminating signal") {
        Some(signal) => signal.as_deref().map_or(LastExit::Unknown, parse_signal),
        None => field(&fields, "last exit code").map_or(LastExit::Unknown, parse_exit_code),
    };
    JobStatus {
        state,
        raw_state,
        pid,
        last_exit,
        runs,
    }
}

/// A field's value, `None` when it is missing or was printed twice differently.
fn field<'a>(fields: &'a HashMap<String, Option<String>>, key: &str) -> Option<&'a str> {
    fields.get(key)?.as_deref()
}

/// The `key = value` lines directly inside the job's block. A key seen twice with different
/// values maps to `None`. `None` overall when the block is not the job's or is not closed.
fn top_level_fields(
    stdout: &str,
    target: &str,
    label: &str,
) -> Option<HashMap<String, Option<String>>> {
    let mut lines = stdout.lines().map(str::trim).filter(|l| !l.is_empty());
    let header = lines.next()?.strip_suffix('{')?.trim_end();
    let name = header.strip_suffix('=')?.trim_end();
    if name != target && name != label {
        return None;
    }
    let mut fields: HashMap<String, Option<String>> = HashMap::new();
    let mut depth = 1usize;
    for line in lines {
        if line == "}" {
            depth -= 1;
            if depth == 0 {
                return Some(fields);
            }
            continue;
        }
        if line.ends_with('{') {
            depth += 1;
            continue;
        }
        if depth != 1 {
            continue;
        }
        let Some((key, value)) = line.split_once(" = ") else {
            continue;
        };
        let value = value.trim().to_owned();
        fields
            .entry(key.trim().to_owned())
            .and_modify(|seen| {
                if seen.as_ref() != Some(&value) {
                    *seen = None;
                }
            })
            .or_insert(Some(value));
    }
    // Cut off before the job's closing brace: the fields after the cut are missing, and a
    // missing `pid` would read as a job that is not running.
    None
}

/// `0`, `1`, `78: EX_CONFIG` or `(never exited)`.
fn parse_exit_code(value: &str) -> LastExit {
    if value == "(never exited)" {
        return LastExit::NeverExited;
    }
    let (number, name) = match value.split_once(':') {
        Some((number, name)) => (number, Some(name.trim())),
        None => (value, None),
    };
    if name.is_some_and(|n| n.is_empty() || !n.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
    {
        return LastExit::Unknown;
    }
    number.parse().map_or(LastExit::Unknown, LastExit::Code)
}

/// `Terminated: 15`, `Segmentation fault: 11`: launchd's strsignal text, then the number.
fn parse_signal(value: &str) -> LastExit {
    let Some((name, number)) = value.rsplit_once(": ") else {
        return LastExit::Unknown;
    };
    match number.parse::<i32>() {
        Ok(number) if number > 0 && !name.trim().is_empty() => LastExit::Signal {
            number,
            name: name.trim().to_owned(),
        },
        _ => LastExit::Unknown,
    }
}

#[cfg(test)]
mod tests;

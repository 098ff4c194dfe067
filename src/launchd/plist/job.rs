//! A LaunchAgent file read back: the few keys status, doctor and the sibling search judge a job by.
//!
//! Any plist in `~/Library/LaunchAgents` may be read here, ours or not (hermes-agent's own, a
//! person's), in any of the formats launchd accepts (XML, binary), so nothing is assumed: a
//! missing or mistyped key reads as absent, and only a file that is not a property list with a
//! dictionary at its root is an error.

use std::collections::BTreeMap;
use std::io::Cursor;

use plist::{Dictionary, Value};

/// Why a file could not be read as a job.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("not a property list: {0}")]
    Parse(#[from] plist::Error),
    #[error("the property list's root is not a dictionary, so it is no launchd job")]
    NotADictionary,
}

/// What a job file says, as far as hermes-svc cares.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub label: Option<String>,
    /// `Program`, else the first of `ProgramArguments` (launchd.plist(5)).
    pub program: Option<String>,
    /// `ProgramArguments` in full, the program included.
    pub arguments: Vec<String>,
    /// `EnvironmentVariables`; a value that is not a string is left out.
    pub env: BTreeMap<String, String>,
    /// `KeepAlive` as written: a boolean, or a dictionary of conditions.
    pub keep_alive: Option<Value>,
    /// `ThrottleInterval` in seconds, when written as a non-negative integer. launchd's own
    /// default (10 s) applies otherwise; doctor names the interval a respawn loop runs at.
    pub throttle_interval: Option<u64>,
    /// Every key, for checks this view does not cover.
    pub raw: Dictionary,
}

impl Job {
    pub fn parse(bytes: &[u8]) -> Result<Self, JobError> {
        let raw = Value::from_reader(Cursor::new(bytes))?
            .into_dictionary()
            .ok_or(JobError::NotADictionary)?;
        let string = |key: &str| raw.get(key).and_then(Value::as_string).map(str::to_owned);
        let arguments: Vec<String> = raw
            .get("ProgramArguments")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_string)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let env = raw
            .get("EnvironmentVariables")
            .and_then(Value::as_dictionary)
            .map(|d| {
                d.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_string()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            label: string("Label"),
            program: string("Program").or_else(|| arguments.first().cloned()),
            arguments,
            env,
            keep_alive: raw.get("KeepAlive").cloned(),
            throttle_interval: raw
                .get("ThrottleInterval")
                .and_then(Value::as_unsigned_integer),
            raw,
        })
    }

    /// Whether launchd restarts this job after it exits with `status` (0 to 255), by the rules
    /// of launchd's `job_keepalive()`: `true` always; a dictionary through `SuccessfulExit`
    /// only (the other conditions depend on the machine's state, not on the exit).
    pub fn restarts_after_exit(&self, status: u8) -> bool {
        match &self.keep_alive {
            Some(Value::Boolean(b)) => *b,
            Some(Value::Dictionary(d)) => d
                .get("SuccessfulExit")
                .and_then(Value::as_boolean)
                .is_some_and(|want_success| want_success == (status == 0)),
            _ => false,
        }
    }
}

//! `logs`: a profile's gateway log. Under systemd that is its unit's journal, read by
//! journalctl with arguments built here; under launchd, the agent's log files (`files.rs`).
//!
//! journalctl reads the journal, follows it and applies the journal's access rules (the
//! `systemd-journal` group, a user's own journal); `logs` only says which unit and which
//! entries. `--json` is journalctl's own output, untouched; the text is each entry rendered
//! with its fields (`entry.rs`), as the plain-text log reads.

mod entry;
mod files;

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use super::args::LogsArgs;
use super::error::{usage, CliError, LogsError};
use super::validate::parse_profile;
use crate::launchd::plist;
use crate::profile::Profile;
use crate::service::manager::Manager;
use crate::systemd::scope::Scope;

/// The journal field the gateway names its adapter in (logging.rs, docs/logs.md).
const ADAPTER_FIELD: &str = "HERMES_ADAPTER";

/// Which entries of which unit's journal.
#[derive(Debug, Clone, Copy)]
struct JournalQuery<'a> {
    unit: &'a str,
    scope: Scope,
    follow: bool,
    since: Option<&'a str>,
    adapter: Option<&'a str>,
}

/// journalctl's arguments for `q`, each value a word of its own (`--since=TIME`), so that no
/// value can pass for an option.
///
/// A user unit is matched with `--user-unit`, which finds its lines wherever journald keeps
/// them: in the user's own journal file, or, with volatile storage, in the system journal. A
/// system unit is `--unit`. `--adapter` is one more match, on the field every line of an
/// adapter carries; journalctl ANDs it with the unit's. The output is always JSON: printed as
/// it is for `--json`, rendered for the text.
fn journalctl_args(q: &JournalQuery<'_>) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![match q.scope {
        Scope::User => format!("--user-unit={}", q.unit).into(),
        Scope::System => format!("--unit={}", q.unit).into(),
    }];
    args.push("--output=json".into());
    if let Some(since) = q.since {
        args.push(format!("--since={since}").into());
    }
    if q.follow {
        args.push("--follow".into());
    }
    if let Some(adapter) = q.adapter {
        args.push(format!("{ADAPTER_FIELD}={adapter}").into());
    }
    args
}

pub(super) fn run(args: LogsArgs) -> Result<u8, CliError> {
    let name = parse_profile(&args.profile)?;
    if let Some(adapter) = &args.adapter {
        if !crate::config::valid_name(adapter) {
            return Err(usage(format!(
                "--adapter {adapter:?}: an adapter's name is 1-32 characters of a-z, 0-9, '-' and '_', as in gateway.toml"
            )));
        }
    }
    if args.since.as_deref().is_some_and(str::is_empty) {
        return Err(usage(
            "--since: give a time, like \"2026-12-01 09:00\", \"today\" or \"-1h\"",
        ));
    }
    let manager = Manager::current().map_err(|e| usage(e.to_string()))?;
    match manager {
        Manager::Systemd => {
            let unit = crate::profile::unit_name(&name);
            let query = JournalQuery {
                unit: &unit,
                scope: args.scope.scope(),
                follow: args.follow,
                since: args.since.as_deref(),
                adapter: args.adapter.as_deref(),
            };
            let argv = journalctl_args(&query);
            if args.json {
                return Err(exec_journalctl(argv).into());
            }
            Ok(journal_text(argv, &mut io::stdout())?)
        }
        Manager::Launchd => {
            let refuse = |flag: &str| {
                usage(format!(
                    "{flag}: launchd keeps the gateway's log as plain text files, with no journal to ask; leave {flag} out"
                ))
            };
            if args.scope.system {
                return Err(refuse("--system"));
            }
            if args.since.is_some() {
                return Err(refuse("--since"));
            }
            if args.json {
                return Err(refuse("--json"));
            }
            let profile = Profile::from_env(name).map_err(|e| usage(e.to_string()))?;
            // The gateway's own lines first (StandardErrorPath), then what it printed.
            let paths = [plist::stderr_path(&profile), plist::stdout_path(&profile)];
            let filter = files::Filter::new(args.adapter.as_deref());
            files::print(&paths, &filter, args.follow, &mut std::io::stdout())?;
            Ok(crate::exit_code::OK)
        }
    }
}

/// Become journalctl, so that its output, its exit status and a person's Ctrl-C are its own.
/// Returns only when it could not be run.
fn exec_journalctl(args: Vec<OsString>) -> LogsError {
    use std::os::unix::process::CommandExt;
    LogsError::Journalctl(Command::new("journalctl").args(args).exec())
}

/// Run journalctl and print each entry it writes as a line of text, until it ends (its exit
/// status is ours) or stdout is closed. Followed, it also ends when this process does:
/// journalctl leaves once the pipe it writes to has no reader.
fn journal_text(args: Vec<OsString>, out: &mut impl Write) -> Result<u8, LogsError> {
    let mut child = Command::new("journalctl")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(LogsError::Journalctl)?;
    let entries = BufReader::new(child.stdout.take().expect("stdout is piped"));
    let mut printed = Ok(());
    for line in entries.lines() {
        let line = line.map_err(LogsError::JournalctlOutput)?;
        // journalctl writes one object a line; anything else is not an entry.
        let Ok(serde_json::Value::Object(entry)) = serde_json::from_str(&line) else {
            continue;
        };
        printed = writeln!(out, "{}", entry::render(&entry)).and_then(|()| out.flush());
        if printed.is_err() {
            break;
        }
    }
    match printed {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            let _ = child.kill();
            let _ = child.wait();
            Err(LogsError::Write(e))
        }
        Err(_) => {
            // Whoever read us (`| head`) has seen enough.
            let _ = child.kill();
            let _ = child.wait();
            Ok(crate::exit_code::OK)
        }
        Ok(()) => {
            let status = child.wait().map_err(LogsError::Journalctl)?;
            Ok(status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(crate::exit_code::FAILURE))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(q: &JournalQuery<'_>) -> Vec<String> {
        journalctl_args(q)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    const PLAIN: JournalQuery<'static> = JournalQuery {
        unit: "hermes-gateway-coder.service",
        scope: Scope::User,
        follow: false,
        since: None,
        adapter: None,
    };

    #[test]
    fn a_user_unit_is_read_from_every_journal_the_user_may_read() {
        assert_eq!(
            words(&PLAIN),
            ["--user-unit=hermes-gateway-coder.service", "--output=json"]
        );
    }

    #[test]
    fn every_flag_becomes_one_word_and_the_adapter_a_field_match() {
        let q = JournalQuery {
            scope: Scope::System,
            follow: true,
            since: Some("-1h --no-pager"),
            adapter: Some("qq"),
            ..PLAIN
        };
        assert_eq!(
            words(&q),
            [
                "--unit=hermes-gateway-coder.service",
                "--output=json",
                "--since=-1h --no-pager",
                "--follow",
                "HERMES_ADAPTER=qq",
            ]
        );
    }
}

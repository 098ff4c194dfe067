//! How commands report: the plan a changing command carried out (text or `--json`), and an
//! error with its cause chain.

use std::error::Error;

use serde::Serialize;

use super::error::CliError;

use crate::safe_text;
use crate::service::plan::{Plan, Step};
use crate::systemd::linger::Linger;

/// How a command that changes something prints: `--dry-run` and `--json`.
#[derive(Clone, Copy)]
pub(super) struct Output {
    pub(super) dry_run: bool,
    pub(super) json: bool,
}

/// What install, set, unset and uninstall report.
#[derive(Serialize)]
struct Report<'a> {
    unit: &'a str,
    /// `user` or `system` under systemd; the domain (`gui/501`) under launchd.
    scope: &'a str,
    outcome: &'a str,
    dry_run: bool,
    steps: Vec<String>,
    notes: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    linger: Option<Linger>,
}

/// Print what `plan` changed (or, with `--dry-run`, would change), its notes, and a hint when
/// a user unit would stop at logout.
/// `steps` are the plan's steps as the manager carries them out, one line each.
pub(super) fn plan(
    plan: &Plan,
    steps: &[String],
    scope: &str,
    outcome: &str,
    out: Output,
    linger: Option<Linger>,
) {
    let Output { dry_run, json } = out;
    let r = Report {
        unit: &plan.unit,
        scope,
        outcome,
        dry_run,
        steps: steps.to_vec(),
        notes: &plan.notes,
        linger,
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).expect("report serialises")
        );
        return;
    }
    let would = if dry_run { "would be " } else { "" };
    println!("{}: {would}{outcome} ({scope} scope)", plan.unit);
    for (step, line) in plan.steps.iter().zip(steps) {
        println!("  {line}");
        if dry_run {
            if let Step::WriteFile { contents, .. } = step {
                for line in contents.lines() {
                    println!("  | {line}");
                }
            }
        }
    }
    for note in &plan.notes {
        println!("note: {note}");
    }
    if let Some(hint) = linger.and_then(|l| l.hint(&crate::systemd::linger::current_user())) {
        println!("note: {hint}");
    }
}

/// Print `err` and every cause under it, one per line.
pub(super) fn error(err: &CliError) {
    for line in error_lines(err) {
        eprintln!("{line}");
    }
}

/// An error can quote what a platform, a state file or a config said, so its control
/// characters are shown escaped.
fn error_lines(err: &CliError) -> Vec<String> {
    let shown = |e: &dyn Error| safe_text::visible(&e.to_string()).into_owned();
    let causes = std::iter::successors(err.source(), |&e| e.source());
    std::iter::once(format!("error: {}", shown(err)))
        .chain(causes.map(|c| format!("  caused by: {}", shown(c))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn an_error_shows_the_same_chain_anyhow_would_with_controls_escaped() {
        let inner: anyhow::Result<()> = Err(std::io::Error::other("disk \x1b[31mfull").into());
        let err = inner.context("cannot write").unwrap_err();
        let expected: Vec<String> = err
            .chain()
            .enumerate()
            .map(|(i, e)| {
                let shown = safe_text::visible(&e.to_string()).into_owned();
                if i == 0 {
                    format!("error: {shown}")
                } else {
                    format!("  caused by: {shown}")
                }
            })
            .collect();
        let lines = error_lines(&CliError::Demo(err));
        assert_eq!(lines, expected);
        assert_eq!(lines.len(), 2);
        assert!(!lines[1].contains('\x1b'), "{lines:?}");
    }

    #[test]
    fn a_typed_error_shows_its_sources() {
        let err = CliError::AsyncRuntime(std::io::Error::other("no fds"));
        assert_eq!(
            error_lines(&err),
            [
                "error: failed to start the async runtime",
                "  caused by: no fds"
            ]
        );
    }
}

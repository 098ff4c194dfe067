//! `doctor`: one snapshot of the world, then small pure checks over it.
//!
//! Gathering (bus calls, file reads) happens once, in [`snapshot`] (under launchd,
//! [`launchd::snapshot`]), each beside one manager-neutral look at the profile homes
//! ([`homes`]); every check in [`checks`] is a pure function of that snapshot, the checks of
//! the homes alone shared by both managers, so each finding can be unit-tested without a bus. A
//! finding names the exact command that fixes it, because a diagnosis without a remedy just
//! moves the problem to the reader. Secrets never reach a finding: only short hashes do.

pub(crate) mod checks;
pub(crate) mod fix;
pub(crate) mod homes;
pub(crate) mod launchd;
pub(crate) mod snapshot;
pub(crate) mod standing;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::ansi::{paint, Paint};
use crate::exit_code;
use crate::profile::ProfileName;
use crate::safe_text::visible;
use crate::systemd::scope::Scope;

/// How bad a finding is. Only `error` makes doctor exit 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Severity {
    Error,
    Warn,
    Info,
}

impl Severity {
    /// The word, in the colour a terminal reader scans for (red, yellow, cyan) when `colour`.
    fn label(self, colour: bool) -> String {
        let p = match self {
            Severity::Error => Paint::BoldRed,
            Severity::Warn => Paint::Yellow,
            Severity::Info => Paint::Cyan,
        };
        paint(&self.to_string(), p, colour)
    }
}

fn bold(text: &str, colour: bool) -> String {
    paint(text, Paint::Bold, colour)
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warn => "warn",
            Severity::Info => "info",
        })
    }
}

/// One problem found. The JSON shape (`id`, `severity`, `subject`, `message`, `fix`) is the
/// stable contract of docs/doctor.md.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Finding {
    /// `HSVnnn`, never reused for another meaning.
    pub(crate) id: &'static str,
    pub(crate) severity: Severity,
    /// The unit or profile the finding is about.
    pub(crate) subject: String,
    /// One sentence.
    pub(crate) message: String,
    /// The exact command that fixes it.
    pub(crate) fix: String,
    /// The profile this finding belongs to, for grouping and `--profile`; `None` for findings
    /// about the machine as a whole (a bus, linger).
    #[serde(skip)]
    pub(crate) profile: Option<ProfileName>,
    /// The units the finding is about, by scope and name (one name may exist in both
    /// scopes), so that `--fix` acts on exactly those: HSV001 names several, machine and
    /// profile findings none. Internal, like `profile`.
    #[serde(skip)]
    pub(crate) units: Vec<(Option<Scope>, String)>,
}

/// Everything doctor found, in a stable order.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Report {
    pub(crate) findings: Vec<Finding>,
}

impl Report {
    /// Keep only findings about `profile` (and machine-wide ones, which affect it too).
    pub(crate) fn narrow(&mut self, profile: &ProfileName) {
        self.findings
            .retain(|f| f.profile.as_ref().is_none_or(|p| p == profile));
    }

    /// 1 when any finding is an error, else 0.
    pub(crate) fn exit_code(&self) -> u8 {
        if self.findings.iter().any(|f| f.severity == Severity::Error) {
            exit_code::FAILURE
        } else {
            exit_code::OK
        }
    }

    /// Findings grouped by profile (machine-wide ones first), one line each plus its fix;
    /// severities and group headings in colour when `colour`. Findings quote unit names,
    /// paths, config errors and other processes' command lines, so their text goes through
    /// [`visible`]: only our own colour codes reach the terminal.
    pub(crate) fn to_text(&self, colour: bool) -> String {
        if self.findings.is_empty() {
            return "no problems found\n".to_owned();
        }
        let mut groups: BTreeMap<Option<&ProfileName>, Vec<&Finding>> = BTreeMap::new();
        for f in &self.findings {
            groups.entry(f.profile.as_ref()).or_default().push(f);
        }
        let mut out = String::new();
        for (profile, findings) in groups {
            let heading = match profile {
                Some(p) => format!("profile {p}:"),
                None => "machine:".to_owned(),
            };
            out.push_str(&bold(&heading, colour));
            out.push('\n');
            for f in findings {
                out.push_str(&format!(
                    "  {} {} {}: {}\n    fix: {}\n",
                    f.id,
                    f.severity.label(colour),
                    visible(&f.subject),
                    visible(&f.message),
                    visible(&f.fix)
                ));
            }
        }
        out
    }
}

/// Why doctor itself could not run (exit 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum DoctorError {
    #[error("nothing to check: no systemd manager answers ({bus}) and no profile home is known ({home})")]
    NothingToCheck { bus: String, home: String },
    /// Under launchd: no home directory, or launchctl that cannot be asked with no job file
    /// and no profile home on disk.
    #[error("nothing to check under launchd: {0}")]
    LaunchdBlind(String),
}

/// Gather a snapshot and run every check over it.
pub(crate) async fn run(only: Option<&ProfileName>) -> Result<Report, DoctorError> {
    let snap = snapshot::gather().await?;
    let mut report = Report {
        findings: checks::all(&snap),
    };
    if let Some(p) = only {
        report.narrow(p);
    }
    Ok(report)
}

/// What `doctor --fix` did and what is left. `--json` prints `{"fixed":[..],"findings":[..]}`.
#[derive(Debug, Serialize)]
pub(crate) struct FixOutcome {
    pub(crate) fixed: Vec<fix::Fixed>,
    #[serde(skip)]
    pub(crate) skipped: Vec<fix::Skipped>,
    #[serde(skip)]
    pub(crate) failed: Vec<String>,
    #[serde(flatten)]
    pub(crate) report: Report,
}

impl FixOutcome {
    pub(crate) fn to_text(&self, colour: bool) -> String {
        let mut out = String::new();
        if self.fixed.is_empty() {
            out.push_str("fixed nothing\n");
        }
        for f in &self.fixed {
            out.push_str(&format!(
                "fixed {} {}: {}\n",
                f.id,
                visible(&f.subject),
                visible(&f.action)
            ));
        }
        for k in &self.skipped {
            out.push_str(&format!(
                "not fixed {} {}: {}\n    by hand: {}\n",
                k.id,
                visible(&k.subject),
                visible(&k.why),
                visible(&k.manual)
            ));
        }
        out.push_str("remaining:\n");
        out.push_str(&self.report.to_text(colour));
        out
    }
}

/// `doctor --fix`: plan fixes from one snapshot's findings, apply them, then look again.
pub(crate) async fn run_fix(only: Option<&ProfileName>) -> Result<FixOutcome, DoctorError> {
    let snap = snapshot::gather().await?;
    let findings = {
        let mut r = Report {
            findings: checks::all(&snap),
        };
        if let Some(p) = only {
            r.narrow(p);
        }
        r.findings
    };
    let plan = checks::plan(&snap, &findings, crate::service::planner::now());
    apply_and_look_again(plan, run(only)).await
}

/// What `--fix` does once it has a plan, under either manager: apply it, look again, and tell
/// the person to do by hand only what is still there.
pub(crate) async fn apply_and_look_again(
    plan: fix::FixPlan,
    look: impl std::future::Future<Output = Result<Report, DoctorError>>,
) -> Result<FixOutcome, DoctorError> {
    let (fixed, failed) = fix::apply(&plan).await;
    let report = look.await?;
    let skipped = plan
        .skipped
        .into_iter()
        .filter(|k| {
            report
                .findings
                .iter()
                .any(|f| f.id == k.id && f.subject == k.subject)
        })
        .collect();
    Ok(FixOutcome {
        fixed,
        skipped,
        failed,
        report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(id: &'static str, severity: Severity, profile: Option<&str>) -> Finding {
        Finding {
            id,
            severity,
            subject: "s".into(),
            message: "m".into(),
            fix: "f".into(),
            profile: profile.map(|p| ProfileName::parse(p).unwrap()),
            units: vec![],
        }
    }

    #[test]
    fn exit_code_is_one_only_with_errors_and_json_has_five_fields() {
        let mut r = Report {
            findings: vec![finding("HSV009", Severity::Info, Some("a"))],
        };
        assert_eq!(r.exit_code(), 0);
        r.findings
            .push(finding("HSV002", Severity::Error, Some("b")));
        assert_eq!(r.exit_code(), 1);
        let json = serde_json::to_value(&r).unwrap();
        let keys: Vec<_> = json["findings"][0]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys.len(), 5, "{keys:?}");
        assert_eq!(json["findings"][1]["severity"], "error");
        r.narrow(&ProfileName::parse("a").unwrap());
        assert_eq!(r.findings.len(), 1);
        assert!(r.to_text(false).contains("profile a:"));
    }

    #[test]
    fn colour_marks_severities_and_headings_only_when_asked() {
        let r = Report {
            findings: vec![
                finding("HSV002", Severity::Error, Some("b")),
                finding("HSV011", Severity::Warn, None),
            ],
        };
        let plain = r.to_text(false);
        assert!(!plain.contains('\x1b'), "{plain}");
        assert!(plain.contains("HSV002 error s: m"), "{plain}");
        let coloured = r.to_text(true);
        assert!(
            coloured.contains("HSV002 \x1b[1;31merror\x1b[0m s: m"),
            "{coloured}"
        );
        assert!(coloured.contains("\x1b[33mwarn\x1b[0m"), "{coloured}");
        assert!(coloured.contains("\x1b[1mprofile b:\x1b[0m"), "{coloured}");
    }

    #[test]
    fn finding_text_from_outside_cannot_drive_the_terminal() {
        let mut f = finding("HSV016", Severity::Warn, Some("a"));
        f.subject = "evil\x1b]0;title\x07.service".into();
        f.message = "held by `sleep \x1b[2J\rok`".into();
        f.fix = "kill 1\u{202e}".into();
        let r = Report { findings: vec![f] };
        for colour in [false, true] {
            let text = r.to_text(colour);
            let foreign: String = text
                .replace("\x1b[33m", "")
                .replace("\x1b[1m", "")
                .replace("\x1b[0m", "");
            assert!(
                !foreign.contains(['\x1b', '\x07', '\r', '\u{202e}']),
                "{text:?}"
            );
            assert!(text.contains("evil\\x1b]0;title\\x07.service"), "{text}");
            assert!(text.contains("\\x1b[2J\\rok"), "{text}");
            assert!(text.contains("kill 1\\u{202e}"), "{text}");
        }
    }
}

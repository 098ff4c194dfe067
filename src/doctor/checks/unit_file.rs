//! Findings about a unit's definition: what its file says (restart policy, watchdog, the
//! program it runs), whether a person edited ours, and whether the manager has read it.
//! Doctor never edits a unit file, so only the reload is fixed here.

use crate::doctor::checks::{flag, rewrite_fix, scope_of, unit_finding, Check};
use crate::doctor::fix::{Action, Planner};
use crate::doctor::snapshot::{Snapshot, UnitSnap};
use crate::doctor::{Finding, Severity};
use crate::service::definition::Provenance;
use crate::systemd::unit_file::provenance;

/// Why a unit whose file is wrong is left to install.
const REWRITE: &str = "the unit file must be rewritten, and doctor never edits a unit file";

/// HSV004: anything but `Restart=always` leaves a gateway that exited cleanly (75) down.
pub(super) const RESTART: Check = Check {
    id: "HSV004",
    find: restart,
    fix: |p, f| p.skip(f, REWRITE),
};

fn restart(s: &Snapshot) -> Vec<Finding> {
    misdefined(s, RESTART.id, |u| {
        let r = u.props.restart.as_deref()?;
        (r != "always").then(|| {
            format!("Restart={r}, so a gateway that exits asking for a restart stays down.")
        })
    })
}

/// HSV005: without `Type=notify` and a watchdog, a wedged gateway is never restarted.
pub(super) const WATCHDOG: Check = Check {
    id: "HSV005",
    find: watchdog,
    fix: |p, f| p.skip(f, REWRITE),
};

fn watchdog(s: &Snapshot) -> Vec<Finding> {
    misdefined(s, WATCHDOG.id, |u| {
        let ty = u.props.service_type.as_deref()?;
        // systemd reports an unset watchdog as infinity, and both it and 0 mean none.
        let wd = match u.props.watchdog_usec.unwrap_or(0) {
            0 | u64::MAX => None,
            usec => Some(usec),
        };
        (ty != "notify" || wd.is_none()).then(|| {
            let wd = wd.map_or("off".to_owned(), |usec| format!("{}s", usec / 1_000_000));
            format!("Type={ty} with WatchdogSec={wd}, so systemd cannot tell a wedged gateway from a healthy one.")
        })
    })
}

/// HSV004 and HSV005 alike: a warning, fixed by rewriting the unit, for each unit that serves
/// a profile and whose definition `wrong` explains is wrong.
fn misdefined(
    s: &Snapshot,
    id: &'static str,
    wrong: impl Fn(&UnitSnap) -> Option<String>,
) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| u.served().is_some())
        .filter_map(|u| {
            let message = wrong(u)?;
            Some(unit_finding(id, Severity::Warn, u, message, rewrite_fix(u)))
        })
        .collect()
}

/// HSV009: our unit edited by hand. Not wrong, but install leaves it alone, so it no longer
/// gets fixes; a drop-in keeps both.
pub(super) const EDITED: Check = Check {
    id: "HSV009",
    find: edited,
    fix: |p, f| p.skip(f, "the hand edit is yours to move into a drop-in"),
};

fn edited(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| {
            u.file_text
                .as_deref()
                .is_some_and(|t| provenance(t) == Provenance::Edited)
        })
        .map(|u| {
            unit_finding(
                EDITED.id,
                Severity::Info,
                u,
                "The unit file was edited by hand, so install will not update it; move the change into a drop-in and rewrite it with install --force.".into(),
                format!("systemctl{} edit {}", flag(u), u.name),
            )
        })
        .collect()
}

/// HSV010: the file on disk is not what the manager runs.
pub(super) const RELOAD: Check = Check {
    id: "HSV010",
    find: reload,
    fix: fix_reload,
};

fn reload(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| u.props.need_daemon_reload == Some(true))
        .map(|u| {
            unit_finding(
                RELOAD.id,
                Severity::Warn,
                u,
                "The unit file changed on disk since the manager last read it.".into(),
                format!("systemctl{} daemon-reload", flag(u)),
            )
        })
        .collect()
}

/// One reload per manager, however many of its units changed.
fn fix_reload(p: &mut Planner, f: &Finding) {
    match p.units.iter().find(|u| f.units.contains(&u.key())) {
        Some(u) => {
            if p.reload(scope_of(u), f.id) {
                let action = Action::Reload { scope: scope_of(u) };
                p.fix(f, f.subject.clone(), action);
            }
        }
        None => p.skip(f, "the unit is no longer listed"),
    }
}

/// HSV014: the program ExecStart runs is gone (a moved or uninstalled binary).
pub(super) const EXEC_MISSING: Check = Check {
    id: "HSV014",
    find: exec_missing,
    fix: |p, f| p.skip(f, REWRITE),
};

fn exec_missing(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| !u.missing_exec.is_empty())
        .map(|u| {
            unit_finding(
                EXEC_MISSING.id,
                Severity::Error,
                u,
                format!(
                    "ExecStart runs {}, which does not exist.",
                    u.missing_exec.join(", ")
                ),
                rewrite_fix(u),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::checks::fixtures::*;

    #[test]
    fn hsv004_restart_not_always() {
        let mut u = ours("a");
        u.props.restart = Some("on-failure".into());
        let f = restart(&snap(vec![u], vec![]));
        assert_eq!(ids(&f), [("HSV004", Severity::Warn)]);
        assert_eq!(f[0].fix, "hermes-svc install --profile a --force");
        assert!(restart(&snap(vec![ours("a")], vec![])).is_empty());
    }

    #[test]
    fn hsv005_no_watchdog() {
        let mut u = ours("a");
        u.props.watchdog_usec = Some(0);
        assert_eq!(
            ids(&watchdog(&snap(vec![u], vec![]))),
            [("HSV005", Severity::Warn)]
        );
        // No WatchdogSec at all: systemd says infinity.
        let mut u = ours("a");
        u.props.watchdog_usec = Some(u64::MAX);
        let f = watchdog(&snap(vec![u], vec![]));
        assert_eq!(ids(&f), [("HSV005", Severity::Warn)]);
        assert!(f[0].message.contains("WatchdogSec=off"), "{}", f[0].message);
        let mut u = ours("a");
        u.props.service_type = Some("simple".into());
        assert_eq!(watchdog(&snap(vec![u], vec![])).len(), 1);
        assert!(watchdog(&snap(vec![ours("a")], vec![])).is_empty());
    }

    #[test]
    fn hsv009_edited_by_hand() {
        let mut u = ours("a");
        u.file_text = Some(rendered("a"));
        assert!(edited(&snap(vec![u.clone()], vec![])).is_empty());
        u.file_text = Some(rendered("a").replace("RestartSec=5", "RestartSec=9"));
        let f = edited(&snap(vec![u], vec![]));
        assert_eq!(ids(&f), [("HSV009", Severity::Info)]);
        assert_eq!(f[0].fix, "systemctl --user edit hermes-gateway-a.service");
    }

    #[test]
    fn hsv010_need_daemon_reload() {
        let mut u = ours("a");
        assert!(reload(&snap(vec![u.clone()], vec![])).is_empty());
        u.props.need_daemon_reload = Some(true);
        assert_eq!(
            ids(&reload(&snap(vec![u], vec![]))),
            [("HSV010", Severity::Warn)]
        );
    }

    #[test]
    fn hsv014_missing_binary_is_found() {
        let mut u = ours("a");
        assert!(exec_missing(&snap(vec![u.clone()], vec![])).is_empty());
        u.missing_exec = vec!["/usr/bin/hermes-svc".into()];
        assert_eq!(
            ids(&exec_missing(&snap(vec![u], vec![]))),
            [("HSV014", Severity::Error)]
        );
    }

    #[test]
    fn reload_for_need_daemon_reload() {
        let mut u = ours("a");
        u.props.need_daemon_reload = Some(true);
        let p = planned(&snap(vec![u], vec![]));
        assert_eq!(fix_ids(&p), [("HSV010", "reload")]);
        assert_eq!(
            p.fixes[0].action.to_string(),
            "systemctl --user daemon-reload"
        );
    }
}

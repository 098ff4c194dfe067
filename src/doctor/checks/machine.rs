//! Findings about the machine rather than a profile: a manager doctor could not read, and
//! linger, without which user units live only as long as a login.

use crate::doctor::checks::Check;
use crate::doctor::fix::Planner;
use crate::doctor::snapshot::Snapshot;
use crate::doctor::{Finding, Severity};
use crate::profile::profile_of_unit;
use crate::systemd::linger::Linger;
use crate::systemd::scope::Scope;

/// HSV000: a manager, or a unit of it, could not be read, so its checks were skipped.
pub(super) const BUS: Check = Check {
    id: "HSV000",
    find: bus,
    fix: fix_bus,
};

fn bus(s: &Snapshot) -> Vec<Finding> {
    s.bus_problems
        .iter()
        .map(|b| {
            let scope = b.scope;
            let fix = match (scope, b.denied) {
                (Scope::System, true) => "sudo hermes-svc doctor".into(),
                (Scope::User, true) => "grep -rl systemd1 /etc/dbus-1/session.d /usr/share/dbus-1/session.d   # find the policy that denies it".into(),
                (Scope::User, false) => "export XDG_RUNTIME_DIR=/run/user/$(id -u) DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/$(id -u)/bus".into(),
                // Nothing to fix: many machines (containers, user-only setups) have no system
                // manager, and they need none.
                (Scope::System, false) => {
                    "none needed unless you run system units; then check `systemctl is-system-running`".into()
                }
            };
            match &b.unit {
                None => Finding {
                    id: BUS.id,
                    // The system bus is optional (containers, user-only setups); the user bus
                    // is not.
                    severity: match scope {
                        Scope::User => Severity::Warn,
                        Scope::System => Severity::Info,
                    },
                    subject: format!("{scope} bus"),
                    message: format!("{}; {scope} units were not checked.", b.why),
                    fix,
                    profile: None,
                    units: vec![],
                },
                Some(unit) => Finding {
                    id: BUS.id,
                    severity: Severity::Warn,
                    subject: unit.clone(),
                    message: format!("{}; the unit was not checked.", b.why),
                    fix,
                    profile: profile_of_unit(unit),
                    units: vec![(Some(scope), unit.clone())],
                },
            }
        })
        .collect()
}

fn fix_bus(p: &mut Planner, f: &Finding) {
    // A missing system bus (info) is normal, not something left undone.
    if f.severity != Severity::Info {
        p.skip(f, "doctor cannot read it");
    }
}

/// HSV011: without linger, user units stop at logout and do not start at boot.
pub(super) const LINGER: Check = Check {
    id: "HSV011",
    find: linger,
    fix: |p, f| p.skip(f, "linger is a machine-wide login setting"),
};

fn linger(s: &Snapshot) -> Vec<Finding> {
    let has_user_units = s.units.iter().any(|u| u.scope == Some(Scope::User));
    if s.linger != Linger::Off || !has_user_units {
        return vec![];
    }
    vec![Finding {
        id: LINGER.id,
        severity: Severity::Warn,
        subject: s.user.clone(),
        message: "Linger is off, so user units stop at logout and do not start at boot.".into(),
        fix: format!("loginctl enable-linger {}", s.user),
        profile: None,
        units: vec![],
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::checks::fixtures::*;
    use crate::doctor::snapshot::BusProblem;

    #[test]
    fn hsv000_bus_problem_is_reported() {
        let mut s = snap(vec![], vec![]);
        assert!(bus(&s).is_empty());
        s.bus_problems.push(BusProblem {
            scope: Scope::User,
            unit: None,
            why: "no bus".into(),
            denied: false,
        });
        assert_eq!(ids(&bus(&s)), [("HSV000", Severity::Warn)]);
        assert!(bus(&s)[0].fix.starts_with("export XDG_RUNTIME_DIR="));
        // A unit the manager would not describe: named, with the policy to look at.
        s.bus_problems = vec![BusProblem {
            scope: Scope::User,
            unit: Some("hermes-gateway-a.service".into()),
            why: "systemd on the user bus denied read properties".into(),
            denied: true,
        }];
        let f = bus(&s);
        assert_eq!(ids(&f), [("HSV000", Severity::Warn)]);
        assert_eq!(f[0].subject, "hermes-gateway-a.service");
        assert_eq!(f[0].profile.as_ref().map(|p| p.as_str()), Some("a"));
        assert!(f[0].fix.contains("/etc/dbus-1/session.d"), "{f:?}");
    }

    #[test]
    fn hsv011_linger_off_with_user_units() {
        let mut s = snap(vec![ours("a")], vec![]);
        s.linger = Linger::Off;
        s.user = "bot".into();
        let f = linger(&s);
        assert_eq!(ids(&f), [("HSV011", Severity::Warn)]);
        assert_eq!(f[0].fix, "loginctl enable-linger bot");
        s.linger = Linger::Unknown;
        assert!(linger(&s).is_empty());
    }
}

//! Findings about what runs: a unit that failed or flaps, a gateway that is up but deaf or
//! runs older settings than its unit, and a gateway no unit runs. Doctor interrupts nothing
//! that runs, so only a failed unit of ours whose cause is gone is fixed here.

use crate::doctor::checks::{
    flag, is_ours, profile_finding, profile_of, scope_of, unit_finding, Check,
};
use crate::doctor::fix::{Action, Planner};
use crate::doctor::snapshot::Snapshot;
use crate::doctor::{Finding, Severity};
use crate::service::served_profile::same_home;

/// A restart count at or above this, in one unit's lifetime, is a flap loop worth a look.
pub(crate) const FLAP_RESTARTS: u32 = 3;

/// Why a gateway that runs is left running.
const INTERRUPTS: &str = "restarting a running gateway interrupts it; do it when it suits you";

/// HSV008: failed, start limit hit, or restarting over and over.
pub(super) const FAILED: Check = Check {
    id: "HSV008",
    find: failed,
    fix: fix_failed,
};

fn failed(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter_map(|u| {
            let restarts = u.props.n_restarts.unwrap_or(0);
            let failed = u.props.active_state.as_deref() == Some("failed");
            let limit = u.props.result.as_deref() == Some("start-limit-hit");
            let f = flag(u);
            let (severity, message, fix) = if failed || limit {
                let why = if limit {
                    "hit its start limit".to_owned()
                } else {
                    format!(
                        "failed (result {})",
                        u.props.result.as_deref().unwrap_or("unknown")
                    )
                };
                (
                    Severity::Error,
                    format!("The unit {why} and will not be started again on its own."),
                    format!(
                        "systemctl{f} reset-failed {n} && systemctl{f} restart {n}",
                        n = u.name
                    ),
                )
            } else if restarts >= FLAP_RESTARTS {
                (
                    Severity::Warn,
                    format!("The unit has restarted {restarts} times, a sign of a flap loop."),
                    format!("journalctl{f} -u {} -n 100", u.name),
                )
            } else {
                return None;
            };
            Some(unit_finding(FAILED.id, severity, u, message, fix))
        })
        .collect()
}

/// Reset one of our failed units when no other error of its unit or profile may be the
/// cause. A start limit is a crash loop whose cause doctor cannot see, and a flap loop (a
/// warning) is not failed yet: both are left for the journal.
fn fix_failed(p: &mut Planner, f: &Finding) {
    if f.severity != Severity::Error {
        p.skip(
            f,
            "a restart loop needs its cause found in the journal first",
        );
        return;
    }
    let unit = p.units.iter().find(|u| f.units.contains(&u.key()));
    let cause = p.findings.iter().find(|o| {
        o.severity == Severity::Error
            && o.id != f.id
            && (o.subject == f.subject || (o.profile.is_some() && o.profile == f.profile))
    });
    let limit = unit.is_some_and(|u| u.props.result.as_deref() == Some("start-limit-hit"));
    match (unit, cause) {
        (Some(_), None) if limit => p.skip(
            f,
            "it hit its start limit: a crash loop whose cause doctor cannot see is gone; read the journal first",
        ),
        (Some(u), None) if is_ours(u) => {
            if p.first_reset_of(&u.name) {
                let action = Action::ResetFailed {
                    scope: scope_of(u),
                    unit: u.name.clone(),
                };
                p.fix(f, f.subject.clone(), action);
            }
        }
        (Some(_), None) => p.skip(
            f,
            "not one of our units; reset it yourself once you know why it failed",
        ),
        (_, Some(c)) => p.skip(
            f,
            format!("its cause may still be there ({} {})", c.id, c.subject),
        ),
        (None, None) => p.skip(f, "the unit is no longer listed"),
    }
}

/// HSV013: deaf but alive: systemd says active, but the gateway's own health snapshot is
/// stale or an adapter has gone stale.
pub(super) const DEAF: Check = Check {
    id: "HSV013",
    find: deaf,
    fix: |p, f| p.skip(f, INTERRUPTS),
};

fn deaf(s: &Snapshot) -> Vec<Finding> {
    let mut out = vec![];
    for u in &s.units {
        if u.props.active_state.as_deref() != Some("active") {
            continue;
        }
        let Some(name) = profile_of(u) else { continue };
        let Some(p) = s
            .homes
            .profiles
            .iter()
            .find(|p| p.name == name && same_home(&p.hermes_home, &u.hermes_home))
        else {
            continue;
        };
        let Some(state) = &p.state else { continue };
        let stale: Vec<&str> = state
            .components
            .iter()
            .filter(|c| !c.fresh)
            .map(|c| c.name.as_str())
            .collect();
        let message = if state.is_stale(s.homes.now) {
            format!(
                "The unit is active but the gateway's health snapshot was last written at {}.",
                state.updated_at
            )
        } else if !stale.is_empty() {
            format!(
                "The unit is active but these components are stale: {}.",
                stale.join(", ")
            )
        } else {
            continue;
        };
        out.push(unit_finding(
            DEAF.id,
            Severity::Error,
            u,
            message,
            format!("systemctl{} restart {}", flag(u), u.name),
        ));
    }
    out
}

/// HSV016: a process holds the profile's instance lock, but no gateway unit doctor looked at
/// runs it: a gateway started by hand, or by a service outside the `hermes-gateway*` names.
/// Ours cannot start while it does (and, exiting 78, stays down).
pub(super) const UNMANAGED_GATEWAY: Check = Check {
    id: "HSV016",
    find: unmanaged_gateway,
    fix: |p, f| {
        p.skip(
            f,
            "doctor never kills a process; it may be someone's debugging session",
        )
    },
};

fn unmanaged_gateway(s: &Snapshot) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.homes.profiles {
        let Some(h) = &p.lock_holder else { continue };
        if h.unit
            .as_ref()
            .is_some_and(|n| s.units.iter().any(|u| &u.name == n))
        {
            continue;
        }
        let ours = s.units.iter().find(|u| {
            is_ours(u)
                && profile_of(u).as_ref() == Some(&p.name)
                && same_home(&u.hermes_home, &p.hermes_home)
        });
        let runner = match &h.unit {
            Some(unit) => format!("the service {unit}"),
            None => "no service (it was started by hand)".to_owned(),
        };
        let what = if h.cmdline.is_empty() {
            String::new()
        } else {
            format!(" ({})", h.cmdline)
        };
        let (severity, consequence, fix) = match ours {
            Some(u) => (
                Severity::Error,
                format!(", so {} cannot start", u.name),
                format!("kill {} && systemctl{} restart {}", h.pid, flag(u), u.name),
            ),
            None => (
                Severity::Warn,
                String::new(),
                format!("kill {} && hermes-svc install --profile {}", h.pid, p.name),
            ),
        };
        out.push(profile_finding(
            UNMANAGED_GATEWAY.id,
            severity,
            p,
            format!(
                "PID {}{what} holds this profile and is run by {runner}{consequence}.",
                h.pid
            ),
            fix,
        ));
    }
    out
}

/// HSV017: the running gateway started before its unit's files last changed, and the manager
/// has read them (else HSV010 says so): it runs older settings than its unit says, which is
/// what a `set` or `install` killed between reload and restart leaves behind.
pub(super) const STALE_SETTINGS: Check = Check {
    id: "HSV017",
    find: stale_settings,
    fix: |p, f| p.skip(f, INTERRUPTS),
};

fn stale_settings(s: &Snapshot) -> Vec<Finding> {
    s.units
        .iter()
        .filter(|u| u.props.is_active() && u.props.need_daemon_reload != Some(true))
        .filter_map(|u| {
            let started = u.props.inactive_exit_timestamp.filter(|t| *t > 0)?;
            let started = std::time::UNIX_EPOCH + std::time::Duration::from_micros(started);
            let changed = u.config_changed_at?;
            let behind = changed.duration_since(started).ok()?;
            Some(unit_finding(
                STALE_SETTINGS.id,
                Severity::Warn,
                u,
                format!(
                    "The gateway runs older settings than its unit: the unit's files changed {} after it started.",
                    crate::gateway::health::short(behind)
                ),
                format!("systemctl{} restart {}", flag(u), u.name),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::checks::fixtures::*;
    use crate::gateway::state_file::{ComponentState, StateFile};
    use std::time::{Duration, SystemTime};

    #[test]
    fn hsv008_failed_limit_or_flapping() {
        let mut u = ours("a");
        u.props.active_state = Some("failed".into());
        u.props.result = Some("exit-code".into());
        assert_eq!(
            ids(&failed(&snap(vec![u], vec![]))),
            [("HSV008", Severity::Error)]
        );
        let mut u = ours("a");
        u.props.n_restarts = Some(FLAP_RESTARTS);
        assert_eq!(
            ids(&failed(&snap(vec![u], vec![]))),
            [("HSV008", Severity::Warn)]
        );
        let mut u = ours("a");
        u.props.n_restarts = Some(FLAP_RESTARTS - 1);
        assert!(failed(&snap(vec![u], vec![])).is_empty());
    }

    fn state(updated: SystemTime, fresh: bool) -> StateFile {
        StateFile {
            updated_at: humantime::format_rfc3339_millis(updated).to_string(),
            pid: 4242,
            profile: "a".into(),
            stale_after_ms: 10_000,
            summary: "ok".into(),
            components: vec![ComponentState {
                name: "qq".into(),
                kind: "websocket".into(),
                state: "connected".into(),
                fresh,
                last_beat_age_ms: 0,
                deadline_ms: 0,
                reconnects: 0,
                attempts: 0,
                last_error: None,
                outage_ms: None,
            }],
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: None,
        }
    }

    #[test]
    fn hsv013_deaf_but_alive() {
        let now = SystemTime::now();
        let mut p = profile("a");
        p.state = Some(state(now, true));
        let mut s = snap(vec![ours("a")], vec![p.clone()]);
        s.homes.now = now;
        assert!(deaf(&s).is_empty());
        s.homes.profiles[0].state = Some(state(now - Duration::from_secs(60), true));
        assert_eq!(ids(&deaf(&s)), [("HSV013", Severity::Error)]);
        s.homes.profiles[0].state = Some(state(now, false));
        assert!(deaf(&s)[0].message.contains("qq"));
        // Near miss: an inactive unit's old snapshot says nothing.
        s.units[0].props.active_state = Some("inactive".into());
        assert!(deaf(&s).is_empty());
    }

    #[test]
    fn hsv016_a_gateway_no_unit_runs() {
        use crate::doctor::homes::LockHolder;
        let mut a = profile("a");
        let mut ours_a = ours("a");
        ours_a.props.active_state = Some("failed".into());
        a.lock_holder = Some(LockHolder {
            pid: 4242,
            cmdline: "hermes-svc gateway run --profile a".into(),
            unit: None,
        });
        let f = unmanaged_gateway(&snap(vec![ours_a.clone()], vec![a.clone()]));
        assert_eq!(ids(&f), [("HSV016", Severity::Error)]);
        assert!(f[0].message.contains("started by hand"), "{f:?}");
        assert_eq!(
            f[0].fix,
            "kill 4242 && systemctl --user restart hermes-gateway-a.service"
        );
        // Without a unit of ours it is only a warning, and the fix installs one.
        let f = unmanaged_gateway(&snap(vec![], vec![a.clone()]));
        assert_eq!(ids(&f), [("HSV016", Severity::Warn)]);
        assert_eq!(f[0].fix, "kill 4242 && hermes-svc install --profile a");
        // A service outside our names runs it: named.
        a.lock_holder.as_mut().unwrap().unit = Some("mybot.service".into());
        let f = unmanaged_gateway(&snap(vec![ours_a.clone()], vec![a.clone()]));
        assert!(f[0].message.contains("the service mybot.service"), "{f:?}");
        // Near miss: the holder is in our unit's cgroup.
        a.lock_holder.as_mut().unwrap().unit = Some("hermes-gateway-a.service".into());
        assert!(unmanaged_gateway(&snap(vec![ours("a")], vec![a])).is_empty());
    }

    #[test]
    fn reset_failed_only_for_our_units_once_the_cause_is_gone() {
        let mut u = ours("a");
        u.props.active_state = Some("failed".into());
        u.props.result = Some("exit-code".into());
        let p = planned(&snap(vec![u.clone()], vec![]));
        assert_eq!(fix_ids(&p), [("HSV008", "reset-failed")]);
        // The cause is still there: a broken config.
        let mut a = profile("a");
        a.config_error = Some("gateway.toml:1: bad".into());
        let p = planned(&snap(vec![u.clone()], vec![a]));
        assert!(p.fixes.is_empty(), "{p:?}");
        // A start limit: a crash loop, so the cause cannot be known to be gone.
        let mut hit = u.clone();
        hit.props.result = Some("start-limit-hit".into());
        let p = planned(&snap(vec![hit], vec![]));
        assert!(p.fixes.is_empty(), "{p:?}");
        assert!(p.skipped.iter().any(|k| k.why.contains("start limit")));
        // Not ours.
        let mut l = unit("hermes.service", "/usr/bin/hermes gateway run --profile a");
        l.props.active_state = Some("failed".into());
        let p = planned(&snap(vec![l], vec![]));
        assert!(p.fixes.is_empty(), "{p:?}");
        assert!(p.skipped.iter().any(|k| k.id == "HSV008"));
    }
}

//! A reload the running gateway refused: its configuration is then not `gateway.toml`'s, and
//! whoever edited the file may believe it applied. Read from the profile homes alone (the
//! state file), so launchd's doctor runs it too.

use crate::doctor::checks::{profile_finding, Check};
use crate::doctor::homes::Homes;
use crate::doctor::{Finding, Severity};
use crate::gateway::state_file::ReloadOutcome;

/// HSV032: the running gateway's last reload was refused.
pub(crate) const RELOAD_REFUSED: Check<Homes> = Check {
    id: "HSV032",
    find: reload_refused,
    fix: |p, f| {
        p.skip(
            f,
            "only a person can fix gateway.toml, or choose to restart",
        )
    },
};

fn reload_refused(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        // A stale file is a gateway that no longer runs: its refusal no longer matters.
        let Some(state) = p.state.as_ref().filter(|st| !st.is_stale(s.now)) else {
            continue;
        };
        let Some(reload) = state.reload.as_ref() else {
            continue;
        };
        if reload.outcome != ReloadOutcome::Refused {
            continue;
        }
        out.push(profile_finding(
            RELOAD_REFUSED.id,
            Severity::Warn,
            p,
            format!(
                "The gateway refused its last reload (#{} at {}), so it still runs the \
                 configuration it had before: {}",
                reload.generation,
                crate::safe_text::visible(&reload.at),
                crate::safe_text::visible(&reload.reason)
            ),
            format!(
                "fix {} as the reason says and run hermes-svc reload --profile {}, or apply it \
                 with hermes-svc restart --profile {}",
                p.config_path.display(),
                p.name,
                p.name
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::doctor::checks::fixtures::*;
    use crate::gateway::state_file::{ReloadRecord, StateFile};

    fn with_reload(outcome: ReloadOutcome) -> Homes {
        let mut p = profile("coder");
        let now = SystemTime::now();
        p.state = Some(StateFile {
            updated_at: humantime::format_rfc3339_millis(now).to_string(),
            pid: 4242,
            profile: "coder".into(),
            stale_after_ms: 10_000,
            summary: "1/1 adapters ready".into(),
            components: vec![],
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: Some(ReloadRecord {
                generation: 3,
                began_monotonic_usec: 1,
                at: "2026-12-06T12:00:00.000Z".into(),
                outcome,
                reason: "/h/gateway.toml:4: expected `=`".into(),
            }),
        });
        let mut s = homes(&[], vec![p]);
        s.now = now;
        s
    }

    #[test]
    fn a_refused_reload_is_found_and_an_applied_one_is_not() {
        let found = reload_refused(&with_reload(ReloadOutcome::Refused));
        assert_eq!(found.len(), 1);
        assert!(
            found[0].message.contains("gateway.toml:4"),
            "{}",
            found[0].message
        );
        assert!(reload_refused(&with_reload(ReloadOutcome::Applied)).is_empty());
    }
}

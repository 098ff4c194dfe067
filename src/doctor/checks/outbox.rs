//! Findings about the gateway's sending half, from its own state file: an outbox it could not
//! open. The gateway then runs and receives, and its manager sees a healthy service, but
//! nothing it is asked to send goes out. A restart alone repeats the failure, so the fix
//! moves the bad journal aside first. Like the bot's standing, this does not depend on the
//! manager, and launchd's doctor runs it too.

use crate::doctor::checks::{profile_finding, Check};
use crate::doctor::homes::Homes;
use crate::doctor::{Finding, Severity};

/// HSV022: the running gateway could not open its outbox.
pub(crate) const OUTBOX_UNAVAILABLE: Check<Homes> = Check {
    id: "HSV022",
    find: outbox_unavailable,
    fix: |p, f| {
        p.skip(
            f,
            "the journal may hold messages still to send: a person should look at it before it is moved aside",
        )
    },
};

fn outbox_unavailable(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        let Some(state) = &p.state else { continue };
        if state.is_stale(s.now) {
            continue;
        }
        let Some(why) = state.outbox.as_ref().and_then(|o| o.unavailable.as_deref()) else {
            continue;
        };
        let journal = p.outbox_journal.display();
        out.push(profile_finding(
            OUTBOX_UNAVAILABLE.id,
            Severity::Error,
            p,
            format!(
                "The gateway receives, but it could not open its outbox, so nothing it is asked to send goes out: {why}"
            ),
            format!(
                "mv {journal} {journal}.bad && hermes-svc restart --profile {}",
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
    use crate::gateway::outbox::Stats;
    use crate::gateway::state_file::StateFile;

    fn with_outbox(stats: Stats, updated: SystemTime) -> Homes {
        let mut p = profile("coder");
        p.state = Some(StateFile {
            updated_at: humantime::format_rfc3339_millis(updated).to_string(),
            pid: 4242,
            profile: "coder".into(),
            stale_after_ms: 10_000,
            summary: "0/0 adapters ready".into(),
            components: vec![],
            outbox: Some(stats),
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: None,
        });
        let mut s = homes(&[], vec![p]);
        s.now = SystemTime::now();
        s
    }

    #[test]
    fn hsv022_an_outbox_the_running_gateway_could_not_open() {
        let now = SystemTime::now();
        let bad = Stats::unavailable("journal.jsonl is a symbolic link".into());
        let f = outbox_unavailable(&with_outbox(bad.clone(), now));
        assert_eq!(ids(&f), [("HSV022", Severity::Error)]);
        assert!(f[0].message.contains("symbolic link"), "{f:?}");
        assert_eq!(
            f[0].fix,
            "mv /nonexistent-doctor/.hermes/profiles/coder/outbox/journal.jsonl \
             /nonexistent-doctor/.hermes/profiles/coder/outbox/journal.jsonl.bad && hermes-svc restart \
             --profile coder"
        );
        // A healthy outbox, or a gateway that no longer runs, says nothing.
        assert!(outbox_unavailable(&with_outbox(Stats::default(), now)).is_empty());
        let gone = now - std::time::Duration::from_secs(3600);
        assert!(outbox_unavailable(&with_outbox(bad, gone)).is_empty());
    }
}

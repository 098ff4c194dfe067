//! Findings about a profile's cluster (`[cluster]`, docs/cluster.md), from the gateway's state
//! file: a gateway that cannot reach etcd is a healthy standby to its manager (it waits rather
//! than flapping), so nothing else says that the bot has no active anywhere this host can see.
//! Like the outbox's, this does not depend on the manager, and launchd's doctor runs it too.

use crate::doctor::checks::{profile_finding, Check};
use crate::doctor::homes::Homes;
use crate::doctor::{Finding, Severity};

/// HSV025: the gateway cannot reach its etcd cluster, or the cluster has no quorum.
pub(crate) const CLUSTER_UNREACHABLE: Check<Homes> = Check {
    id: "HSV025",
    find: cluster_unreachable,
    fix: |p, f| {
        p.skip(
            f,
            "etcd is a service of its own: bring its members back, or fix the endpoints",
        )
    },
};

fn cluster_unreachable(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        let Some(state) = &p.state else { continue };
        if state.is_stale(s.now) {
            continue;
        }
        let Some(cluster) = &state.cluster else {
            continue;
        };
        if cluster.role != "standby" || cluster.active.is_some() {
            continue;
        }
        let why = cluster.standing.as_deref().unwrap_or("no answer");
        out.push(profile_finding(
            CLUSTER_UNREACHABLE.id,
            Severity::Error,
            p,
            format!(
                "The gateway on node {} cannot reach its etcd cluster, so it cannot tell whether \
                 the bot is active anywhere: {why}",
                crate::safe_text::visible(&cluster.node)
            ),
            "check that a majority of etcd's members is up and reachable from this host (the \
             endpoints, TLS files and firewall in [cluster], docs/cluster.md); the gateway takes \
             over by itself once etcd answers"
                .into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::doctor::checks::fixtures::*;
    use crate::gateway::state_file::{ClusterHealth, StateFile};

    fn with_cluster(active: Option<&str>) -> Homes {
        let now = SystemTime::now();
        let mut p = profile("coder");
        p.state = Some(StateFile {
            updated_at: humantime::format_rfc3339_millis(now).to_string(),
            pid: 4242,
            profile: "coder".into(),
            stale_after_ms: 10_000,
            summary: "standby".into(),
            components: vec![],
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            cluster: Some(ClusterHealth {
                role: "standby".into(),
                node: "laptop".into(),
                active: active.map(str::to_owned),
                lease_age_ms: None,
                lease_ttl_ms: 10_000,
                standing: Some(match active {
                    Some(a) => format!("standby (active: {a})"),
                    None => "standby (campaigning: etcd at https://e1:2379: timed out)".into(),
                }),
            }),
        });
        let mut s = homes(&[], vec![p]);
        s.now = now + Duration::from_millis(10);
        s
    }

    #[test]
    fn a_standby_that_cannot_reach_etcd_is_an_error_and_one_that_can_is_nothing() {
        let found = cluster_unreachable(&with_cluster(None));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Error);
        assert!(
            found[0].message.contains("node laptop")
                && found[0]
                    .message
                    .contains("etcd at https://e1:2379: timed out"),
            "{}",
            found[0].message
        );
        assert!(
            cluster_unreachable(&with_cluster(Some("server-1 since 2026-12-03T09:00:00Z")))
                .is_empty()
        );
    }
}

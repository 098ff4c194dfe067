//! Findings about a profile's cluster (`[cluster]`, docs/cluster.md), from the gateway's state
//! file: a gateway that cannot reach etcd is a healthy standby to its manager (it waits rather
//! than flapping), so nothing else says that the bot has no active anywhere this host can see;
//! and two machines with one node name make every status and log line about the active
//! ambiguous. Like the outbox's, these do not depend on the manager, and launchd's doctor runs
//! them too.

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

/// HSV026: the active is another machine that goes by this host's node name.
pub(crate) const NODE_NAME_CLASH: Check<Homes> = Check {
    id: "HSV026",
    find: node_name_clash,
    fix: |p, f| {
        p.skip(
            f,
            "a node's name is a person's choice: give each host its own in [cluster] node",
        )
    },
};

fn node_name_clash(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        let Some(state) = &p.state else { continue };
        let Some(cluster) = state.cluster.as_ref().filter(|c| c.name_clash) else {
            continue;
        };
        if state.is_stale(s.now) {
            continue;
        }
        let node = crate::safe_text::visible(&cluster.node);
        out.push(profile_finding(
            NODE_NAME_CLASH.id,
            Severity::Warn,
            p,
            format!(
                "Another machine in the profile's cluster goes by this host's node name, {node}, \
                 and is active ({}): status, logs and doctor cannot tell the two apart",
                crate::safe_text::visible(cluster.active.as_deref().unwrap_or("?"))
            ),
            "give each host its own name: node = \"NAME\" in [cluster] of gateway.toml \
             (docs/cluster.md), then restart this host's gateway"
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
                name_clash: false,
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

    #[test]
    fn a_name_clash_is_a_warning_naming_the_node() {
        let mut s = with_cluster(Some("laptop since 2026-12-03T09:00:00Z"));
        assert!(node_name_clash(&s).is_empty());
        if let Some(c) = s.profiles[0]
            .state
            .as_mut()
            .and_then(|st| st.cluster.as_mut())
        {
            c.name_clash = true;
        }
        let found = node_name_clash(&s);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Warn);
        assert!(
            found[0].message.contains("node name, laptop"),
            "{}",
            found[0].message
        );
    }
}

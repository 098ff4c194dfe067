//! Findings about a profile's cluster (`[cluster]`, docs/cluster.md), from the gateway's state
//! file: a gateway that cannot reach etcd is a healthy standby to its manager (it waits rather
//! than flapping), so nothing else says that the bot has no active anywhere this host can see;
//! two machines with one node name make every status and log line about the active
//! ambiguous; and a member whose wall clock is off makes every time it shows misleading. Like
//! the outbox's, these do not depend on the manager, and launchd's doctor runs them too.

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

/// HSV028: this profile's gateway ran in a cluster, and its gateway.toml has no `[cluster]`
/// now: it would run the bot beside the cluster's active.
pub(crate) const LEFT_THE_CLUSTER: Check<Homes> = Check {
    id: "HSV028",
    find: left_the_cluster,
    fix: |p, f| {
        p.skip(
            f,
            "whether the profile stays in its cluster is a person's choice: restore [cluster], \
             or remove the note",
        )
    },
};

fn left_the_cluster(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        let (Some(false), Some(was)) = (p.clustered, &p.membership) else {
            continue;
        };
        let note = p.home.join("state/cluster.json");
        out.push(profile_finding(
            LEFT_THE_CLUSTER.id,
            Severity::Warn,
            p,
            format!(
                "The profile's gateway ran in an etcd cluster ({}) as node {} (last started \
                 {}), and {} has no [cluster] now: if the profile's other hosts still run it \
                 there, this host's gateway runs the bot beside their active",
                crate::safe_text::visible(&was.endpoints.join(", ")),
                crate::safe_text::visible(&was.node),
                crate::safe_text::visible(&was.since),
                p.config_path.display(),
            ),
            format!(
                "add the same [cluster] table as on the other hosts back to gateway.toml \
                 (docs/cluster.md); or, once the profile has left the cluster on every host, \
                 remove {}",
                note.display()
            ),
        ));
    }
    out
}

/// HSV027: another member's wall clock is off from this host's by more than [`skew_limit`].
pub(crate) const CLOCK_SKEW: Check<Homes> = Check {
    id: "HSV027",
    find: clock_skew,
    fix: |p, f| {
        p.skip(
            f,
            "a host's time service is its own: set up NTP (systemd-timesyncd or chrony) there",
        )
    },
};

/// The skew worth a warning: a tenth of the lease, and never under a second. Fencing does not
/// read wall clocks, but a skew this size puts the times in logs and `status` of two hosts
/// in the wrong order around a failover.
fn skew_limit(lease_ttl_ms: u64) -> u64 {
    (lease_ttl_ms / 10).max(1_000)
}

fn clock_skew(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        let Some(state) = &p.state else { continue };
        let Some(cluster) = &state.cluster else {
            continue;
        };
        if state.is_stale(s.now) {
            continue;
        }
        let limit = skew_limit(cluster.lease_ttl_ms);
        for peer in &cluster.peers {
            let Some(skew) = peer.skew_ms.filter(|s| s.unsigned_abs() > limit) else {
                continue;
            };
            let way = if skew > 0 { "ahead of" } else { "behind" };
            out.push(profile_finding(
                CLOCK_SKEW.id,
                Severity::Warn,
                p,
                format!(
                    "The clock on node {} is {:.1}s {way} this host's ({}), more than {:.1}s:                      times in logs and status across the cluster disagree",
                    crate::safe_text::visible(&peer.node),
                    skew.unsigned_abs() as f64 / 1e3,
                    crate::safe_text::visible(&cluster.node),
                    limit as f64 / 1e3,
                ),
                "run a time service on every node (systemd-timesyncd or chrony) and check                  `timedatectl` on both hosts; the gateway measures again at every record"
                    .into(),
            ));
        }
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
            access: None,
            cluster: Some(ClusterHealth {
                role: "standby".into(),
                node: "laptop".into(),
                active: active.map(str::to_owned),
                lease_age_ms: None,
                lease_ttl_ms: 10_000,
                name_clash: false,
                peers: vec![],
                standing: Some(match active {
                    Some(a) => format!("standby (active: {a})"),
                    None => "standby (campaigning: etcd at https://e1:2379: timed out)".into(),
                }),
            }),
            reload: None,
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
    fn a_skewed_peer_is_a_warning_naming_it_and_a_close_one_is_nothing() {
        use crate::gateway::state_file::PeerHealth;
        let mut s = with_cluster(Some("server-1 since 2026-12-03T09:00:00Z"));
        let peer = |node: &str, skew_ms| PeerHealth {
            node: node.into(),
            machine: "abc".into(),
            skew_ms,
        };
        if let Some(c) = s.profiles[0]
            .state
            .as_mut()
            .and_then(|st| st.cluster.as_mut())
        {
            c.peers = vec![
                peer("server-1", Some(-2_500)),
                peer("server-2", Some(300)),
                peer("server-3", None),
            ];
        }
        let found = clock_skew(&s);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].severity, Severity::Warn);
        assert!(
            found[0]
                .message
                .contains("node server-1 is 2.5s behind this host's (laptop)"),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn a_profile_that_left_its_cluster_is_a_warning_until_the_note_goes() {
        let mut s = with_cluster(None);
        let p = &mut s.profiles[0];
        p.membership = Some(crate::cluster::Membership {
            endpoints: vec!["https://e1:2379".into()],
            node: "laptop".into(),
            since: "2026-12-03T09:00:00Z".into(),
        });
        p.clustered = Some(true);
        assert!(left_the_cluster(&s).is_empty());
        s.profiles[0].clustered = Some(false);
        let found = left_the_cluster(&s);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Warn);
        assert!(
            found[0]
                .message
                .contains("(https://e1:2379) as node laptop"),
            "{}",
            found[0].message
        );
        assert!(
            found[0].fix.contains("state/cluster.json"),
            "{}",
            found[0].fix
        );
        s.profiles[0].membership = None;
        assert!(left_the_cluster(&s).is_empty());
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

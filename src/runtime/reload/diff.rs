//! What a reload changes, adapter by adapter, and what it cannot apply: decided from the
//! running configuration and the new one alone, so the rules are tested without a process.
//!
//! An adapter is changed when its own `[[adapter]]` table (other than its access rules, which
//! the access gate takes without a reconnect) or its credential changed; the rest are left
//! alone, connection and session included.

use crate::config::Secret;
use crate::platform::{AdapterSpec, GatewayConfig};

/// Each adapter with its credentials.
pub(in crate::runtime) type Adapters = [(AdapterSpec, Vec<Secret>)];

/// Each adapter's name and credential identity, as the token locks take them.
pub(in crate::runtime) type Identities = [(String, String)];

/// The adapters a reload starts, stops and restarts, by name, in the new file's order.
#[derive(Debug, Default, PartialEq, Eq)]
pub(in crate::runtime) struct Diff {
    pub(in crate::runtime) added: Vec<String>,
    pub(in crate::runtime) removed: Vec<String>,
    /// Restarted: their own table changed.
    pub(in crate::runtime) table: Vec<String>,
    /// Restarted: only their credential changed.
    pub(in crate::runtime) credential: Vec<String>,
}

impl Diff {
    pub(in crate::runtime) fn of(old: &Adapters, new: &Adapters) -> Diff {
        let mut diff = Diff::default();
        for (spec, secrets) in new {
            match old.iter().find(|(s, _)| s.name == spec.name) {
                None => diff.added.push(spec.name.clone()),
                Some((old_spec, old_secrets)) => {
                    let mut own = spec.clone();
                    own.access = old_spec.access.clone();
                    if own != *old_spec {
                        diff.table.push(spec.name.clone());
                    } else if secrets != old_secrets {
                        diff.credential.push(spec.name.clone());
                    }
                }
            }
        }
        diff.removed = old
            .iter()
            .filter(|(s, _)| !new.iter().any(|(n, _)| n.name == s.name))
            .map(|(s, _)| s.name.clone())
            .collect();
        diff
    }

    /// The adapters stopped and started again.
    pub(in crate::runtime) fn restarted(&self) -> impl Iterator<Item = &String> {
        self.table.iter().chain(&self.credential)
    }

    /// What it did, in words, for the reload's record.
    pub(in crate::runtime) fn describe(&self) -> Vec<String> {
        let mut said = vec![];
        let mut say = |names: &[String], what: &str| {
            if !names.is_empty() {
                said.push(format!("adapter {} {what}", names.join(", ")));
            }
        };
        say(&self.added, "started");
        say(&self.removed, "stopped");
        say(&self.table, "restarted (its table changed)");
        say(&self.credential, "restarted (its credential changed)");
        said
    }
}

/// What in `new` this run cannot take without a restart, each in words naming it and why;
/// empty when a reload applies all of it. `ids` are each adapter's credential identity, old
/// and new; `cluster` whether the run holds (or waits for) a term in etcd.
pub(in crate::runtime) fn refusals(
    old: &GatewayConfig,
    new: &GatewayConfig,
    ids: (&Identities, &Identities),
    cluster: bool,
) -> Vec<String> {
    let mut what = vec![];
    if old.max_outage != new.max_outage || old.self_watchdog != new.self_watchdog {
        what.push(
            "[gateway] changed: it holds the run's own supervision (max-outage, the \
             self-watchdog), which is fixed for the run so that a reload never changes the \
             rules that restart a gateway already failing them"
                .to_owned(),
        );
    }
    // A changed [cluster] is taken by the run's ownership (`Ownership::reconfigure`); one
    // added or removed would change what owns the run.
    if old.cluster.is_some() != new.cluster.is_some() {
        let how = if new.cluster.is_some() {
            "added: this run owns its profile on this machine alone, and would have to stand \
             by and campaign before it acts"
        } else {
            "removed: this run holds its profile's keys in etcd, which a standby waits on"
        };
        what.push(format!("[cluster] {how}"));
    }
    // A changed [agent] starts the link again (`agent.rs`); one added or removed would change
    // what the run set up around it: the media store, and answers to strangers.
    if old.agent.is_some() != new.agent.is_some() {
        let how = if new.agent.is_some() {
            "added"
        } else {
            "removed"
        };
        what.push(format!(
            "[agent] {how}: the run's media store and its answers to strangers are set up by \
             whether it has an agent"
        ));
    }
    let (old_ids, new_ids) = ids;
    let same_set = old_ids.len() == new_ids.len()
        && old_ids
            .iter()
            .all(|(_, id)| new_ids.iter().any(|(_, n)| n == id));
    if cluster && !same_set {
        what.push(
            "the adapters' credentials changed: in a cluster the term claims each one in etcd, \
             and a reload does not change a held term's claims"
                .to_owned(),
        );
    }
    what
}

/// Whether the access rules of `a` and `b` are the same: `[access]` and every adapter's own.
pub(in crate::runtime) fn same_access(a: &GatewayConfig, b: &GatewayConfig) -> bool {
    a.access == b.access
        && a.adapters.len() == b.adapters.len()
        && a.adapters
            .iter()
            .zip(&b.adapters)
            .all(|(x, y)| x.name == y.name && x.access == y.access)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapters(toml: &str) -> (GatewayConfig, Vec<(AdapterSpec, Vec<Secret>)>) {
        let config: GatewayConfig =
            crate::config::parse(std::path::Path::new("/g.toml"), toml).unwrap();
        let adapters = config
            .adapters
            .iter()
            .map(|a| (a.clone(), vec![Secret::new(format!("t-{}", a.name))]))
            .collect();
        (config, adapters)
    }

    fn tg(name: &str) -> String {
        format!("[[adapter]]\nname = \"{name}\"\nkind = \"telegram\"\ntoken-env = \"T\"\n")
    }

    fn ids(a: &Adapters) -> Vec<(String, String)> {
        a.iter()
            .map(|(s, k)| (s.name.clone(), s.identity(k)))
            .collect()
    }

    #[test]
    fn each_adapter_is_added_removed_restarted_or_left_alone() {
        let (_, old) = adapters(&format!("{}{}{}", tg("a"), tg("b"), tg("c")));
        let b_timing = tg("b").replace("token-env", "backoff-max = \"5s\"\ntoken-env");
        let b_access = format!("{}[adapter.access]\nallow-users = [\"7\"]\n", tg("a"));
        let (_, mut new) = adapters(&format!("{b_access}{b_timing}{}", tg("d")));
        assert_eq!(
            Diff::of(&old, &new),
            Diff {
                added: vec!["d".into()],
                removed: vec!["c".into()],
                table: vec!["b".into()],
                credential: vec![],
            },
            "a's access rules alone restart nothing"
        );
        new[0].1 = vec![Secret::new("renewed".into())];
        let diff = Diff::of(&old, &new);
        assert_eq!(diff.credential, vec!["a".to_string()]);
        assert_eq!(
            diff.describe(),
            [
                "adapter d started",
                "adapter c stopped",
                "adapter b restarted (its table changed)",
                "adapter a restarted (its credential changed)"
            ]
        );
    }

    #[test]
    fn gateway_cluster_agent_and_a_clusters_credentials_are_refused_with_why() {
        let (old, old_a) = adapters(&tg("a"));
        let (new, new_a) = adapters(&format!("{}{}", tg("a"), tg("b")));
        let (o, n) = (ids(&old_a), ids(&new_a));
        assert!(refusals(&old, &new, (&o, &n), false).is_empty());
        let what = refusals(&old, &new, (&o, &n), true);
        assert_eq!(what.len(), 1, "{what:?}");
        assert!(what[0].contains("in a cluster"), "{what:?}");
        let (max, _) = adapters(&format!("[gateway]\nmax-outage = \"1h\"\n\n{}", tg("a")));
        let what = refusals(&old, &max, (&o, &o), false);
        assert!(what[0].starts_with("[gateway] changed"), "{what:?}");
        let relay = |port: u16| format!("[agent]\nkind = \"hermes-relay\"\nport = {port}\n\n");
        let (agent, _) = adapters(&format!("{}{}", relay(9120), tg("a")));
        let (moved, _) = adapters(&format!("{}{}", relay(9121), tg("a")));
        assert!(
            refusals(&agent, &moved, (&o, &o), false).is_empty(),
            "a changed [agent] applies"
        );
        let what = refusals(&old, &agent, (&o, &o), false);
        assert!(what[0].starts_with("[agent] added"), "{what:?}");
        let what = refusals(&agent, &old, (&o, &o), false);
        assert!(what[0].starts_with("[agent] removed"), "{what:?}");
        let cluster = |node: &str| {
            format!("[cluster]\nendpoints = [\"http://127.0.0.1:2379\"]\nnode = \"{node}\"\n\n")
        };
        let (one, _) = adapters(&format!("{}{}", cluster("a"), tg("a")));
        let (renamed, _) = adapters(&format!("{}{}", cluster("b"), tg("a")));
        assert!(
            refusals(&one, &renamed, (&o, &o), true).is_empty(),
            "a changed [cluster] applies"
        );
        let what = refusals(&old, &one, (&o, &o), false);
        assert!(what[0].starts_with("[cluster] added"), "{what:?}");
        let what = refusals(&one, &old, (&o, &o), true);
        assert!(what[0].starts_with("[cluster] removed"), "{what:?}");
    }
}

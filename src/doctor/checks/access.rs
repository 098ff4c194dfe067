//! Findings about who may reach the agent (`[access]`, docs/config.md): the gateway is the
//! only thing between a stranger and the agent, so an adapter that admits anyone, one that
//! admits nobody, and a pairing store another user could have written are each worth a line.
//! They read only the profile homes, so launchd's doctor runs them too.

use crate::doctor::checks::{profile_finding, Check};
use crate::doctor::homes::Homes;
use crate::doctor::{Finding, Severity};

/// HSV029: `allow-all` on an adapter with an agent behind it.
pub(crate) const ANYONE_CAN_REACH: Check<Homes> = Check {
    id: "HSV029",
    find: anyone_can_reach,
    fix: |p, f| p.skip(f, "who may talk to the agent is the owner's choice"),
};

/// HSV030: an agent that no rule lets anyone reach.
pub(crate) const NOBODY_ADMITTED: Check<Homes> = Check {
    id: "HSV030",
    find: nobody_admitted,
    fix: |p, f| p.skip(f, "who may talk to the agent is the owner's choice"),
};

/// HSV031: the pairing store cannot be used.
pub(crate) const PAIRING_STORE: Check<Homes> = Check {
    id: "HSV031",
    find: pairing_store,
    fix: |p, f| {
        p.skip(
            f,
            "a store another user could write must be looked at by a person before it is trusted",
        )
    },
};

fn anyone_can_reach(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        for a in p.access.iter().filter(|a| a.allow_all) {
            out.push(profile_finding(
                ANYONE_CAN_REACH.id,
                Severity::Warn,
                p,
                format!(
                    "Anyone who finds the bot on adapter {} ({}) reaches the agent (allow-all): \
                     they spend its model budget, read what it remembers and use its tools",
                    a.adapter, a.kind
                ),
                format!(
                    "in {}, replace allow-all with allow-users (each sender by {}), or keep it \
                     only if the bot is meant to be public",
                    p.config_path.display(),
                    crate::platform::sender_id(a.kind)
                ),
            ));
        }
    }
    out
}

fn nobody_admitted(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        let closed: Vec<&str> = p
            .access
            .iter()
            .filter(|a| !a.admits_someone)
            .map(|a| a.adapter.as_str())
            .collect();
        if closed.is_empty() {
            continue;
        }
        let pairs = p.access.iter().any(|a| !a.admits_someone && a.pairs);
        let then = if pairs {
            "until you approve a sender's pairing code, no message reaches the agent there"
        } else {
            "no message reaches the agent there"
        };
        out.push(profile_finding(
            NOBODY_ADMITTED.id,
            Severity::Info,
            p,
            format!(
                "No access rule admits anyone on adapter{} {}: {then}",
                if closed.len() == 1 { "" } else { "s" },
                closed.join(", ")
            ),
            format!(
                "add allow-users = [\"ID\", ...] under [access] in {}, or approve a sender: \
                 hermes-svc pairing list -p {} (docs/config.md, \"Who may talk to the agent\")",
                p.config_path.display(),
                p.name
            ),
        ));
    }
    out
}

fn pairing_store(s: &Homes) -> Vec<Finding> {
    s.profiles
        .iter()
        .filter_map(|p| {
            let why = p.pairing_error.as_ref()?;
            Some(profile_finding(
                PAIRING_STORE.id,
                Severity::Error,
                p,
                format!("The pairing store is not used, so no paired sender is admitted: {why}"),
                format!(
                    "look at {} and what is in it: if it is not yours, move it aside and pair \
                     again; if it is, chown it to the profile's user and chmod 700 (600 for the \
                     files in it)",
                    p.home.join("access").display()
                ),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::checks::fixtures::{homes, profile};
    use crate::doctor::homes::AdapterAccess;

    fn adapter(name: &str, allow_all: bool, admits_someone: bool) -> AdapterAccess {
        AdapterAccess {
            adapter: name.into(),
            kind: "websocket",
            allow_all,
            admits_someone,
            pairs: !admits_someone,
        }
    }

    #[test]
    fn an_open_adapter_a_closed_one_and_a_foreign_store_are_each_found() {
        let mut p = profile("coder");
        p.access = vec![
            adapter("open", true, true),
            adapter("closed", false, false),
            adapter("listed", false, true),
        ];
        p.pairing_error = Some("/h/access is writable by others".into());
        let s = homes(&[], vec![p]);
        let open = anyone_can_reach(&s);
        assert_eq!(open.len(), 1);
        assert!(open[0].message.contains("adapter open (websocket)"));
        let closed = nobody_admitted(&s);
        assert_eq!(closed.len(), 1);
        assert!(
            closed[0].message.contains("adapter closed:"),
            "{}",
            closed[0].message
        );
        assert!(closed[0].message.contains("pairing code"));
        let store = pairing_store(&s);
        assert_eq!(store[0].severity, Severity::Error);
        assert!(store[0].message.contains("writable by others"));

        // No agent, no rules to judge: nothing.
        let quiet = homes(&[], vec![profile("plain")]);
        assert!(anyone_can_reach(&quiet).is_empty() && nobody_admitted(&quiet).is_empty());
    }
}

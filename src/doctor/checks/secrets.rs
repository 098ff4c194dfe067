//! Where a profile's secrets are kept. A secret in a unit's `Environment=` is readable by
//! anyone who can read the unit: `systemctl show` prints it, to every user for a system unit.
//! `.env` (mode 0600) or a credential (`install --credential`, which the gateway reads first)
//! keep it from them.

use crate::doctor::checks::{profile_of, scope_of, unit_finding, Check};
use crate::doctor::snapshot::Snapshot;
use crate::doctor::{Finding, Severity};
use crate::service::served_profile::same_home;
use crate::systemd::scope::Scope;

/// HSV021: a secret that gateway.toml names is set in the unit's environment.
pub(crate) const SECRET_IN_UNIT: Check = Check {
    id: "HSV021",
    find: secret_in_unit,
    fix: |p, f| {
        p.skip(
            f,
            "the secret must be moved somewhere only its owner reads, which needs its value",
        )
    },
};

fn secret_in_unit(s: &Snapshot) -> Vec<Finding> {
    let mut out = vec![];
    for u in &s.units {
        let Some(name) = profile_of(u) else { continue };
        let Some(p) = s
            .homes
            .profiles
            .iter()
            .find(|p| p.name == name && same_home(&u.hermes_home, &p.hermes_home))
        else {
            continue;
        };
        let env = u.props.environment.as_deref().unwrap_or_default();
        for (adapter, var) in &p.secret_vars {
            let prefix = format!("{var}=");
            if !env.iter().any(|e| e.starts_with(&prefix)) {
                continue;
            }
            let who = match scope_of(u) {
                Scope::System => "every user of this machine",
                Scope::User => "anyone who can read your units",
            };
            let system = match scope_of(u) {
                Scope::System => " --system",
                Scope::User => "",
            };
            out.push(unit_finding(
                SECRET_IN_UNIT.id,
                Severity::Warn,
                u,
                format!(
                    "{var}, adapter {adapter}'s secret, is set in the unit's Environment=, which `systemctl show` prints to {who}."
                ),
                format!(
                    "hermes-svc unset --profile {name}{system} {var}, then pass it as a credential: hermes-svc install --profile {name}{system} --credential {var}=/path/to/file (mode 0600), or put it in {} (mode 0600)",
                    p.env_path.display()
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::checks::fixtures::*;

    fn with_env(env: &[&str]) -> Snapshot {
        let mut u = ours("a");
        let mut vars: Vec<String> = u.props.environment.clone().unwrap_or_default();
        vars.extend(env.iter().map(|e| e.to_string()));
        u.props.environment = Some(vars);
        let mut p = profile("a");
        p.secret_vars = vec![("dc".into(), "DC_TOKEN".into())];
        snap(vec![u], vec![p])
    }

    #[test]
    fn hsv021_a_secret_in_the_units_environment() {
        let f = secret_in_unit(&with_env(&["DC_TOKEN=t0ps3cret"]));
        assert_eq!(ids(&f), [("HSV021", Severity::Warn)]);
        assert!(
            f[0].message.contains("DC_TOKEN, adapter dc's secret"),
            "{f:?}"
        );
        assert!(
            !format!("{f:?}").contains("t0ps3cret"),
            "the value leaked: {f:?}"
        );
        assert!(
            f[0].fix
                .starts_with("hermes-svc unset --profile a DC_TOKEN, then")
                && f[0].fix.contains("--credential DC_TOKEN=/path/to/file"),
            "{}",
            f[0].fix
        );
        // Near misses: another variable, a name that only starts the same, no variable.
        assert!(secret_in_unit(&with_env(&["HTTPS_PROXY=http://p:8080"])).is_empty());
        assert!(secret_in_unit(&with_env(&["DC_TOKEN_FILE=/x"])).is_empty());
        assert!(secret_in_unit(&with_env(&[])).is_empty());
        // It needs a person: --fix leaves it and says why.
        let p = planned(&with_env(&["DC_TOKEN=t0ps3cret"]));
        assert!(p.fixes.is_empty(), "{p:?}");
        assert!(p.skipped.iter().any(|k| k.id == "HSV021"), "{p:?}");
    }
}

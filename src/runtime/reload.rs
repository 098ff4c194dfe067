//! A reload (SIGHUP, `hermes-svc reload`, `systemctl reload`): read the profile's
//! configuration again by the code a start reads it with ([`Plan::read`]: `gateway.toml`,
//! `.env` and each adapter's credentials), check the whole of it against the running one
//! before touching anything, then apply it, or refuse it and keep the running one.
//!
//! This version applies what no adapter holds: the access rules (`[access]` and each
//! `[adapter.access]`), which the spool's judge takes for the next message, and the cron jobs
//! (`[[cron]]`), which the ticker takes as its new list, with no connection touched. Anything
//! else that changed (an adapter's own table, a credential, the adapters themselves,
//! `[agent]`, `[cluster]`, `[gateway]`) is refused with what changed and that a restart
//! applies it: a half-applied configuration would be one nobody wrote. Reloading adapters one
//! by one comes next (issue 49).
//!
//! Signals coalesce (a SIGHUP that arrives while one is being handled is one more reload,
//! however many arrive), and each reload reads the files as they are then, so a storm ends
//! with the last configuration written, or the last refusal of it.

use std::time::SystemTime;

use tokio::sync::watch;

use super::components::ticker_jobs;
use super::frontend::ReloadHook;
use super::{reason, GatewayError, Plan};
use crate::config::Secret;
use crate::gateway::cron;
use crate::gateway::state_file::{ReloadOutcome, ReloadRecord};
use crate::platform::{AdapterSpec, CronSpec, GatewayConfig};
use crate::profile::Profile;

/// Why a new configuration was refused. The running one stays as it was.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refusal {
    /// It cannot be read: the config error names the file, the line and the fix.
    #[error("{}", reason(.0))]
    Unreadable(Box<GatewayError>),
    #[error("{what}; a restart applies it (hermes-svc restart --profile {profile}): a reload applies only access rules and cron jobs for now")]
    NeedsRestart { what: String, profile: String },
}

/// The running configuration and what takes a new one.
pub(super) struct Reloader {
    profile: Profile,
    config: GatewayConfig,
    adapters: Vec<(AdapterSpec, Vec<Secret>)>,
    /// The front ends' parts of a reload (the access rules').
    pub(super) hooks: Vec<ReloadHook>,
    /// The cron ticker's job list, when the run has a ticker (it started with jobs).
    pub(super) cron: Option<watch::Sender<Vec<cron::CronSpec>>>,
    generation: u64,
}

impl Reloader {
    pub(super) fn new(profile: &Profile, plan: &Plan) -> Self {
        Self {
            profile: profile.clone(),
            config: plan.config.clone(),
            adapters: plan.adapters.clone(),
            hooks: vec![],
            cron: None,
            generation: 0,
        }
    }

    /// Read, check and apply the configuration on disk now; what came of it, for the state
    /// file.
    pub(super) fn reload(&mut self, began_monotonic_usec: u64) -> ReloadRecord {
        self.generation += 1;
        let (outcome, reason) = match self.read_and_check() {
            Ok(plan) => {
                let reason = self.apply(plan);
                tracing::info!(generation = self.generation, %reason, "configuration reloaded");
                (ReloadOutcome::Applied, reason)
            }
            Err(refusal) => {
                let reason = refusal.to_string();
                tracing::error!(generation = self.generation, %reason, "reload refused; the running configuration stays");
                (ReloadOutcome::Refused, reason)
            }
        };
        ReloadRecord {
            generation: self.generation,
            began_monotonic_usec,
            at: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            outcome,
            reason,
        }
    }

    fn read_and_check(&self) -> Result<Plan, Refusal> {
        let plan = Plan::read(&self.profile).map_err(|e| Refusal::Unreadable(Box::new(e)))?;
        let mut what = changes_needing_restart(&self.config, &self.adapters, &plan);
        what.extend(changed_in_env_file(&self.profile, &plan));
        if self.cron.is_none() && self.config.cron != plan.config.cron {
            what.push("[[cron]] changed, and no cron ticker runs (the gateway started with no jobs, or is a cluster's standby)".into());
        }
        if what.is_empty() {
            Ok(plan)
        } else {
            Err(Refusal::NeedsRestart {
                what: what.join("; "),
                profile: self.profile.name().to_string(),
            })
        }
    }

    /// The cron jobs of the running configuration.
    pub(super) fn cron_jobs(&self) -> &[CronSpec] {
        &self.config.cron
    }

    /// Hand the checked configuration to what takes it; what changed, in words.
    fn apply(&mut self, plan: Plan) -> String {
        let mut applied = vec![];
        if !same_access(&self.config, &plan.config) {
            applied.push("access rules applied".to_owned());
        }
        for hook in &self.hooks {
            hook(&plan.config);
        }
        if self.config.cron != plan.config.cron {
            if let Some(ticker) = &self.cron {
                ticker.send_replace(ticker_jobs(&plan.config.cron));
            }
            applied.push(format!("{} cron jobs applied", plan.config.cron.len()));
        }
        self.config = plan.config;
        self.adapters = plan.adapters;
        if applied.is_empty() {
            "nothing changed".into()
        } else {
            applied.join(", ")
        }
    }
}

/// Whether the access rules of `a` and `b` are the same: `[access]` and every adapter's own.
fn same_access(a: &GatewayConfig, b: &GatewayConfig) -> bool {
    a.access == b.access
        && a.adapters.len() == b.adapters.len()
        && a.adapters
            .iter()
            .zip(&b.adapters)
            .all(|(x, y)| x.access == y.access)
}

/// What changed between the running configuration and `new` that this version cannot apply
/// without a restart, each in words naming it; empty when the rest is the same.
fn changes_needing_restart(
    config: &GatewayConfig,
    adapters: &[(AdapterSpec, Vec<Secret>)],
    new: &Plan,
) -> Vec<String> {
    let mut what = vec![];
    let names = |list: &[(AdapterSpec, Vec<Secret>)]| -> Vec<String> {
        list.iter().map(|(s, _)| s.name.clone()).collect()
    };
    let (old_names, new_names) = (names(adapters), names(&new.adapters));
    let added: Vec<&str> = new_names
        .iter()
        .filter(|n| !old_names.contains(n))
        .map(String::as_str)
        .collect();
    let removed: Vec<&str> = old_names
        .iter()
        .filter(|n| !new_names.contains(n))
        .map(String::as_str)
        .collect();
    if !added.is_empty() {
        what.push(format!("adapter {} added", added.join(", ")));
    }
    if !removed.is_empty() {
        what.push(format!("adapter {} removed", removed.join(", ")));
    }
    for (spec, secrets) in adapters {
        let Some((new_spec, new_secrets)) = new.adapters.iter().find(|(s, _)| s.name == spec.name)
        else {
            continue;
        };
        let mut own = new_spec.clone();
        own.access = spec.access.clone();
        if own != *spec {
            what.push(format!(
                "adapter {}'s [[adapter]] table changed (other than its access rules)",
                spec.name
            ));
        } else if new_secrets != secrets {
            what.push(format!("adapter {}'s credential changed", spec.name));
        }
    }
    let new_config = &new.config;
    if config.max_outage != new_config.max_outage
        || config.self_watchdog != new_config.self_watchdog
    {
        what.push("[gateway] changed".into());
    }
    if config.agent != new_config.agent {
        what.push("[agent] changed".into());
    }
    if config.cluster != new_config.cluster {
        what.push("[cluster] changed".into());
    }
    what
}

/// The adapters whose credential `.env` now says otherwise than the process was given at its
/// start. A credential is read from the process's environment (the unit's `EnvironmentFile=`
/// filled it, or the gateway itself from `.env` when run by hand, before any thread), which a
/// running process cannot safely change; so a new token in `.env` is noticed here and
/// refused, for a restart to apply, rather than reported as nothing changed. A variable the
/// service manager passes as a credential (`install --credential`) is read again by
/// [`Plan::read`] and compared with the rest.
fn changed_in_env_file(profile: &Profile, plan: &Plan) -> Vec<String> {
    let path = profile.env_file();
    let Ok(Some(text)) = crate::env_file::read(&path, crate::bounded_read::Owner::SelfOrRoot)
    else {
        return vec![];
    };
    let (vars, _) = crate::env_file::parse(&text);
    let mut what = vec![];
    for (spec, _) in &plan.adapters {
        let changed = spec.credential_envs().into_iter().any(|var| {
            let passed = matches!(crate::config::from_credentials(var), Ok(Some(_)));
            let now = vars.iter().find(|(k, _)| k == var).map(|(_, v)| v);
            !passed && now.is_some_and(|v| std::env::var(var).ok().as_ref() != Some(v))
        });
        if changed {
            what.push(format!(
                "adapter {}'s credential changed in {}",
                spec.name,
                path.display()
            ));
        }
    }
    what
}

/// `CLOCK_MONOTONIC` in microseconds, for `RELOADING=1`'s `MONOTONIC_USEC=` (sd_notify(3)).
pub(crate) fn monotonic_usec() -> u64 {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        (t.tv_sec() as u64) * 1_000_000 + (t.tv_nsec() as u64) / 1_000
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(toml: &str) -> Plan {
        let config: GatewayConfig =
            crate::config::parse(std::path::Path::new("/g.toml"), toml).unwrap();
        let adapters = config
            .adapters
            .iter()
            .map(|a| (a.clone(), vec![Secret::new("t".into())]))
            .collect();
        Plan {
            config,
            adapters,
            watchdog: None,
            self_watchdog: std::time::Duration::from_secs(30),
        }
    }

    const TG: &str = "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"T\"\n";

    #[test]
    fn access_rules_alone_need_no_restart_and_an_adapters_table_does() {
        let old = plan(TG);
        let access = plan(&format!(
            "{TG}[adapter.access]\nallow-users = [\"7\"]\n\n[access]\nallow-users = [\"8\"]\n"
        ));
        assert!(changes_needing_restart(&old.config, &old.adapters, &access).is_empty());
        assert!(!same_access(&old.config, &access.config));
        let timing = plan(&TG.replace("token-env", "backoff-max = \"5s\"\ntoken-env"));
        let what = changes_needing_restart(&old.config, &old.adapters, &timing);
        assert_eq!(what.len(), 1, "{what:?}");
        assert!(
            what[0].contains("adapter tg's [[adapter]] table"),
            "{what:?}"
        );
        let added = plan(&format!("{TG}{}", TG.replace("\"tg\"", "\"tg2\"")));
        let what = changes_needing_restart(&old.config, &old.adapters, &added);
        assert_eq!(what, vec!["adapter tg2 added".to_string()]);
    }

    #[test]
    fn a_new_credential_needs_a_restart_in_this_version() {
        let old = plan(TG);
        let mut new = plan(TG);
        new.adapters[0].1 = vec![Secret::new("other".into())];
        let what = changes_needing_restart(&old.config, &old.adapters, &new);
        assert_eq!(what, vec!["adapter tg's credential changed".to_string()]);
    }
}

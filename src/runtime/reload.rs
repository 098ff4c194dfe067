//! A reload (SIGHUP, `hermes-svc reload`, `systemctl reload`): read the profile's
//! configuration again by the code a start reads it with ([`Plan::read_with`]: `gateway.toml`,
//! `.env` and each adapter's credentials), check the whole of it against the running one and
//! claim any new credential's token lock before touching anything, then apply the difference
//! adapter by adapter, or refuse it all and keep the running configuration.
//!
//! Applied: the access rules (`[access]`, each `[adapter.access]`), which the access gate
//! takes for the next message; the cron jobs, which the ticker takes as its new list (a first
//! job starts the ticker); adapters added (started, each with its outbox worker and route),
//! removed (stopped, their heartbeat no longer counted; their spool lines and cursors stay)
//! and changed (their own table or credential: stopped, then started with the new one, and
//! its outbox route and media fetcher made anew); every reader of the adapters' events (the
//! access gate, the agent bridge, the local API) follows the new set through the front ends'
//! reload hooks; a front end started from what changed (the agent link, from `[agent]`) is
//! checked first and then started again (`frontends.rs`); a changed `[cluster]` is taken by the
//! run's ownership before anything else (`Ownership::reconfigure`), since etcd is asked for it.
//! An adapter that did not change keeps its task, its connection and its session. Refused,
//! with why and that a restart applies it: `[gateway]`, `[cluster]` or `[agent]` added or
//! removed, and in a cluster a change of credentials (`diff.rs`); a
//! token another gateway holds (the reload is refused, as the start would be: exit 78 there,
//! a refused reload here, the running adapters untouched, never a half-applied file).
//!
//! Signals coalesce (a SIGHUP that arrives while one is being handled is one more reload,
//! however many arrive), and each reload reads the files as they are then, so a storm ends
//! with the last configuration written, or the last refusal of it. A cluster's standby
//! reloads too: it takes the new configuration and starts it if it becomes the active; a new
//! `[cluster]` starts its campaign again (`supervision.rs`).

mod diff;
mod env;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;

use super::components::{ticker_jobs, Components};
use super::frontends::Frontends;
use super::ownership::Ownership;
use super::{reason, GatewayError, Plan};
use crate::config::{ClusterSpec, ConfigError, Secret};
use crate::gateway::adapter::Shared;
use crate::gateway::cron::{self, CronContext};
use crate::gateway::outbox::Outbox;
use crate::gateway::spool::Spool;
use crate::gateway::state_file::{ReloadOutcome, ReloadRecord};
use crate::media::fetch::Inbound;
use crate::platform::{fetcher, AdapterSpec, CronSpec, GatewayConfig, Sender};
use crate::profile::Profile;
use diff::{refusals, same_access, Diff};
pub(super) use env::EnvFile;

/// How long a stopped adapter is given to close its connection before it is aborted.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Why a new configuration was refused. The running one stays as it was.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refusal {
    /// It cannot be read: the config error names the file, the line and the fix.
    #[error("{}", reason(.0))]
    Unreadable(Box<GatewayError>),
    #[error("adapter {adapter} is new in this reload and has no credential: {}", reason(.error))]
    NewWithoutCredential {
        adapter: String,
        error: Box<GatewayError>,
    },
    #[error("{what}; a restart applies it (hermes-svc restart --profile {profile})")]
    NeedsRestart { what: String, profile: String },
    /// A front end the new configuration starts again could not start on it.
    #[error("{0}")]
    Frontend(String),
    /// A new credential's token lock: another gateway holds it.
    #[error("{}", reason(.0))]
    Credential(Box<GatewayError>),
    /// The run's ownership could not take the new `[cluster]`.
    #[error("[cluster] not applied: {0}")]
    Cluster(String),
}

/// What the run is, for a reload: its parts that take a new configuration.
pub(super) struct Parts {
    pub(super) spool: Arc<Spool>,
    pub(super) shared: Shared,
    pub(super) outbox: Option<Arc<Outbox>>,
    pub(super) in_cluster: bool,
    /// The media store's fetchers and the client they download with, in a run with an agent.
    pub(super) media: Option<(Arc<Inbound>, reqwest::Client)>,
    /// The front ends: each takes a new configuration through its hook or is started again.
    pub(super) frontends: Frontends,
}

/// The running configuration and what takes a new one.
pub(super) struct Reloader {
    profile: Profile,
    config: GatewayConfig,
    adapters: Vec<(AdapterSpec, Vec<Secret>)>,
    env: EnvFile,
    parts: Parts,
    /// The cron ticker's job list, once the run has a ticker.
    cron: Option<watch::Sender<Vec<cron::CronSpec>>>,
    /// Where jobs run, once the run is active (a standby runs nothing).
    cron_ctx: Option<CronContext>,
    generation: u64,
}

/// A configuration read and checked, ready to apply.
struct Checked {
    plan: Plan,
    diff: Diff,
    ids: Vec<(String, String)>,
}

impl Checked {
    /// The new `[cluster]`, where it differs from `running`'s.
    fn new_cluster(&self, running: &GatewayConfig) -> Option<&ClusterSpec> {
        let new = self.plan.config.cluster.as_ref();
        new.filter(|n| running.cluster.as_ref() != Some(*n))
    }
}

impl Reloader {
    pub(super) fn new(profile: &Profile, plan: &Plan, parts: Parts) -> Self {
        Self {
            profile: profile.clone(),
            config: plan.config.clone(),
            adapters: plan.adapters.clone(),
            env: EnvFile::at_start(profile.env_file()),
            parts,
            cron: None,
            cron_ctx: None,
            generation: 0,
        }
    }

    /// Start what the configuration asks for, as it is now (a standby may have reloaded):
    /// the cron ticker, the adapters, their outbox workers; the time by which the adapters
    /// should have reported in.
    pub(super) fn start(&mut self, components: &mut Components, cron_ctx: CronContext) -> Instant {
        self.cron = components.start_cron(&self.config.cron, cron_ctx.clone());
        self.cron_ctx = Some(cron_ctx);
        let parts = &self.parts;
        let ready_by =
            components.start_adapters(self.adapters.clone(), &parts.spool, &parts.shared);
        if let Some(outbox) = &parts.outbox {
            for (spec, secrets) in &self.adapters {
                if let Some(sender) = Sender::new(spec, secrets, &parts.shared) {
                    components.start_worker(outbox, spec.name.clone(), sender);
                }
            }
        }
        ready_by
    }

    /// The cron jobs of the running configuration.
    pub(super) fn cron_jobs(&self) -> &[CronSpec] {
        &self.config.cron
    }

    /// The running configuration's `[cluster]`.
    pub(super) fn cluster(&self) -> Option<&ClusterSpec> {
        self.config.cluster.as_ref()
    }

    /// Read, check and apply the configuration on disk now; what came of it, for the state
    /// file. `ownership` takes a new credential's lock; none while a standby campaigns, whose
    /// credentials cannot change (a cluster's never do on a reload).
    pub(super) async fn reload(
        &mut self,
        began_monotonic_usec: u64,
        components: &mut Components,
        mut ownership: Option<&mut dyn Ownership>,
    ) -> ReloadRecord {
        self.generation += 1;
        let checked = self.read_and_check().and_then(|c| {
            if let Some(o) = ownership.as_mut() {
                o.claim_more(&self.profile.config_file(), &c.ids)
                    .map_err(|e| Refusal::Credential(Box::new(e)))?;
            }
            Ok(c)
        });
        // The cluster first: it is the one part that can still fail after the checks (etcd
        // is asked), and nothing else is touched until it is taken.
        let mut cluster = vec![];
        let checked = match (checked, ownership.as_mut()) {
            (Ok(c), Some(o)) => match c.new_cluster(&self.config) {
                Some(spec) => match o.reconfigure(spec).await {
                    Ok(said) => {
                        cluster = said;
                        Ok(c)
                    }
                    Err(why) => Err(Refusal::Cluster(why)),
                },
                None => Ok(c),
            },
            (checked, _) => checked,
        };
        let (outcome, reason) = match checked {
            Ok(checked) => {
                let ids = checked.ids.clone();
                let reason = self.apply(checked, components, cluster).await;
                if let Some(o) = ownership {
                    o.release_except(&ids);
                }
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

    fn read_and_check(&self) -> Result<Checked, Refusal> {
        let plan = Plan::read_with(&self.profile, &self.env.now()).map_err(|e| match e {
            GatewayError::Config(ConfigError::Secret { ref adapter, .. })
                if !self.adapters.iter().any(|(s, _)| s.name == *adapter) =>
            {
                Refusal::NewWithoutCredential {
                    adapter: adapter.clone(),
                    error: Box::new(e),
                }
            }
            e => Refusal::Unreadable(Box::new(e)),
        })?;
        let diff = Diff::of(&self.adapters, &plan.adapters);
        let ids = identities(&plan.adapters);
        let what = refusals(
            &self.config,
            &plan.config,
            (&identities(&self.adapters), &ids),
            self.parts.in_cluster,
        );
        if !what.is_empty() {
            return Err(Refusal::NeedsRestart {
                what: what.join("; "),
                profile: self.profile.name().to_string(),
            });
        }
        self.parts
            .frontends
            .check(&self.config, &plan.config, &self.env.now())
            .map_err(Refusal::Frontend)?;
        let checked = Checked { plan, diff, ids };
        if let Some(spec) = checked.new_cluster(&self.config) {
            crate::cluster::check(spec).map_err(|e| Refusal::Cluster(e.to_string()))?;
        }
        Ok(checked)
    }

    /// Hand the checked configuration to what takes it; what changed, in words.
    /// `cluster`: what the active's ownership said it did with a new `[cluster]`.
    async fn apply(
        &mut self,
        checked: Checked,
        components: &mut Components,
        cluster: Vec<String>,
    ) -> String {
        let Checked { plan, diff, .. } = checked;
        let mut applied = cluster;
        if applied.is_empty() && self.config.cluster != plan.config.cluster {
            // A standby: `stand_by` campaigns again with it.
            applied.push("[cluster] applied: the campaign starts again with it".to_owned());
        }
        if !same_access(&self.config, &plan.config) {
            applied.push("access rules applied".to_owned());
        }
        // The adapters first: a front end started again then reads the new set.
        self.apply_adapters(&plan.adapters, &diff, components).await;
        applied.extend(diff.describe());
        let env = self.env.now();
        let frontends = &mut self.parts.frontends;
        applied.extend(
            frontends
                .reload(&self.config, &plan.config, &env, components)
                .await,
        );
        if self.config.cron != plan.config.cron {
            match (&self.cron, &self.cron_ctx) {
                (Some(ticker), _) => {
                    ticker.send_replace(ticker_jobs(&plan.config.cron));
                }
                (None, Some(ctx)) => {
                    self.cron = components.start_cron(&plan.config.cron, ctx.clone());
                }
                // A standby: the ticker starts with the new list if this run becomes active.
                (None, None) => {}
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

    /// Stop the removed and changed adapters (all at once, each within [`STOP_GRACE`]), then
    /// start the added and changed ones, each with its route and outbox worker. A standby
    /// (no cron context yet) only keeps the routes: it starts adapters when it is active.
    async fn apply_adapters(
        &self,
        new: &[(AdapterSpec, Vec<Secret>)],
        diff: &Diff,
        components: &mut Components,
    ) {
        let parts = &self.parts;
        let stopping: Vec<_> = diff
            .removed
            .iter()
            .chain(diff.restarted())
            .map(|name| components.stop_adapter(name))
            .collect();
        futures_util::future::join_all(stopping.into_iter().map(|r| r.ended(STOP_GRACE))).await;
        for name in &diff.removed {
            if let Some(outbox) = &parts.outbox {
                outbox.set_route(name, None);
            }
            if let Some((inbound, _)) = &parts.media {
                inbound.set_fetcher(name, None);
            }
        }
        let active = self.cron_ctx.is_some();
        let starting = new.iter().filter(|(s, _)| {
            diff.added.contains(&s.name) || diff.restarted().any(|n| *n == s.name)
        });
        for (spec, secrets) in starting {
            let sender = Sender::new(spec, secrets, &parts.shared);
            if let Some(outbox) = &parts.outbox {
                outbox.set_route(&spec.name, sender.as_ref().map(Sender::route));
            }
            if let Some((inbound, http)) = &parts.media {
                inbound.set_fetcher(&spec.name, fetcher(spec, secrets, &parts.shared, http));
            }
            if !active {
                continue;
            }
            components.start_adapter(spec.clone(), secrets.clone(), &parts.spool, &parts.shared);
            if let (Some(outbox), Some(sender)) = (&parts.outbox, sender) {
                components.start_worker(outbox, spec.name.clone(), sender);
            }
        }
    }
}

/// Each adapter's credential identity, as the token locks take it.
fn identities(adapters: &[(AdapterSpec, Vec<Secret>)]) -> Vec<(String, String)> {
    adapters
        .iter()
        .map(|(spec, secrets)| (spec.name.clone(), spec.identity(secrets)))
        .collect()
}

/// `CLOCK_MONOTONIC` in microseconds, for `RELOADING=1`'s `MONOTONIC_USEC=` (sd_notify(3)).
pub(crate) fn monotonic_usec() -> u64 {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        (t.tv_sec() as u64) * 1_000_000 + (t.tv_nsec() as u64) / 1_000
    })
}

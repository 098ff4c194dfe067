//! The `[gateway]` section, and the whole configuration it heads: the process-wide limits
//! that decide when the gateway gives up and exits for a clean restart.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::value::Ctx;
use super::{AccessRules, AdapterSpec, AgentSpec, ClusterSpec, ConfigError, CronSpec, Platforms};

/// The whole configuration of one gateway, with the platforms `P` (the registry's).
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayConfig<P: Platforms> {
    /// An adapter that has been without a connection this long makes the gateway exit 75 for
    /// a clean restart.
    pub max_outage: Duration,
    /// Without a systemd watchdog, a component stale this long makes the gateway exit 75.
    pub self_watchdog: Duration,
    pub adapters: Vec<AdapterSpec<P>>,
    pub cron: Vec<CronSpec<P::Target>>,
    /// The agent behind the gateway, and the bridge to it (`[agent]`).
    pub agent: Option<AgentSpec>,
    /// Who may reach the agent, for every adapter unless its own `[adapter.access]` says
    /// otherwise (`[access]`).
    pub access: AccessRules,
    /// The profile's gateways on other hosts, one active at a time (`[cluster]`).
    pub cluster: Option<ClusterSpec>,
}

impl<P: Platforms> Default for GatewayConfig<P> {
    fn default() -> Self {
        Self {
            max_outage: Duration::from_secs(30 * 60),
            self_watchdog: Duration::from_secs(30),
            adapters: vec![],
            cron: vec![],
            agent: None,
            access: AccessRules::default(),
            cluster: None,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawGateway {
    max_outage: Option<Spanned<String>>,
    watchdog: Option<Spanned<String>>,
}

/// The configuration the `[gateway]` section describes, with no adapters or cron jobs yet.
pub(super) fn gateway<P: Platforms>(
    ctx: &Ctx,
    raw: &RawGateway,
) -> Result<GatewayConfig<P>, ConfigError> {
    let defaults = GatewayConfig::<P>::default();
    Ok(GatewayConfig {
        max_outage: ctx.opt_duration("max-outage", &raw.max_outage, defaults.max_outage)?,
        self_watchdog: ctx.opt_duration("watchdog", &raw.watchdog, defaults.self_watchdog)?,
        adapters: vec![],
        cron: vec![],
        agent: None,
        access: AccessRules::default(),
        cluster: None,
    })
}

//! The run's media store and each adapter's way to its platform's files, for the agent
//! bridges. A store that cannot be opened is said once and costs the run nothing else: the
//! messages still reach the agent, each saying its files could not be fetched.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Secret;
use crate::gateway::adapter::Shared;
use crate::media::download;
use crate::media::fetch::Inbound;
use crate::media::store::Store;
use crate::platform::{fetcher, AdapterSpec, GatewayConfig};
use crate::profile::Profile;

/// The store in `profile`'s home, with a fetcher for every adapter whose wing fetches files,
/// and the client they download with (a reload makes a changed adapter's fetcher with it);
/// only for a run with an agent (`[agent]`), the one reader of the store so far.
pub(super) fn open(
    profile: &Profile,
    config: &GatewayConfig,
    adapters: &[(AdapterSpec, Vec<Secret>)],
    shared: &Shared,
) -> Result<(Arc<Inbound>, reqwest::Client), String> {
    if config.agent.is_none() {
        return Err("no [agent] in gateway.toml".into());
    }
    let opened = Store::open(&profile.media_dir())
        .map_err(|e| crate::error_chain::one_line(&e))
        .and_then(|store| {
            let http = download::client().map_err(|e| crate::error_chain::one_line(&e))?;
            let fetchers = adapters
                .iter()
                .filter_map(|(spec, secrets)| {
                    fetcher(spec, secrets, shared, &http).map(|f| (spec.name.clone(), f))
                })
                .collect::<HashMap<_, _>>();
            Ok((Arc::new(Inbound::new(store, fetchers)), http))
        });
    if let Err(why) = &opened {
        tracing::error!(reason = %why, "the media store is unavailable; messages reach the agent without their files, each saying so");
    }
    opened
}

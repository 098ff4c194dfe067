//! The local API as the gateway run's front end: bound on the profile's socket once the run's
//! stores are open, then served as one of its components, its health read on every tick.

use std::sync::Arc;

use tokio::sync::watch;

use super::{bind, ApiState, Messages, NoOutbox};
use crate::gateway::state_file::FrontendHealth;
use crate::logging::Component;
use crate::platform::Normaliser;
use crate::profile::Profile;
use crate::runtime::{Frontend, FrontendError, Started, Stores};

/// The local API of one profile.
pub(crate) struct LocalApi {
    profile: Profile,
}

impl LocalApi {
    pub(crate) fn new(profile: &Profile) -> Self {
        Self {
            profile: profile.clone(),
        }
    }
}

impl Frontend for LocalApi {
    fn start(
        &self,
        stores: Stores<'_>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Option<Started>, FrontendError> {
        let bound = bind(&self.profile.api_socket()).map_err(|e| {
            let needs_a_fix = e.needs_a_fix();
            FrontendError::new(e, needs_a_fix)
        })?;
        let messages: Arc<dyn Messages> = match stores.outbox {
            Ok(outbox) => outbox,
            Err(why) => Arc::new(NoOutbox::new(why)),
        };
        let normaliser = Normaliser::new(stores.config);
        let state = ApiState::new(&self.profile, stores.spool, messages, normaliser.clone());
        let connections = state.connections();
        Ok(Some(Started {
            name: Component::Api,
            serve: Box::pin(async move {
                bound.serve(state, shutdown).await.map_err(|e| {
                    format!("the agent API failed: {}", crate::error_chain::one_line(&e))
                })
            }),
            health: Box::new(move || FrontendHealth::Api(connections.health())),
            reload: Some(Box::new(move |config| normaliser.follow(config))),
        }))
    }
}

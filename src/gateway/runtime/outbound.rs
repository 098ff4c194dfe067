//! The sending half of a gateway and the agent's way in: the outbox, one delivery worker per
//! adapter that can send, and the local API. Kept apart from the adapters' start so that
//! sending never holds up receiving.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};
use tracing::Instrument;

use super::{io, GatewayError};
use crate::api;
use crate::config::{AdapterSpec, CronSpec, Secret};
use crate::gateway::adapter::{AdapterExit, Shared};
use crate::gateway::outbox::{worker, Outbox, Route};
use crate::gateway::send::Sender;
use crate::gateway::spool::Spool;
use crate::gateway::state_file::Delivery;
use crate::logging::Component;
use crate::profile::Profile;

/// Each adapter that can send, by name, with its sender.
type Senders = Vec<(String, Sender)>;

/// Open the profile's outbox, with a route for every adapter that can send.
pub(super) fn open(
    profile: &Profile,
    adapters: &[(AdapterSpec, Option<Secret>)],
    shared: &Shared,
) -> Result<(Arc<Outbox>, Senders), GatewayError> {
    let senders: Senders = adapters
        .iter()
        .filter_map(|(spec, secret)| {
            Sender::new(spec, secret.clone(), shared.clone()).map(|s| (spec.name.clone(), s))
        })
        .collect();
    let routes: HashMap<String, Route> = senders
        .iter()
        .map(|(name, sender)| {
            let spec = adapters.iter().find(|(s, _)| &s.name == name);
            let kind = spec.map_or("", |(s, _)| s.protocol.kind());
            let route = Route {
                kind,
                max_text: sender.max_text(),
            };
            (name.clone(), route)
        })
        .collect();
    let dir = profile.outbox_dir();
    let outbox = Outbox::open(&dir, routes).map_err(|e| {
        io(format!("open the outbox in {}", dir.display()))(std::io::Error::other(e))
    })?;
    Ok((Arc::new(outbox), senders))
}

/// Start one delivery worker per sender, as components of the run (so a panic in one is a
/// restart), under the name `outbox:ADAPTER`.
pub(super) fn spawn_workers(
    senders: Senders,
    outbox: &Arc<Outbox>,
    shutdown: &watch::Receiver<bool>,
    tasks: &mut JoinSet<(String, AdapterExit)>,
    handles: &mut Vec<(String, AbortHandle)>,
) {
    for (adapter, sender) in senders {
        let name = format!("outbox:{adapter}");
        let (outbox, rx) = (outbox.clone(), shutdown.clone());
        let task_name = name.clone();
        let handle = tasks.spawn(
            async move {
                worker::run(adapter, sender, outbox, rx).await;
                (task_name, AdapterExit::Shutdown)
            }
            .instrument(Component::Outbox.span()),
        );
        handles.push((name, handle));
    }
}

/// Each delivering cron job's last delivery, for the state file and `status`.
pub(super) fn cron_deliveries(outbox: &Outbox, jobs: &[CronSpec]) -> Vec<Delivery> {
    jobs.iter()
        .filter(|job| job.deliver.is_some())
        .map(|job| {
            Delivery::of(
                &job.name,
                outbox.latest_with_key_prefix(&format!("cron:{}:", job.name)),
            )
        })
        .collect()
}

/// Bind the agent API's socket now, so that a path that cannot be used is a start-up error
/// naming it, then serve it as a component of the run under the name `api`. A server that
/// fails later is a restart. Returns its connections, whose health the state file carries.
pub(super) fn serve_api(
    profile: &Profile,
    spool: &Spool,
    outbox: &Arc<Outbox>,
    shutdown: &watch::Receiver<bool>,
    tasks: &mut JoinSet<(String, AdapterExit)>,
    handles: &mut Vec<(String, AbortHandle)>,
) -> Result<Arc<api::Connections>, GatewayError> {
    let bound = api::bind(&profile.api_socket())?;
    let state = api::ApiState::new(profile, spool, outbox.clone());
    let connections = state.connections();
    let rx = shutdown.clone();
    let handle = tasks.spawn(
        async move {
            if let Err(e) = bound.serve(state, rx).await {
                // A panic is what the run loop turns into a restart.
                panic!("the agent API failed: {}", crate::error_chain::one_line(&e));
            }
            ("api".to_owned(), AdapterExit::Shutdown)
        }
        .instrument(Component::Api.span()),
    );
    handles.push(("api".to_owned(), handle));
    Ok(connections)
}

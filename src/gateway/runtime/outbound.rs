//! The sending half of a gateway and the agent's way in: the outbox, one delivery worker per
//! adapter that can send, and the local API. Kept apart from the adapters' start so that
//! sending never holds up receiving: an outbox that cannot be opened (its journal a link, a
//! FIFO, unreadable) leaves the gateway receiving, with the outbox marked unavailable and the
//! reason in the API's answers, the state file, `status` and doctor (HSV022).

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};
use tracing::Instrument;

use super::GatewayError;
use crate::api;
use crate::config::{AdapterSpec, CronSpec, Secret};
use crate::gateway::adapter::{AdapterExit, Shared};
use crate::gateway::health::Registry;
use crate::gateway::outbox::{worker, Outbox, Route, Stats};
use crate::gateway::send::Sender;
use crate::gateway::spool::Spool;
use crate::gateway::state_file::Delivery;
use crate::logging::Component;
use crate::profile::Profile;

/// Each adapter that can send, by name, with its sender.
type Senders = Vec<(String, Sender)>;

/// The outbox as this run has it.
pub(super) enum Outbound {
    Open {
        outbox: Arc<Outbox>,
        senders: Senders,
    },
    /// Why it could not be opened, with the fix: nothing is sent this run.
    Unavailable(String),
}

impl Outbound {
    pub(super) fn outbox(&self) -> Option<&Arc<Outbox>> {
        match self {
            Outbound::Open { outbox, .. } => Some(outbox),
            Outbound::Unavailable(_) => None,
        }
    }

    /// The outbox at a glance for the state file: its figures, or why there are none.
    pub(super) fn stats(&self) -> Stats {
        match self {
            Outbound::Open { outbox, .. } => outbox.stats(),
            Outbound::Unavailable(why) => Stats::unavailable(why.clone()),
        }
    }
}

/// Open the profile's outbox, with a route for every adapter that can send; an outbox that
/// cannot be opened is [`Outbound::Unavailable`], logged as an error, and never stops the run.
pub(super) fn open(
    profile: &Profile,
    adapters: &[(AdapterSpec, Option<Secret>)],
    shared: &Shared,
) -> Outbound {
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
    match Outbox::open(&profile.outbox_dir(), routes) {
        Ok(outbox) => Outbound::Open {
            outbox: Arc::new(outbox),
            senders,
        },
        Err(e) => {
            let why = e.with_fix();
            tracing::error!(reason = %why, "the outbox is unavailable; receiving goes on, and nothing is sent until it is fixed and the gateway restarted");
            Outbound::Unavailable(why)
        }
    }
}

/// Start one delivery worker per sender, as components of the run (so a panic in one is a
/// restart, see `component.rs`), under the name `outbox:ADAPTER`; none when the outbox is
/// unavailable.
pub(super) fn spawn_workers(
    outbound: &mut Outbound,
    registry: &Registry,
    shutdown: &watch::Receiver<bool>,
    tasks: &mut JoinSet<(String, AdapterExit)>,
    handles: &mut Vec<(String, AbortHandle)>,
) {
    let Outbound::Open { outbox, senders } = outbound else {
        return;
    };
    for (adapter, sender) in std::mem::take(senders) {
        let name = format!("outbox:{adapter}");
        let (outbox, rx) = (outbox.clone(), shutdown.clone());
        let connected = registry.get(&adapter).map(|hb| hb.connections());
        let work = async move {
            worker::run(adapter, sender, outbox, connected, rx).await;
            AdapterExit::Shutdown
        };
        let handle = tasks.spawn(
            super::component::supervised(name.clone(), None, work)
                .instrument(Component::Outbox.span()),
        );
        handles.push((name, handle));
    }
}

/// Each delivering cron job's last delivery, for the state file and `status`.
pub(super) fn cron_deliveries(outbound: &Outbound, jobs: &[CronSpec]) -> Vec<Delivery> {
    let Some(outbox) = outbound.outbox() else {
        return vec![];
    };
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
    outbound: &Outbound,
    shutdown: &watch::Receiver<bool>,
    tasks: &mut JoinSet<(String, AdapterExit)>,
    handles: &mut Vec<(String, AbortHandle)>,
) -> Result<Arc<api::Connections>, GatewayError> {
    let bound = api::bind(&profile.api_socket())?;
    let messages: Arc<dyn api::Messages> = match outbound {
        Outbound::Open { outbox, .. } => outbox.clone(),
        Outbound::Unavailable(why) => Arc::new(api::NoOutbox::new(why.clone())),
    };
    let state = api::ApiState::new(profile, spool, messages);
    let connections = state.connections();
    let rx = shutdown.clone();
    let work = async move {
        match bound.serve(state, rx).await {
            Ok(()) => AdapterExit::Shutdown,
            // A restart, as a panic would be.
            Err(e) => AdapterExit::Crashed(format!(
                "the agent API failed: {}",
                crate::error_chain::one_line(&e)
            )),
        }
    };
    let handle = tasks.spawn(
        super::component::supervised("api".to_owned(), None, work)
            .instrument(Component::Api.span()),
    );
    handles.push(("api".to_owned(), handle));
    Ok(connections)
}

//! The sending half of a gateway: the outbox, with a sender for every adapter that can send.
//! Kept apart from the adapters' start so that sending never holds up receiving: an outbox
//! that cannot be opened (its journal a link, a FIFO, unreadable) leaves the gateway
//! receiving, with the outbox marked unavailable and the reason in the API's answers, the
//! state file, `status` and doctor (HSV022).

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Secret;
use crate::gateway::adapter::Shared;
use crate::gateway::outbox::{Outbox, Route, Stats};
use crate::gateway::state_file::Delivery;
use crate::platform::{AdapterSpec, CronSpec, Sender};
use crate::profile::Profile;

/// The outbox as this run has it.
pub(super) enum Outbound {
    Open(Arc<Outbox>),
    /// Why it could not be opened, with the fix: nothing is sent this run.
    Unavailable(String),
}

impl Outbound {
    pub(super) fn outbox(&self) -> Option<&Arc<Outbox>> {
        match self {
            Outbound::Open(outbox) => Some(outbox),
            Outbound::Unavailable(_) => None,
        }
    }

    /// The outbox for a front end, or why there is none.
    pub(super) fn for_frontend(&self) -> Result<Arc<Outbox>, String> {
        match self {
            Outbound::Open(outbox) => Ok(outbox.clone()),
            Outbound::Unavailable(why) => Err(why.clone()),
        }
    }

    /// The outbox at a glance for the state file: its figures, or why there are none.
    pub(super) fn stats(&self) -> Stats {
        match self {
            Outbound::Open(outbox) => outbox.stats(),
            Outbound::Unavailable(why) => Stats::unavailable(why.clone()),
        }
    }
}

/// Open the profile's outbox, with a route for every adapter that can send (the run starts
/// each one's worker with a sender of its own); an outbox that
/// cannot be opened is [`Outbound::Unavailable`], logged as an error, and never stops the run.
pub(super) fn open(
    profile: &Profile,
    adapters: &[(AdapterSpec, Vec<Secret>)],
    shared: &Shared,
) -> Outbound {
    let senders: Vec<(String, Sender)> = adapters
        .iter()
        .filter_map(|(spec, secret)| {
            Sender::new(spec, secret, shared).map(|s| (spec.name.clone(), s))
        })
        .collect();
    let routes: HashMap<String, Route> = senders
        .iter()
        .map(|(name, sender)| (name.clone(), sender.route()))
        .collect();
    match Outbox::open(&profile.outbox_dir(), routes) {
        Ok(outbox) => Outbound::Open(Arc::new(outbox)),
        Err(e) => {
            let why = e.with_fix();
            tracing::error!(reason = %why, "the outbox is unavailable; receiving goes on, and nothing is sent until it is fixed and the gateway restarted");
            Outbound::Unavailable(why)
        }
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

//! Who is in the profile's cluster, and how far each member's wall clock is from this one's.
//!
//! Every member, active or standby, keeps a record under the profile (`node/NODE`: its node
//! name, a hash of its machine, its pid and its wall-clock time), under a lease of its own, so
//! a member that is gone leaves the list within three refreshes. It writes the record again
//! every lease TTL and watches the others'. The moment a peer's record arrives, the peer's
//! clock said `wall_ms` and this one says now: the difference is the skew between the two,
//! off by no more than the delay through etcd (milliseconds on a LAN). Fencing does not read
//! wall clocks (docs/cluster.md), but people compare times across hosts in logs and `status`,
//! and a skew is what a host whose time service failed looks like: doctor warns (HSV027).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etcd_client::{EventType, GetOptions, PutOptions, WatchOptions};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use super::etcd::{Retry, Until};
use super::{Claim, Etcd, Keys};
use crate::gateway::state_file::PeerHealth;

/// One member's record.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    node: String,
    machine: String,
    pid: u32,
    /// Its wall clock when it wrote this, milliseconds since the epoch.
    wall_ms: i64,
}

/// The other members, as last seen: shared between the task that watches them and the
/// state file that shows them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Peers(Arc<Mutex<BTreeMap<String, PeerHealth>>>);

impl Peers {
    pub(crate) fn snapshot(&self) -> Vec<PeerHealth> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, PeerHealth>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// This member's record, kept and watched until dropped.
pub(crate) struct Presence {
    task: JoinHandle<()>,
}

impl Presence {
    /// Register `claim`'s member of `keys`' profile, writing its record every `every`, and
    /// keep `peers` up to date.
    pub(crate) fn start(
        etcd: Etcd,
        keys: &Keys,
        claim: &Claim,
        every: Duration,
        peers: Peers,
    ) -> Presence {
        let me = Record {
            node: claim.node.clone(),
            machine: claim.machine.clone(),
            pid: claim.pid,
            wall_ms: 0,
        };
        let prefix = keys.nodes.clone();
        Presence {
            task: tokio::spawn(keep(etcd, prefix, me, every, peers)),
        }
    }
}

impl Drop for Presence {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Register and watch for ever; a failure (etcd unreachable) is tried again a refresh later,
/// and says nothing: the lease's keeper and the campaign already report etcd's state.
async fn keep(etcd: Etcd, prefix: String, mut me: Record, every: Duration, peers: Peers) {
    loop {
        if let Err(e) = rounds(&etcd, &prefix, &mut me, every, &peers).await {
            tracing::debug!(error = %e, "cluster presence: etcd failed; trying again");
        }
        tokio::time::sleep(every).await;
    }
}

async fn rounds(
    etcd: &Etcd,
    prefix: &str,
    me: &mut Record,
    every: Duration,
    peers: &Peers,
) -> Result<(), etcd_client::Error> {
    let key = format!("{prefix}{}", me.node);
    let secs = (every.as_secs() as i64 * 3).max(3);
    let lease = etcd
        .call(Retry::Unsent, Until::OneRound, |mut c| async move {
            c.lease_grant(secs, None).await
        })
        .await?
        .id();
    // Who is there already: their skew is unknown until their next record arrives.
    let start = etcd
        .call(Retry::Idempotent, Until::OneRound, |mut c| async move {
            c.get(prefix, Some(GetOptions::new().with_prefix())).await
        })
        .await?;
    {
        let mut known = peers.lock();
        known.clear();
        for kv in start.kvs() {
            if let Ok(r) = serde_json::from_slice::<Record>(kv.value()) {
                if r.node != me.node || r.machine != me.machine {
                    known.insert(r.node.clone(), peer(&r, None));
                }
            }
        }
    }
    let from = start.header().map_or(0, |h| h.revision()) + 1;
    let options = WatchOptions::new().with_prefix().with_start_revision(from);
    let mut stream = etcd
        .call(Retry::Idempotent, Until::OneRound, |mut c| {
            let options = options.clone();
            async move { c.watch(prefix, Some(options)).await }
        })
        .await?;
    loop {
        etcd.call(Retry::Idempotent, Until::OneRound, |mut c| async move {
            c.lease_keep_alive(lease).await
        })
        .await?;
        me.wall_ms = wall_ms() + crate::test_hook::cluster_clock_skew_ms();
        let value = serde_json::to_vec(&*me).expect("a record serialises");
        etcd.call(Retry::Idempotent, Until::OneRound, |mut c| {
            let value = value.clone();
            let key = key.as_str();
            async move {
                c.put(key, value, Some(PutOptions::new().with_lease(lease)))
                    .await
            }
        })
        .await?;
        let until = tokio::time::Instant::now() + every;
        loop {
            let answer = tokio::select! {
                _ = tokio::time::sleep_until(until) => break,
                a = stream.message() => a?,
            };
            let Some(answer) = answer else {
                return Err(etcd_client::Error::WatchError("the watch ended".into()));
            };
            let now = wall_ms();
            let mut known = peers.lock();
            for event in answer.events() {
                let Some(kv) = event.kv() else { continue };
                let node = kv
                    .key_str()
                    .unwrap_or_default()
                    .trim_start_matches(prefix)
                    .to_owned();
                if event.event_type() == EventType::Delete {
                    known.remove(&node);
                    continue;
                }
                let Ok(r) = serde_json::from_slice::<Record>(kv.value()) else {
                    continue;
                };
                if r.node == me.node && r.machine == me.machine {
                    continue;
                }
                known.insert(r.node.clone(), peer(&r, Some(r.wall_ms - now)));
            }
        }
    }
}

fn peer(r: &Record, skew_ms: Option<i64>) -> PeerHealth {
    PeerHealth {
        node: r.node.clone(),
        machine: r.machine.clone(),
        skew_ms,
    }
}

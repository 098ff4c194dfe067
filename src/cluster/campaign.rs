//! Becoming the active: take every key in one transaction, or stand by until they go.

use std::time::{Duration, Instant};

use etcd_client::{
    Compare, CompareOp, EventType, PutOptions, Txn, TxnOp, TxnOpResponse, WatchFilterType,
    WatchOptions,
};
use tokio::sync::watch;

use super::etcd::{Retry, Until};
use super::{Claim, Etcd, Keys, Term};
use crate::config::ClusterSpec;
use crate::gateway::fence::Fence;

/// How a cluster member stands while it is not active.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Another gateway holds the keys (`active`, the first held key's claim). `clash`: it is
    /// another machine that goes by this node's name.
    Standby { active: Claim, clash: bool },
    /// etcd could not be asked: why, naming the endpoints.
    Unreachable(String),
}

impl Standing {
    /// For `STATUS=` and the state file.
    pub(crate) fn describe(&self) -> String {
        match self {
            Standing::Standby {
                active,
                clash: false,
            } => {
                format!("standby (active: {})", active.describe())
            }
            Standing::Standby {
                active,
                clash: true,
            } => format!(
                "standby (active: {}; another machine has this node's name)",
                active.describe()
            ),
            Standing::Unreachable(why) => format!("standby (campaigning: {why})"),
        }
    }
}

/// What one attempt found.
enum Attempt {
    Won(Term),
    Held { active: Claim, revision: i64 },
}

/// Campaign until this gateway is the active, saying how it stands meanwhile in `report`.
/// It never gives up: an unreachable etcd, a lost quorum, are reported and retried, so a
/// gateway whose cluster is down waits as a healthy standby rather than flapping. Once another
/// active was seen, a takeover waits `takeover-delay` after its keys are gone.
pub(crate) async fn campaign(
    etcd: &Etcd,
    spec: &ClusterSpec,
    keys: &Keys,
    claim: &Claim,
    fence: &Fence,
    report: &watch::Sender<Option<Standing>>,
) -> Term {
    let endpoints = spec.endpoints.join(", ");
    let mut backoff = Duration::from_millis(250);
    loop {
        match attempt(etcd, spec, keys, claim, fence).await {
            Ok(Attempt::Won(term)) => return term,
            Ok(Attempt::Held { active, revision }) => {
                backoff = Duration::from_millis(250);
                let clash = active.clashes_with(&claim.node);
                if clash {
                    tracing::error!(node = %claim.node, "another machine has this node's name; give each host its own [cluster] node");
                }
                tracing::info!(active = %active.describe(), "standing by");
                report.send_replace(Some(Standing::Standby { active, clash }));
                // Re-asked at least once a lease, so a missed event costs one lease at most.
                let gone =
                    tokio::time::timeout(spec.lease_ttl, keys_gone(etcd, keys, revision + 1)).await;
                if let Ok(Ok(())) = gone {
                    tokio::time::sleep(spec.takeover_delay).await;
                }
            }
            Err(e) => {
                let why = format!("etcd at {endpoints}: {}", crate::error_chain::one_line(&e));
                tracing::warn!(reason = %why, "cannot campaign");
                report.send_replace(Some(Standing::Unreachable(why)));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(spec.lease_ttl / 2);
            }
        }
    }
}

/// One try: a fresh lease, then every key or none in one transaction.
async fn attempt(
    etcd: &Etcd,
    spec: &ClusterSpec,
    keys: &Keys,
    claim: &Claim,
    fence: &Fence,
) -> Result<Attempt, etcd_client::Error> {
    let ttl = spec.lease_ttl;
    let asked = Instant::now();
    let secs = ttl.as_secs() as i64;
    // A grant sent twice leaves a lease nobody renews, gone within a TTL: harmless, but not
    // worth a second try on a member that may have granted it.
    let lease = etcd
        .call(Retry::Unsent, Until::OneRound, |mut c| async move {
            c.lease_grant(secs, None).await
        })
        .await?
        .id();
    let mut granted = Granted {
        etcd,
        lease,
        settled: false,
    };
    // The term begins now, if it begins: not when the campaign did.
    let claim = &Claim::now(&claim.node, &claim.profile);
    let value = serde_json::to_vec(claim).expect("a claim serialises");
    let free: Vec<Compare> = keys
        .all()
        .map(|k| Compare::create_revision(k.as_str(), CompareOp::Equal, 0))
        .collect();
    let take: Vec<TxnOp> = keys
        .all()
        .map(|k| {
            TxnOp::put(
                k.as_str(),
                value.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )
        })
        .collect();
    let look: Vec<TxnOp> = keys.all().map(|k| TxnOp::get(k.as_str(), None)).collect();
    let txn = Txn::new().when(free).and_then(take).or_else(look);
    // Sent again only where no member had it: a take applied once and tried again would
    // find the keys held, by this very claim.
    let take = etcd
        .call(Retry::Unsent, Until::OneRound, |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
        .await;
    let answer = match take {
        Ok(a) => a,
        Err(e) => {
            // It may have been applied: without renewals the keys go with the lease.
            granted.settled = true;
            revoke(etcd, lease).await;
            return Err(e);
        }
    };
    granted.settled = true;
    if answer.succeeded() {
        let revision = answer.header().map_or(0, |h| h.revision());
        let term = Term::begin(
            etcd.clone(),
            lease,
            revision,
            ttl,
            asked,
            claim.clone(),
            fence.clone(),
        );
        tracing::info!(node = %claim.node, lease, "active: took the cluster's keys");
        return Ok(Attempt::Won(term));
    }
    revoke(etcd, lease).await;
    let revision = answer.header().map_or(0, |h| h.revision());
    let active = answer
        .op_responses()
        .into_iter()
        .find_map(|r| match r {
            TxnOpResponse::Get(get) => get
                .kvs()
                .first()
                .and_then(|kv| serde_json::from_slice::<Claim>(kv.value()).ok()),
            _ => None,
        })
        .unwrap_or_else(|| Claim {
            node: "(unreadable claim)".into(),
            profile: String::new(),
            pid: 0,
            since: 0,
            machine: String::new(),
        });
    Ok(Attempt::Held { active, revision })
}

/// A lease granted for a take, let go unless the take was settled: a campaign dropped in the
/// middle of one (a standby's reload of `[cluster]` starts it again) must not leave keys held
/// under a lease that nobody renews, which would keep every standby waiting for it to run out.
struct Granted<'a> {
    etcd: &'a Etcd,
    lease: i64,
    settled: bool,
}

impl Drop for Granted<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.etcd.revoke_in_background(self.lease);
        }
    }
}

/// Wait until one of `keys` is deleted (released, or expired with its lease), from `revision`
/// on, so that a deletion between the failed take and the watch is not missed.
async fn keys_gone(etcd: &Etcd, keys: &Keys, revision: i64) -> Result<(), etcd_client::Error> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(revision)
        .with_filters([WatchFilterType::NoPut]);
    let mut stream = etcd
        .call(Retry::Idempotent, Until::OneRound, |mut c| {
            let options = options.clone();
            async move { c.watch(Keys::watch_prefix(), Some(options)).await }
        })
        .await?;
    while let Some(answer) = stream.message().await? {
        if answer.canceled() {
            return Err(etcd_client::Error::WatchError(format!(
                "the watch was cancelled: {}",
                answer.cancel_reason()
            )));
        }
        let ours = answer.events().iter().any(|e| {
            e.event_type() == EventType::Delete
                && e.kv()
                    .is_some_and(|kv| keys.all().any(|k| k.as_bytes() == kv.key()))
        });
        if ours {
            return Ok(());
        }
    }
    Err(etcd_client::Error::WatchError("the watch ended".into()))
}

/// Let `lease` go, and with it whatever keys a take may have put under it. Failing that,
/// nobody renews it: it runs out within its TTL.
async fn revoke(etcd: &Etcd, lease: i64) {
    let _ = etcd
        .call(Retry::Idempotent, Until::OneRound, |mut c| async move {
            c.lease_revoke(lease).await
        })
        .await;
}

//! A won term: the lease kept alive, the fence moved with each renewal, and the loss said.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, LeaseKeepAliveStream, LeaseKeeper, PutOptions, Txn, TxnOp};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::etcd::{Member, Retry, Until};
use super::replica::EtcdReplica;
use super::{Claim, Etcd, Keys};
use crate::gateway::fence::Fence;

/// The active's hold on its keys, until it is lost or released.
pub(crate) struct Term {
    etcd: Etcd,
    lease: i64,
    /// The revision the term's keys were created at: what its writes compare.
    revision: i64,
    claim: Claim,
    fence: Fence,
    lost: watch::Receiver<Option<String>>,
    /// What ends the term, for the replica to end it too.
    tell: watch::Sender<Option<String>>,
    renewed: Arc<Mutex<Instant>>,
    keeper: JoinHandle<()>,
}

impl Term {
    /// Keep `lease`, under which the keys were created at `revision`, alive from now on;
    /// `granted` is when its grant was asked for, which is no later than etcd started
    /// counting it.
    pub(crate) fn begin(
        etcd: Etcd,
        lease: i64,
        revision: i64,
        ttl: Duration,
        granted: Instant,
        claim: Claim,
        fence: Fence,
    ) -> Term {
        fence.hold_until(granted + ttl - margin(ttl));
        let (tell, lost) = watch::channel(None);
        let renewed = Arc::new(Mutex::new(granted));
        let keeper = tokio::spawn(keep(
            etcd.clone(),
            lease,
            ttl,
            fence.clone(),
            renewed.clone(),
            tell.clone(),
        ));
        Term {
            etcd,
            lease,
            revision,
            claim,
            fence,
            lost,
            tell,
            renewed,
            keeper,
        }
    }

    /// Resolves, with why, once the fence has closed: the lease was not renewed in time, or
    /// etcd said it is gone.
    pub(crate) async fn lost(&mut self) -> String {
        loop {
            if let Some(why) = self.lost.borrow_and_update().clone() {
                return why;
            }
            if self.lost.changed().await.is_err() {
                return "the lease's keeper ended".into();
            }
        }
    }

    /// Stop acting, then free the keys at once for a standby (a clean stop). A revoke that
    /// fails leaves the keys to expire with the lease, which the fence already respects.
    pub(crate) async fn release(self) {
        self.fence.close();
        self.keeper.abort();
        let lease = self.lease;
        let within = Duration::from_secs(2);
        let revoke = self.etcd.call(
            Retry::Idempotent,
            Until::At(Instant::now() + within),
            |mut c| async move { c.lease_revoke(lease).await },
        );
        match tokio::time::timeout(within, revoke).await {
            Ok(Ok(_)) => tracing::info!(lease = self.lease, "released the cluster's keys"),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "failed to revoke the lease; the keys expire with it")
            }
            Err(_) => tracing::warn!("revoking the lease timed out; the keys expire with it"),
        }
    }

    /// Hold `keys` from now on under a fresh lease of `ttl`, with `claim` as their value: a
    /// reload of `lease-ttl` or `node` on the active, which goes on acting throughout.
    ///
    /// One transaction moves every key to the new lease, guarded by the active key's create
    /// revision and lease being this term's, so it moves the keys only while they are ours;
    /// the old lease is revoked after, and frees nothing. A transaction whose answer was lost
    /// is read back: the active key's lease says which lease holds the keys. Where even that
    /// cannot be read, no keeper can be sure to keep the right lease, so the term ends (the
    /// fence closes, the run starts again and campaigns): two actives are never risked.
    pub(crate) async fn hand_over(
        &mut self,
        keys: &Keys,
        ttl: Duration,
        claim: Claim,
    ) -> Result<(), String> {
        // A term that has ended is not moved: the run is stopping, and a standby may hold
        // the keys already.
        if !self.fence.holds() {
            return Err("the term has ended: this run no longer holds the keys".into());
        }
        let etcd = self.etcd.clone();
        let asked = Instant::now();
        let secs = ttl.as_secs() as i64;
        let fence = &self.fence;
        let lease = etcd
            .call(Retry::Unsent, Until::Fence(fence), |mut c| async move {
                c.lease_grant(secs, None).await
            })
            .await
            .map_err(|e| format!("etcd granted no new lease: {}", one_line(&e)))?
            .id();
        let value = serde_json::to_vec(&claim).expect("a claim serialises");
        let ours = [
            Compare::create_revision(keys.active.as_str(), CompareOp::Equal, self.revision),
            Compare::lease(keys.active.as_str(), CompareOp::Equal, self.lease),
        ];
        let moved: Vec<TxnOp> = keys
            .all()
            .map(|k| {
                let options = PutOptions::new().with_lease(lease);
                TxnOp::put(k.as_str(), value.clone(), Some(options))
            })
            .collect();
        let txn = Txn::new().when(ours).and_then(moved);
        let answer = etcd
            .call(Retry::Unsent, Until::Fence(fence), |mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await;
        let moved = match answer {
            Ok(answer) => answer.succeeded(),
            Err(e) => match self.holder_of(keys).await {
                Some(holder) => holder == lease,
                None => {
                    let why = format!(
                        "the move of the keys to a new lease (a reload) was not answered \
                         ({}), and which lease holds them could not be read",
                        one_line(&e)
                    );
                    self.fence.close();
                    let _ = self.tell.send(Some(why.clone()));
                    return Err(why);
                }
            },
        };
        if !moved {
            etcd.revoke_in_background(lease);
            return Err("the keys are no longer this term's: the term is ending".into());
        }
        self.keeper.abort();
        let old = std::mem::replace(&mut self.lease, lease);
        self.claim = claim;
        self.fence.hold_until(asked + ttl - margin(ttl));
        *self
            .renewed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = asked;
        self.keeper = tokio::spawn(keep(
            etcd.clone(),
            lease,
            ttl,
            self.fence.clone(),
            self.renewed.clone(),
            self.tell.clone(),
        ));
        etcd.revoke_in_background(old);
        tracing::info!(node = %self.claim.node, lease, ttl = ?ttl, "moved the cluster's keys to a new lease");
        Ok(())
    }

    /// Whether `other` (a reload's new endpoints) reaches the etcd cluster this term's lease
    /// lives in: a lease is one cluster's, and a term moved to endpoints that do not know it
    /// would end there at its first renewal.
    pub(crate) async fn known_to(&self, other: &Etcd) -> Result<(), String> {
        let lease = self.lease;
        let answer = other
            .call(Retry::Idempotent, Until::OneRound, |mut c| async move {
                c.lease_time_to_live(lease, None).await
            })
            .await
            .map_err(|e| format!("the new endpoints did not answer: {}", one_line(&e)))?;
        if answer.ttl() > 0 {
            Ok(())
        } else {
            Err(format!(
                "the new endpoints are another etcd cluster: the lease this run holds its \
                 keys under ({lease:x}) is unknown there"
            ))
        }
    }

    /// Every holder of the term's client asks `other`'s members from now on.
    pub(crate) fn ask(&self, other: &Etcd) {
        self.etcd.replace_members(other);
    }

    /// The lease the active key is held under, as etcd says now; none when it cannot say.
    async fn holder_of(&self, keys: &Keys) -> Option<i64> {
        let key = keys.active.as_str();
        let got = self
            .etcd
            .call(
                Retry::Idempotent,
                Until::Fence(&self.fence),
                |mut c| async move { c.get(key, None).await },
            )
            .await
            .ok()?;
        Some(got.kvs().first().map_or(0, |kv| kv.lease()))
    }

    /// The inbound replica this term may write, under `keys`.
    pub(crate) fn replica(&self, keys: &Keys) -> EtcdReplica {
        EtcdReplica::new(
            self.etcd.clone(),
            keys,
            self.revision,
            self.fence.clone(),
            self.tell.clone(),
        )
    }

    /// The term's client, shared with its keeper and replicas.
    pub(crate) fn etcd(&self) -> Etcd {
        self.etcd.clone()
    }

    pub(crate) fn claim(&self) -> &Claim {
        &self.claim
    }

    /// How long ago the lease was last renewed.
    pub(crate) fn lease_age(&self) -> Duration {
        self.renewed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .elapsed()
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

fn one_line(e: &etcd_client::Error) -> String {
    crate::error_chain::one_line(e)
}

/// What is left of the lease when the active stops acting: a third of it.
pub(crate) fn margin(ttl: Duration) -> Duration {
    ttl / 3
}

/// How often the lease is renewed: a fifth of its TTL, and every second at most. After an
/// etcd leader dies, no renewal is answered until the election ends (etcd takes 1 to 3.4 s),
/// and the fence falls at the last answered renewal's send time plus two thirds of the TTL:
/// so what is left of the lease when the leader dies is two thirds of it less up to one
/// interval, and the shorter the interval, the longer an election the term survives.
fn renew_every(ttl: Duration) -> Duration {
    (ttl / 5).min(Duration::from_secs(1))
}

/// The keep-alive stream, and the member it was opened on.
struct Stream {
    member: Member,
    keeper: LeaseKeeper,
    answers: LeaseKeepAliveStream,
}

/// Renew `lease` every [`renew_every`], each request bounded by the next renewal or the
/// fence, whichever is sooner. A renewal moves the fence to its send time plus the TTL etcd
/// granted, less the margin: etcd counts from when it received the request, which is later.
/// A renewal that fails is sent again at once, on a new stream on the next member: the next
/// tick would spend a part of the fence's time for nothing. Once the fence is reached
/// unrenewed, or etcd says the lease is gone, close the fence and say why.
async fn keep(
    etcd: Etcd,
    lease: i64,
    ttl: Duration,
    fence: Fence,
    renewed: Arc<Mutex<Instant>>,
    tell: watch::Sender<Option<String>>,
) {
    let every = renew_every(ttl);
    let mut stream: Option<Stream> = None;
    let mut last_error = String::from("no renewal answered");
    let mut failing = false;
    let mut next = Instant::now() + every;
    loop {
        let Some(fence_at) = fence.until() else {
            return;
        };
        let wake = next.min(fence_at);
        tokio::time::sleep_until(wake.into()).await;
        let age = || {
            renewed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .elapsed()
        };
        if Instant::now() >= fence_at {
            fence.close();
            let why = format!(
                "the etcd lease was not renewed for {} (last error: {last_error}); stopped with {} of it left",
                humantime::format_duration(Duration::from_millis(age().as_millis() as u64)),
                humantime::format_duration(margin(ttl)),
            );
            let _ = tell.send(Some(why));
            return;
        }
        // The members were replaced (a reload): renew on the new ones.
        if stream.as_ref().is_some_and(|s| !etcd.is_current(s.member)) {
            stream = None;
        }
        let sent = Instant::now();
        next = sent + every;
        let bound = next.min(fence_at);
        let renewal = renew(&etcd, lease, ttl, &mut stream, bound);
        let failed = match tokio::time::timeout_at(bound.into(), renewal).await {
            Ok(Ok(granted)) if granted > 0 => {
                if failing {
                    failing = false;
                    let unrenewed = Duration::from_millis(age().as_millis() as u64);
                    tracing::info!(unrenewed = %humantime::format_duration(unrenewed), "renewed the etcd lease again");
                }
                let granted = Duration::from_secs(granted as u64);
                fence.hold_until(sent + granted - margin(granted));
                *renewed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = sent;
                None
            }
            Ok(Ok(_)) => Some("etcd says the lease has expired".to_string()),
            Ok(Err(e)) => Some(crate::error_chain::one_line(&e)),
            Err(_) => Some(format!(
                "no answer within {}",
                humantime::format_duration(bound.saturating_duration_since(sent))
            )),
        };
        let Some(error) = failed else { continue };
        if let Some(broken) = stream.take() {
            etcd.failed(broken.member, &error);
        }
        // etcd let the lease go: nothing can renew it now.
        if error.contains("lease has expired") || error.contains("lease not found") {
            fence.close();
            let _ = tell.send(Some("etcd says the lease has expired".into()));
            return;
        }
        tracing::warn!(%error, "failed to renew the etcd lease; trying the next member at once");
        last_error = error;
        failing = true;
        next = Instant::now();
    }
}

/// One renewal, on the open stream or on a new one (opening it renews the lease), on the
/// first member that answers before `until`: what TTL etcd granted.
async fn renew(
    etcd: &Etcd,
    lease: i64,
    ttl: Duration,
    stream: &mut Option<Stream>,
    until: Instant,
) -> Result<i64, etcd_client::Error> {
    if let Some(open) = stream.as_mut() {
        open.keeper.keep_alive().await?;
        return match open.answers.message().await? {
            Some(answer) => Ok(answer.ttl()),
            None => Err(etcd_client::Error::LeaseKeepAliveError(
                "the renewal stream ended".into(),
            )),
        };
    }
    let (member, (keeper, answers)) = etcd
        .call_on(Retry::Idempotent, Until::At(until), |mut c| async move {
            c.lease_keep_alive(lease).await
        })
        .await?;
    *stream = Some(Stream {
        member,
        keeper,
        answers,
    });
    Ok(ttl.as_secs() as i64)
}

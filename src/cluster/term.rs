//! A won term: the lease kept alive, the fence moved with each renewal, and the loss said.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::replica::EtcdReplica;
use super::{Claim, Keys};
use crate::gateway::fence::Fence;

/// The active's hold on its keys, until it is lost or released.
pub(crate) struct Term {
    client: Client,
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
        client: Client,
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
            client.clone(),
            lease,
            ttl,
            fence.clone(),
            renewed.clone(),
            tell.clone(),
        ));
        Term {
            client,
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
        let mut client = self.client.clone();
        match tokio::time::timeout(Duration::from_secs(2), client.lease_revoke(self.lease)).await {
            Ok(Ok(_)) => tracing::info!(lease = self.lease, "released the cluster's keys"),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "failed to revoke the lease; the keys expire with it")
            }
            Err(_) => tracing::warn!("revoking the lease timed out; the keys expire with it"),
        }
    }

    /// The inbound replica this term may write, under `keys`.
    pub(crate) fn replica(&self, keys: &Keys) -> EtcdReplica {
        EtcdReplica::new(
            self.client.clone(),
            keys,
            self.revision,
            self.fence.clone(),
            self.tell.clone(),
        )
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

/// What is left of the lease when the active stops acting: a third of it.
pub(crate) fn margin(ttl: Duration) -> Duration {
    ttl / 3
}

/// Renew `lease` every fifth of its TTL, each request bounded by the next renewal or the
/// fence, whichever is sooner. A renewal moves the fence to its send time plus the TTL etcd
/// granted, less the margin: etcd counts from when it received the request, which is later.
/// Once the fence is reached unrenewed, or etcd says the lease is gone, close the fence and say
/// why.
async fn keep(
    mut client: Client,
    lease: i64,
    ttl: Duration,
    fence: Fence,
    renewed: Arc<Mutex<Instant>>,
    tell: watch::Sender<Option<String>>,
) {
    let every = ttl / 5;
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    let mut last_error = String::from("no renewal answered");
    let mut next = Instant::now() + every;
    loop {
        let Some(fence_at) = fence.until() else {
            return;
        };
        let wake = next.min(fence_at);
        tokio::time::sleep_until(wake.into()).await;
        if Instant::now() >= fence_at {
            fence.close();
            let age = renewed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .elapsed();
            let why = format!(
                "the etcd lease was not renewed for {} (last error: {last_error}); stopped with {} of it left",
                humantime::format_duration(Duration::from_millis(age.as_millis() as u64)),
                humantime::format_duration(margin(ttl)),
            );
            let _ = tell.send(Some(why));
            return;
        }
        let sent = Instant::now();
        next = sent + every;
        let renewal = async {
            if stream.is_none() {
                // Opening the stream sends the first renewal and reads its answer.
                let (keeper, s) = client.lease_keep_alive(lease).await?;
                stream = Some((keeper, s));
                return Ok(Some(ttl.as_secs() as i64));
            }
            let (keeper, s) = stream.as_mut().expect("opened above");
            keeper.keep_alive().await?;
            Ok::<_, etcd_client::Error>(s.message().await?.map(|r| r.ttl()))
        };
        let failed = match tokio::time::timeout_at(next.min(fence_at).into(), renewal).await {
            Ok(Ok(Some(granted))) if granted > 0 => {
                let granted = Duration::from_secs(granted as u64);
                fence.hold_until(sent + granted - margin(granted));
                *renewed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = sent;
                None
            }
            Ok(Ok(Some(_))) => Some("etcd says the lease has expired".to_string()),
            Ok(Ok(None)) => Some("the renewal stream ended".into()),
            Ok(Err(e)) => Some(crate::error_chain::one_line(&e)),
            Err(_) => Some(format!(
                "no answer within {}",
                humantime::format_duration(every)
            )),
        };
        let Some(error) = failed else { continue };
        stream = None;
        // etcd let the lease go: nothing can renew it now.
        if error.contains("lease has expired") || error.contains("lease not found") {
            fence.close();
            let _ = tell.send(Some("etcd says the lease has expired".into()));
            return;
        }
        tracing::warn!(%error, "failed to renew the etcd lease");
        last_error = error;
    }
}

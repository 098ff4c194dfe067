//! The inbound replica in etcd: one key per adapter under the profile, written by the active
//! after every store, and only while its term lasts.
//!
//! Each write is a transaction that compares the profile's active key's create revision with
//! the one this term created it at. A deposed active (its lease expired, a standby took the
//! keys: they were created again, at a later revision) cannot write, and since an adapter
//! acknowledges nothing the replica refused, it cannot acknowledge either. A refusal closes
//! the fence at once and ends the term, whatever the lease's keeper still believes.
//!
//! The value holds the adapter's resume state and the dedupe keys of the last [`KEPT`] events
//! it stored: enough for a successor to drop what a resume replays twice (the one event in
//! flight when the old active went) and what a platform redelivers (Feishu's unacknowledged
//! events). It holds no event's content and no secret.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};
use futures_util::future::BoxFuture;
use tokio::sync::watch;

use crate::gateway::adapter::inbox::ResumeState;
use crate::gateway::fence::Fence;
use crate::gateway::replica::{Inherited, Replica};

/// Dedupe keys kept per adapter: far more than a resume replays twice or a platform
/// redelivers, and a value of about 8 KiB.
pub(crate) const KEPT: usize = 256;

/// Why a write was refused: said by `status`, the log and the run's exit.
const DEPOSED: &str = "another gateway owns the profile in etcd now";

pub(crate) struct EtcdReplica {
    client: Client,
    /// `.../profile/NAME/inbound/`, to which the adapter's name is added.
    prefix: String,
    /// The profile's active key, and the revision this term created it at.
    owner: String,
    revision: i64,
    fence: Fence,
    /// Ends the term, with why.
    deposed: watch::Sender<Option<String>>,
    /// Each adapter's last dedupe keys, oldest first.
    windows: Mutex<HashMap<String, VecDeque<String>>>,
}

impl std::fmt::Debug for EtcdReplica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdReplica")
            .field("prefix", &self.prefix)
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

impl EtcdReplica {
    pub(crate) fn new(
        client: Client,
        prefix: String,
        owner: String,
        revision: i64,
        fence: Fence,
        deposed: watch::Sender<Option<String>>,
    ) -> Self {
        Self {
            client,
            prefix,
            owner,
            revision,
            fence,
            deposed,
            windows: Mutex::default(),
        }
    }

    fn windows(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<String>>> {
        self.windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Replica for EtcdReplica {
    fn load<'a>(&'a self, adapter: &'a str) -> BoxFuture<'a, Result<Inherited, String>> {
        Box::pin(async move {
            let key = format!("{}{adapter}", self.prefix);
            let mut client = self.client.clone();
            let answer = client
                .get(key.as_str(), None)
                .await
                .map_err(|e| format!("etcd: {}", crate::error_chain::one_line(&e)))?;
            let inherited = match answer.kvs().first() {
                None => Inherited::default(),
                Some(kv) => serde_json::from_slice(kv.value()).unwrap_or_else(|e| {
                    tracing::warn!(%key, error = %e, "the cluster's inbound record is unreadable; starting afresh");
                    Inherited::default()
                }),
            };
            let mut window: VecDeque<String> = inherited.stored.iter().cloned().collect();
            while window.len() > KEPT {
                window.pop_front();
            }
            self.windows().insert(adapter.to_owned(), window);
            Ok(inherited)
        })
    }

    fn record<'a>(
        &'a self,
        adapter: &'a str,
        resume: Option<&'a ResumeState>,
        stored: &'a [String],
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            if !self.fence.holds() {
                return Err("fenced: the cluster's lease may be gone".into());
            }
            let value = {
                let mut windows = self.windows();
                let window = windows.entry(adapter.to_owned()).or_default();
                window.extend(stored.iter().cloned());
                while window.len() > KEPT {
                    window.pop_front();
                }
                serde_json::to_vec(&Inherited {
                    resume: resume.cloned(),
                    stored: window.iter().cloned().collect(),
                })
                .map_err(|e| e.to_string())?
            };
            let key = format!("{}{adapter}", self.prefix);
            let ours =
                Compare::create_revision(self.owner.as_str(), CompareOp::Equal, self.revision);
            let txn = Txn::new()
                .when([ours])
                .and_then([TxnOp::put(key, value, None)]);
            let mut client = self.client.clone();
            let answer = client
                .txn(txn)
                .await
                .map_err(|e| format!("etcd: {}", crate::error_chain::one_line(&e)))?;
            if answer.succeeded() {
                return Ok(());
            }
            self.fence.close();
            let _ = self.deposed.send(Some(DEPOSED.into()));
            Err(format!("fenced: {DEPOSED}"))
        })
    }
}

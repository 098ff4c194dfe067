//! The inbound replica in etcd: one key per adapter under the profile, written by the active
//! after every store, and only while its term lasts.
//!
//! Each write is a transaction that compares the profile's active key's create revision with
//! the one this term created it at. A deposed active (its lease expired, a standby took the
//! keys: they were created again, at a later revision) cannot write, and since an adapter
//! acknowledges nothing the replica refused, it cannot acknowledge either. A refusal closes
//! the fence at once and ends the term, whatever the lease's keeper still believes.
//!
//! An inbound value holds the adapter's resume state and the dedupe keys of the last [`KEPT`] events
//! it stored: enough for a successor to drop what a resume replays twice (the one event in
//! flight when the old active went) and what a platform redelivers (events it saw no ack
//! for). It holds no event's content and no secret.
//!
//! The outbox's messages are under `outbox/`, one key per idempotency key (a hash of it), so
//! that a key is taken once across every host: a submit creates its key in the same
//! transaction that checks the owner, and finds the first message when the key exists.
//!
//! Every transaction here may be applied twice with the same result, so one whose member
//! fails goes to the next member at once, while the term's fence holds, rather than end the
//! adapter's connection: a member down, or an election, costs a write its delay, no more.
//! (A put compares the term and writes a value: again, the same value. A submit finds its
//! own message the second time. A delete deletes nothing the second time.) The one case this
//! does not cover: a write that timed out on a member that is alive but slow, and that etcd
//! applies after its retry and after a later write of the same key, would leave the older
//! value. A successor then replays more (its inbound position is older) or sends a message
//! again by its policy: at least once still, never lost.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse, TxnResponse};
use futures_util::future::BoxFuture;
use tokio::sync::watch;

use super::etcd::{Retry, Until};
use super::{Etcd, Keys};
use crate::gateway::fence::Fence;
use crate::gateway::outbox::Message;
use crate::gateway::outbox::MessageReplica;
use crate::gateway::replica::{Inherited, Position, Replica};

/// Dedupe keys kept per adapter: far more than a resume replays twice or a platform
/// redelivers, and a value of about 8 KiB.
pub(crate) const KEPT: usize = 256;

/// Why a write was refused: said by `status`, the log and the run's exit.
const DEPOSED: &str = "another gateway owns the profile in etcd now";

pub(crate) struct EtcdReplica {
    etcd: Etcd,
    /// `.../profile/NAME/inbound/`, to which the adapter's name is added.
    prefix: String,
    /// `.../profile/NAME/outbox/`, to which a hash of the idempotency key is added.
    outbox: String,
    /// The profile's active key, and the revision this term created it at.
    owner: String,
    revision: i64,
    fence: Fence,
    /// Ends the term, with why.
    deposed: watch::Sender<Option<String>>,
    /// Each adapter's last dedupe keys, oldest first.
    windows: Mutex<HashMap<String, VecDeque<String>>>,
    /// Each adapter's last value written: an idle long poll's unchanged cursor is not
    /// written again.
    written: Mutex<HashMap<String, Vec<u8>>>,
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
    /// The replica under `keys`, for the term that created the profile's key at `revision`.
    pub(crate) fn new(
        etcd: Etcd,
        keys: &Keys,
        revision: i64,
        fence: Fence,
        deposed: watch::Sender<Option<String>>,
    ) -> Self {
        Self {
            etcd,
            prefix: keys.inbound.clone(),
            outbox: keys.outbox.clone(),
            owner: keys.active.clone(),
            revision,
            fence,
            deposed,
            windows: Mutex::default(),
            written: Mutex::default(),
        }
    }

    /// The condition of every write: the profile's active key is still this term's.
    fn ours(&self) -> Compare {
        Compare::create_revision(self.owner.as_str(), CompareOp::Equal, self.revision)
    }

    fn message_key(&self, idempotency_key: &str) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(idempotency_key.as_bytes());
        let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        format!("{}{hex}", self.outbox)
    }

    /// Run `txn`, unless the fence has closed; an error names etcd.
    async fn run(&self, txn: Txn) -> Result<TxnResponse, String> {
        if !self.fence.holds() {
            return Err("fenced: the cluster's lease may be gone".into());
        }
        self.etcd
            .call(Retry::Idempotent, Until::Fence(&self.fence), |mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await
            .map_err(|e| format!("etcd: {}", crate::error_chain::one_line(&e)))
    }

    /// Read `key` (all under it, with `prefix`), on any member while the term lasts.
    async fn get(&self, key: &str, prefix: bool) -> Result<etcd_client::GetResponse, String> {
        let options = prefix.then(|| GetOptions::new().with_prefix());
        self.etcd
            .call(Retry::Idempotent, Until::Fence(&self.fence), |mut c| {
                let options = options.clone();
                async move { c.get(key, options).await }
            })
            .await
            .map_err(|e| format!("etcd: {}", crate::error_chain::one_line(&e)))
    }

    /// A write this term may no longer make: another gateway owns the profile. The fence
    /// closes and the term ends.
    fn deposed(&self) -> String {
        self.fence.close();
        let _ = self.deposed.send(Some(DEPOSED.into()));
        format!("fenced: {DEPOSED}")
    }

    /// Write `value` at `key` if this term still owns the profile.
    async fn put_owned(&self, key: String, value: Vec<u8>) -> Result<(), String> {
        let txn = Txn::new()
            .when([self.ours()])
            .and_then([TxnOp::put(key, value, None)]);
        if self.run(txn).await?.succeeded() {
            Ok(())
        } else {
            Err(self.deposed())
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
            let answer = self.get(&key, false).await?;
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
        at: Position<'a>,
        stored: &'a [String],
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let value = {
                let mut windows = self.windows();
                let window = windows.entry(adapter.to_owned()).or_default();
                window.extend(stored.iter().cloned());
                while window.len() > KEPT {
                    window.pop_front();
                }
                serde_json::to_vec(&Inherited {
                    resume: at.session.cloned(),
                    cursor: at.cursor.map(str::to_owned),
                    stored: window.iter().cloned().collect(),
                })
                .map_err(|e| e.to_string())?
            };
            let unchanged =
                |written: &HashMap<String, Vec<u8>>| written.get(adapter) == Some(&value);
            if unchanged(
                &self
                    .written
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            ) {
                return Ok(());
            }
            self.put_owned(format!("{}{adapter}", self.prefix), value.clone())
                .await?;
            self.written
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(adapter.to_owned(), value);
            Ok(())
        })
    }
}

impl MessageReplica for EtcdReplica {
    fn submit<'a>(
        &'a self,
        message: &'a Message,
    ) -> BoxFuture<'a, Result<Option<Message>, String>> {
        Box::pin(async move {
            let key = self.message_key(&message.idempotency_key);
            let value = serde_json::to_vec(message).map_err(|e| e.to_string())?;
            let free = Compare::create_revision(key.as_str(), CompareOp::Equal, 0);
            let txn = Txn::new()
                .when([self.ours(), free])
                .and_then([TxnOp::put(key.as_str(), value, None)])
                .or_else([TxnOp::get(key.as_str(), None)]);
            let answer = self.run(txn).await?;
            if answer.succeeded() {
                return Ok(None);
            }
            let first = answer.op_responses().into_iter().find_map(|r| match r {
                TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.value().to_vec()),
                _ => None,
            });
            match first {
                // The key was free, so the owner check failed.
                None => Err(self.deposed()),
                Some(value) => match serde_json::from_slice::<Message>(&value) {
                    // Our own: a try whose answer was lost, then a try on another member.
                    Ok(found) if found.id == message.id => Ok(None),
                    Ok(found) => Ok(Some(found)),
                    Err(e) => Err(format!("the cluster's message at {key} is unreadable: {e}")),
                },
            }
        })
    }

    fn update<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let value = serde_json::to_vec(message).map_err(|e| e.to_string())?;
            self.put_owned(self.message_key(&message.idempotency_key), value)
                .await
        })
    }

    fn messages(&self) -> BoxFuture<'_, Result<Vec<Message>, String>> {
        Box::pin(async move {
            let answer = self.get(&self.outbox, true).await?;
            let mut messages = vec![];
            for kv in answer.kvs() {
                match serde_json::from_slice(kv.value()) {
                    Ok(m) => messages.push(m),
                    Err(e) => tracing::warn!(
                        key = %String::from_utf8_lossy(kv.key()),
                        error = %e,
                        "the cluster's message is unreadable; skipped"
                    ),
                }
            }
            Ok(messages)
        })
    }

    fn forget<'a>(&'a self, messages: &'a [Message]) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            // etcd takes 128 operations per transaction by default.
            for chunk in messages.chunks(100) {
                let deletes: Vec<TxnOp> = chunk
                    .iter()
                    .map(|m| TxnOp::delete(self.message_key(&m.idempotency_key), None))
                    .collect();
                let txn = Txn::new().when([self.ours()]).and_then(deletes);
                if !self.run(txn).await?.succeeded() {
                    return Err(self.deposed());
                }
            }
            Ok(())
        })
    }
}

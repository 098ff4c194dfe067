//! The outbox's side of a cluster (`[cluster]`, docs/cluster.md): only the active queues, a
//! submit is answered once the replica (etcd) holds the message, and every state change
//! follows it there, so that a successor on another host delivers what this one accepted.

use std::sync::Arc;

use super::journal::Record;
use super::message::Message;
use super::{
    checks::same_request, new_id, new_message, Address, Outbox, OutboxError, Request, SubmitError,
    Submitted, WakeWorker,
};
use futures_util::future::BoxFuture;

/// Where a cluster's active keeps the outbox's messages for its successor on another host
/// (`gateway::replica` keeps the adapters' positions): implemented by the cluster.
pub(crate) trait MessageReplica: Send + Sync + std::fmt::Debug {
    /// Hold `message`, a new one, unless its idempotency key was used: then the message
    /// first queued under it.
    fn submit<'a>(&'a self, message: &'a Message)
        -> BoxFuture<'a, Result<Option<Message>, String>>;

    /// `message` as it stands now. An error means the change must not be acted on.
    fn update<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Result<(), String>>;

    /// Every message held.
    fn messages(&self) -> BoxFuture<'_, Result<Vec<Message>, String>>;

    /// Forget finished `messages`, which the outbox no longer retains.
    fn forget<'a>(&'a self, messages: &'a [Message]) -> BoxFuture<'a, Result<(), String>>;
}

impl Outbox {
    /// This run is a cluster member: it accepts submits only once [`Outbox::inherit`] has
    /// made it the active's outbox. Set before the API starts.
    pub(crate) fn join_cluster(&self) {
        let _ = self.cluster.set(std::sync::OnceLock::new());
    }

    /// This run is its cluster's active: take the replica's messages (what the previous
    /// active left, as it left them) into this host's journal, and from now on keep the
    /// replica up to date. This host's own messages the replica lacks (queued before the
    /// cluster was configured) go into it, and so does how a message ended here when the
    /// replica still has it unfinished (this host died between its journal and etcd).
    pub(crate) async fn inherit(
        &self,
        replica: Arc<dyn MessageReplica>,
    ) -> Result<(), OutboxError> {
        let op = "read the cluster's messages from etcd";
        let held = replica
            .messages()
            .await
            .map_err(|why| OutboxError::Replica { op, why })?;
        let held_ids: std::collections::HashSet<&str> =
            held.iter().map(|m| m.id.as_str()).collect();
        let (taken, own, ahead) = {
            let mut inner = self.lock();
            let (mut taken, mut ahead) = (0, vec![]);
            for message in &held {
                match inner.book.get(&message.id) {
                    Some(mine) if mine == message => {}
                    // This host finished it and went before etcd heard: it is further on.
                    Some(mine) if mine.state.is_final() && !message.state.is_final() => {
                        ahead.push(mine.clone());
                    }
                    _ => {
                        let record = Record::Put {
                            message: Box::new(message.clone()),
                        };
                        self.append(&mut inner, &record)?;
                        taken += 1;
                    }
                }
            }
            let own: Vec<Message> = inner
                .book
                .pending()
                .filter(|m| !held_ids.contains(m.id.as_str()))
                .cloned()
                .collect();
            (taken, own, ahead)
        };
        let failed = |op| move |why| OutboxError::Replica { op, why };
        for message in &own {
            replica
                .submit(message)
                .await
                .map_err(failed("queue this host's messages in etcd"))?;
        }
        for message in &ahead {
            replica
                .update(message)
                .await
                .map_err(failed("record how this host's sends ended in etcd"))?;
        }
        let pos = self.lock().appended;
        self.sync_to(pos).await?;
        if let Some(slot) = self.cluster.get() {
            let _ = slot.set(replica);
        }
        tracing::info!(
            held = held.len(),
            taken,
            added = own.len(),
            finished_here = ahead.len(),
            "the outbox took the cluster's messages"
        );
        self.changed.send_modify(|n| *n += 1);
        Ok(())
    }

    /// The replica this run writes to, if it is a cluster's member; refused when it is not
    /// (or no longer) the active.
    pub(super) fn replica(&self) -> Result<Option<&Arc<dyn MessageReplica>>, SubmitError> {
        let Some(slot) = self.cluster.get() else {
            return Ok(None);
        };
        match slot.get() {
            Some(replica) if self.may_send() => Ok(Some(replica)),
            _ => Err(SubmitError::NotActive),
        }
    }

    /// A submit in a cluster: the replica first, where the key is taken once across every
    /// host, then this host's journal (the first message too, when the key was taken).
    pub(super) async fn submit_in_cluster(
        &self,
        replica: &Arc<dyn MessageReplica>,
        req: Request,
        address: Address,
    ) -> Result<Submitted, SubmitError> {
        let _one_at_a_time = self.cluster_submits.lock().await;
        let candidate = {
            let inner = self.lock();
            match inner.book.by_key(&req.idempotency_key) {
                Some(first) if !same_request(first, &req, &address.target, &[]) => {
                    return Err(SubmitError::KeyReused {
                        key: req.idempotency_key,
                        id: first.id.clone(),
                    })
                }
                // Synced before its own submit was answered: one at a time.
                Some(first) => {
                    return Ok(Submitted {
                        message: first.clone(),
                        new: false,
                    })
                }
                None => new_message(&inner.book, new_id(), req.clone(), address.clone(), vec![]),
            }
        };
        let first = replica
            .submit(&candidate)
            .await
            .map_err(|why| OutboxError::Replica {
                op: "queue the message in etcd",
                why,
            })?;
        let submitted = match first {
            None => Submitted {
                message: candidate,
                new: true,
            },
            Some(first) if !same_request(&first, &req, &address.target, &[]) => {
                return Err(SubmitError::KeyReused {
                    key: req.idempotency_key,
                    id: first.id,
                })
            }
            Some(first) => Submitted {
                message: first,
                new: false,
            },
        };
        let pos = {
            let mut inner = self.lock();
            let record = Record::Put {
                message: Box::new(submitted.message.clone()),
            };
            self.append(&mut inner, &record)?;
            inner.appended
        };
        let wake = WakeWorker(&self.changed);
        self.sync_to(pos).await?;
        drop(wake);
        Ok(submitted)
    }

    /// Write `id` as it stands to the replica, if there is one.
    pub(super) async fn replicate(&self, id: &str, op: &'static str) -> Result<(), OutboxError> {
        let Some(replica) = self.cluster_replica() else {
            return Ok(());
        };
        let Some(message) = self.get(id) else {
            return Ok(());
        };
        replica
            .update(&message)
            .await
            .map_err(|why| OutboxError::Replica { op, why })
    }

    /// The replica, once this run is its cluster's active.
    pub(super) fn cluster_replica(&self) -> Option<&Arc<dyn MessageReplica>> {
        self.cluster.get().and_then(std::sync::OnceLock::get)
    }
}

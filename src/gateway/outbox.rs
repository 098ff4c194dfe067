//! The durable outbox: every message the gateway is asked to send, appended (and fsync'd)
//! before anyone is told it was accepted, and delivered by one worker per adapter.
//!
//! A message is a small state machine, and every transition is a line appended to a journal
//! (`outbox/journal.jsonl`) and synced: queued, then sending (synced *before* the request goes
//! out), then sent, failed or unknown. After a crash the journal says exactly how far each
//! message got. One still `queued` was never sent and is sent now. One left `sending` may or
//! may not have reached the platform: where the platform dedupes by a key we send (a
//! `nonce`, QQ's `msg_seq` on a reply) it is simply sent again and the platform drops the
//! copy; where it cannot, the message's policy decides, at-most-once (it becomes `unknown`,
//! reported, never silently) or at-least-once (it is sent again).
//!
//! The same idempotency key is accepted once: a second submit returns the first message.
//! Syncs are shared: concurrent submits wait for one fsync that covers all of them.
//!
//! In a cluster (`[cluster]`) the journal is this host's copy, and the cluster's replica
//! (`gateway/replica.rs`, etcd) is what a successor on another host goes on from: a submit is
//! accepted only by the active and only once the replica holds the message, each `sending`
//! is in the replica before the request goes out (refused to a deposed active), and every
//! other change follows it there. A standby, or an active that has lost its term, refuses
//! submits (`not_active`): what it queued no other host could deliver.

mod book;
mod checks;
mod cluster;
mod error;
mod file_posts;
mod files;
mod journal;
pub(crate) mod message;
#[cfg(test)]
mod tests;
pub(crate) mod worker;

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::gateway::fence::Fence;
use crate::gateway::send::{FileLimits, PlatformReply, Post, TargetError, TextUnit};
use book::Book;
pub(crate) use book::Next;
use checks::same_request;
pub(crate) use cluster::MessageReplica;
pub use error::{OutboxError, SubmitError};
use files::Files;
pub use files::{Attachment, NewFile};
use journal::{Journal, Record};
pub use message::{Message, Policy, Request, State, Stats};

/// The longest idempotency key accepted.
pub const MAX_KEY_LEN: usize = 200;

/// What the outbox knows of an adapter it may send through.
#[derive(Clone, Debug)]
pub struct Route {
    /// The adapter's kind, for messages.
    pub kind: &'static str,
    /// The platform's limit on one message's text, in `unit`s.
    pub max_text: usize,
    /// The most of it posted as one platform message ([`Post::max_piece`]).
    pub max_piece: usize,
    pub unit: TextUnit,
    /// What it takes of files, when its platform's sender posts them ([`Post::FILES`]).
    pub files: Option<FileLimits>,
    /// Reads a target as the adapter's platform spells one.
    pub address: fn(&str) -> Result<Address, TargetError>,
}

/// What a target tells the outbox when a message to it is submitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// The target as its platform writes it (`channel:1234` for `1234`): what the outbox
    /// stores, and what its worker reads back.
    pub target: String,
    /// A reply to it carries a sequence number fixed now ([`Post::numbers_replies`]).
    pub numbers_replies: bool,
    /// It takes files, when its platform's sender posts any ([`Post::takes_files`]).
    pub takes_files: bool,
}

impl Route {
    /// The route to an adapter of `kind` that sends with an `S`, taking texts of up to
    /// `max_text` of its platform's units, posted in messages of up to `max_piece`.
    pub fn new<S: Post>(kind: &'static str, max_text: usize, max_piece: usize) -> Route {
        Route {
            kind,
            max_text,
            max_piece,
            unit: S::TEXT_UNIT,
            files: S::FILES,
            address: address::<S>,
        }
    }
}

fn address<S: Post>(text: &str) -> Result<Address, TargetError> {
    let target: S::Target = text.parse()?;
    Ok(Address {
        numbers_replies: S::numbers_replies(&target),
        takes_files: S::takes_files(&target),
        target: target.to_string(),
    })
}

/// What a submit did.
#[derive(Clone, Debug)]
pub struct Submitted {
    pub message: Message,
    /// False when the idempotency key had been used: `message` is the first one.
    pub new: bool,
}

/// How one attempt ended, as the worker records it.
#[derive(Debug)]
pub(crate) enum Finish {
    Sent {
        platform_id: Option<String>,
    },
    /// Queued again, not to be sent before `not_before`, of which the platform asked for the
    /// wait until `asked` (a reconnect cuts the rest short).
    Retry {
        error: PlatformReply,
        not_before: Instant,
        asked: Option<Instant>,
    },
    Failed(PlatformReply),
    Unknown(PlatformReply),
}

struct Inner {
    book: Book,
    journal: Journal,
    /// Records appended since open; the sync high-water mark counts the same way.
    appended: u64,
}

pub struct Outbox {
    dir: PathBuf,
    files: Arc<Files>,
    inner: Mutex<Inner>,
    synced: tokio::sync::Mutex<u64>,
    /// Each adapter's route, by name; a reload adds, replaces and removes them.
    routes: std::sync::RwLock<HashMap<String, Route>>,
    /// Bumped whenever a message is queued, so idle workers look again.
    changed: watch::Sender<u64>,
    /// Targets, by adapter, where an agent's turn runs and the platform's typing indicator is
    /// wanted: ephemeral, never journalled, shown by the adapter's worker between messages.
    typing: Mutex<HashMap<String, BTreeSet<String>>>,
    /// Whether this process may send now (a cluster's active, until its lease could be
    /// gone); always, unless [`Outbox::set_fence`] says otherwise.
    fence: std::sync::OnceLock<Fence>,
    /// In a cluster: the replica, once this run is the active ([`Outbox::inherit`]).
    cluster: std::sync::OnceLock<std::sync::OnceLock<Arc<dyn MessageReplica>>>,
    /// Submits in a cluster go one at a time: a reply's number is fixed before the replica
    /// is asked, and two submits of one key must not both find it free here.
    cluster_submits: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Outbox {
    /// Open the outbox in `dir` (created 0700), replaying its journal.
    pub fn open(dir: &Path, routes: HashMap<String, Route>) -> Result<Self, OutboxError> {
        let (journal, records) = Journal::open(dir).map_err(OutboxError::Open)?;
        let mut book = Book::default();
        for r in &records {
            book.apply(r);
        }
        let files = Arc::new(Files::open(dir).map_err(OutboxError::Open)?);
        let held = book
            .pending()
            .flat_map(|m| m.attachments.iter().map(|a| a.file.as_str()))
            .collect();
        files.sweep(&held).map_err(OutboxError::Open)?;
        Ok(Self {
            dir: dir.to_owned(),
            files,
            inner: Mutex::new(Inner {
                book,
                journal,
                appended: 0,
            }),
            synced: tokio::sync::Mutex::new(0),
            routes: std::sync::RwLock::new(routes),
            changed: watch::Sender::new(0),
            typing: Mutex::default(),
            fence: std::sync::OnceLock::new(),
            cluster: std::sync::OnceLock::new(),
            cluster_submits: tokio::sync::Mutex::new(()),
        })
    }

    /// Send only while `fence` holds. Set once, before the workers start.
    pub(crate) fn set_fence(&self, fence: Fence) {
        let _ = self.fence.set(fence);
    }

    /// May a worker send now? Asked right before each request goes out, so that a process
    /// that wakes after its lease is gone sends nothing, whatever its loop has yet to notice.
    pub(crate) fn may_send(&self) -> bool {
        self.fence.get().is_none_or(Fence::holds)
    }

    /// Ask `adapter`'s worker to show the typing indicator in `target` (as `--to` spells it),
    /// if its platform has one: an agent's turn runs there.
    pub fn typing(&self, adapter: &str, target: &str) {
        if self.route(adapter).is_none() {
            return;
        }
        let mut typing = self.typing.lock().unwrap_or_else(|p| p.into_inner());
        if typing
            .entry(adapter.to_owned())
            .or_default()
            .insert(target.to_owned())
        {
            drop(typing);
            self.changed.send_modify(|n| *n += 1);
        }
    }

    /// The targets where `adapter`'s typing indicator is wanted, forgotten as they are taken.
    pub(crate) fn take_typing(&self, adapter: &str) -> BTreeSet<String> {
        let mut typing = self.typing.lock().unwrap_or_else(|p| p.into_inner());
        typing.remove(adapter).unwrap_or_default()
    }

    /// A message went to `target`: the platform clears the indicator there itself, and one
    /// asked for before it would show typing after the answer.
    pub(crate) fn typed(&self, adapter: &str, target: &str) {
        let mut typing = self.typing.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(targets) = typing.get_mut(adapter) {
            targets.remove(target);
        }
    }

    fn err(&self, op: &'static str) -> impl FnOnce(io::Error) -> OutboxError + '_ {
        move |source| OutboxError::Io {
            op,
            dir: self.dir.clone(),
            source,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock left the book as consistent as the journal line
        // that was being written, which the next append or restart handles.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Validate `req` and queue it durably; the same idempotency key returns the first
    /// message instead.
    pub async fn submit(&self, req: Request) -> Result<Submitted, SubmitError> {
        let address = self.validate(&req)?;
        if let Some(replica) = self.replica()? {
            if !req.files.is_empty() {
                return Err(SubmitError::FilesInCluster);
            }
            return self.submit_in_cluster(replica, req, address).await;
        }
        let id = new_id();
        let attachments = self.copy_in(&id, &req.files).await?;
        let (submitted, pos) = {
            let mut inner = self.lock();
            if let Some(first) = inner.book.by_key(&req.idempotency_key) {
                self.files.remove(&attachments);
                if !same_request(first, &req, &address.target, &attachments) {
                    return Err(SubmitError::KeyReused {
                        key: req.idempotency_key,
                        id: first.id.clone(),
                    });
                }
                let first = first.clone();
                (
                    Submitted {
                        message: first,
                        new: false,
                    },
                    inner.appended,
                )
            } else {
                let message = new_message(&inner.book, id, req, address, attachments);
                let record = Record::Put {
                    message: Box::new(message.clone()),
                };
                if let Err(e) = self.append(&mut inner, &record) {
                    self.files.remove(&message.attachments);
                    return Err(e.into());
                }
                (Submitted { message, new: true }, inner.appended)
            }
        };
        // The worker is woken once the line is synced, or when this future is dropped first:
        // a caller that hangs up drops it at the sync below, and a message in the journal
        // must be delivered whatever the caller does. Woken that early, the worker syncs its
        // own `sending` line (and with it this one) before any request goes out.
        let wake = submitted.new.then(|| WakeWorker(&self.changed));
        self.sync_to(pos).await?;
        if submitted.new {
            crate::test_hook::kill_at("outbox-appended", &submitted.message.idempotency_key);
        }
        drop(wake);
        Ok(submitted)
    }

    fn append(&self, inner: &mut Inner, record: &Record) -> Result<(), OutboxError> {
        inner
            .journal
            .append(record)
            .map_err(self.err("append to the journal"))?;
        inner.book.apply(record);
        inner.appended += 1;
        Ok(())
    }

    /// Wait until everything appended up to `pos` is on disk; one fsync serves every caller
    /// waiting meanwhile.
    async fn sync_to(&self, pos: u64) -> Result<(), OutboxError> {
        let mut synced = self.synced.lock().await;
        if *synced >= pos {
            return Ok(());
        }
        crate::test_hook::stall("outbox-sync").await;
        let (file, upto) = {
            let inner = self.lock();
            let file = inner
                .journal
                .sync_handle()
                .map_err(self.err("sync the journal"))?;
            (file, inner.appended)
        };
        tokio::task::spawn_blocking(move || file.sync_data())
            .await
            .map_err(|e| io::Error::other(e.to_string()))
            .and_then(|r| r)
            .map_err(self.err("sync the journal"))?;
        *synced = upto;
        Ok(())
    }

    /// The adapters it sends through, and their routes, as they are now.
    pub fn routes(&self) -> std::vec::IntoIter<(String, Route)> {
        self.read_routes()
            .iter()
            .map(|(name, route)| (name.clone(), route.clone()))
            .collect::<Vec<_>>()
            .into_iter()
    }

    /// `adapter`'s route now, if it sends.
    pub(crate) fn route(&self, adapter: &str) -> Option<Route> {
        self.read_routes().get(adapter).cloned()
    }

    /// Give `adapter` this route, or take its route away (`None`): a reload that added,
    /// changed or removed it. A message already queued for a removed adapter stays queued,
    /// for the run that has it again.
    pub(crate) fn set_route(&self, adapter: &str, route: Option<Route>) {
        let mut routes = self.routes.write().unwrap_or_else(|p| p.into_inner());
        match route {
            Some(route) => routes.insert(adapter.to_owned(), route),
            None => routes.remove(adapter),
        };
    }

    fn read_routes(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Route>> {
        self.routes.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The longest text `adapter` takes in one message.
    pub fn max_text(&self, adapter: &str) -> Option<(usize, TextUnit)> {
        self.route(adapter).map(|r| (r.max_text, r.unit))
    }

    /// The most text `adapter`'s platform posts as one message, and its unit: what an agent's
    /// answer is split to, so that each piece is one message and a reply.
    pub fn max_piece(&self, adapter: &str) -> Option<(usize, TextUnit)> {
        self.route(adapter).map(|r| (r.max_piece, r.unit))
    }

    /// The newest retained message whose idempotency key starts with `prefix` (a cron job's
    /// last delivery).
    pub(crate) fn latest_with_key_prefix(&self, prefix: &str) -> Option<Message> {
        self.lock().book.latest_with_key_prefix(prefix).cloned()
    }

    pub fn get(&self, id: &str) -> Option<Message> {
        self.lock().book.get(id).cloned()
    }

    pub fn stats(&self) -> Stats {
        self.lock().book.stats(SystemTime::now())
    }

    /// Wakes whenever a message is queued.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub(crate) fn next(&self, adapter: &str, now: Instant) -> Next {
        self.lock().book.next(adapter, now)
    }

    /// `adapter` is connected again (or logged in again): its messages waiting out a backoff
    /// go now, those the platform asked to wait still wait for that, and the worker is woken.
    pub(crate) fn retry_now(&self, adapter: &str) {
        if self.lock().book.retry_now(adapter, Instant::now()) {
            tracing::info!(adapter, "connected again: waiting messages are retried now");
            self.changed.send_modify(|n| *n += 1);
        }
    }

    /// Record, durably, that a request for `id` is about to go out; in a cluster, in the
    /// replica too, and only while this run owns the profile. When the replica refuses, the
    /// message is queued again and nothing may go out.
    pub(crate) async fn begin(&self, id: &str) -> Result<(), OutboxError> {
        self.record(Record::Sending {
            id: id.to_owned(),
            at: now_rfc3339(),
        })
        .await?;
        let Err(e) = self.replicate(id, "record a send in etcd").await else {
            return Ok(());
        };
        let error = PlatformReply {
            status: None,
            code: None,
            message: format!("not sent: {}", crate::error_chain::one_line(&e)),
        };
        self.record(Record::Retry {
            id: id.to_owned(),
            at: now_rfc3339(),
            error,
        })
        .await?;
        Err(e)
    }

    /// Record how an attempt ended.
    pub(crate) async fn finish(&self, id: &str, finish: Finish) -> Result<(), OutboxError> {
        let (id, at) = (id.to_owned(), now_rfc3339());
        let record = match finish {
            Finish::Sent { platform_id } => Record::Sent {
                id,
                at,
                platform_id,
            },
            Finish::Retry {
                error,
                not_before,
                asked,
            } => {
                let record = Record::Retry {
                    id: id.clone(),
                    at,
                    error,
                };
                self.record(record).await?;
                self.lock().book.defer(&id, not_before, asked);
                return self.replicate(&id, "record a retry in etcd").await;
            }
            Finish::Failed(error) => Record::Failed { id, at, error },
            Finish::Unknown(error) => Record::Unknown { id, at, error },
        };
        let id = record_id(&record).to_owned();
        self.record(record).await?;
        if let Some(done) = self
            .lock()
            .book
            .get(&id)
            .filter(|m| !m.attachments.is_empty())
        {
            self.files.remove(&done.attachments);
        }
        self.replicate(&id, "record how a send ended in etcd")
            .await?;
        let forgotten = self.compact_if_due()?;
        match self.cluster_replica() {
            Some(replica) if !forgotten.is_empty() => {
                replica
                    .forget(&forgotten)
                    .await
                    .map_err(|why| OutboxError::Replica {
                        op: "forget finished messages in etcd",
                        why,
                    })
            }
            _ => Ok(()),
        }
    }

    async fn record(&self, record: Record) -> Result<(), OutboxError> {
        let pos = {
            let mut inner = self.lock();
            self.append(&mut inner, &record)?;
            inner.appended
        };
        self.sync_to(pos).await
    }

    /// Compact the journal once it is due; the finished messages it no longer retains.
    fn compact_if_due(&self) -> Result<Vec<Message>, OutboxError> {
        let mut inner = self.lock();
        if !inner.journal.wants_compaction() {
            return Ok(vec![]);
        }
        let (keep, forgotten) = inner.book.retain_for_compaction();
        let kept = keep.len();
        inner
            .journal
            .compact(keep)
            .map_err(|e| self.err("compact the journal")(io::Error::other(e)))?;
        tracing::info!(
            messages = kept,
            held = inner.book.len(),
            "outbox journal compacted"
        );
        Ok(forgotten)
    }
}

/// Wakes the delivery workers when dropped: at the end of a submit, or wherever its future
/// is dropped.
struct WakeWorker<'a>(&'a watch::Sender<u64>);

impl Drop for WakeWorker<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n += 1);
    }
}

/// A new message for `req`, queued now. Only a reply to a target whose platform numbers
/// replies gets a number; any other message takes none, so it gets none to show.
fn new_message(
    book: &Book,
    id: String,
    req: Request,
    address: Address,
    attachments: Vec<Attachment>,
) -> Message {
    let now = now_rfc3339();
    let numbered = address.numbers_replies && req.reply_to.is_some();
    let seq = numbered.then(|| book.next_seq());
    Message {
        id,
        idempotency_key: req.idempotency_key,
        adapter: req.adapter,
        target: address.target,
        text: req.text,
        reply_to: req.reply_to,
        seq,
        policy: req.policy,
        attachments,
        state: State::Queued,
        attempts: 0,
        queued_at: now.clone(),
        updated_at: now,
        platform_id: None,
        last_error: None,
    }
}

/// The message a record changes.
fn record_id(record: &Record) -> &str {
    match record {
        Record::Put { message } => &message.id,
        Record::Sending { id, .. }
        | Record::Sent { id, .. }
        | Record::Retry { id, .. }
        | Record::Failed { id, .. }
        | Record::Unknown { id, .. } => id,
    }
}

/// Unique, sortable by time, and short enough to be a platform's client key (some take 25
/// characters at most).
fn new_id() -> String {
    let ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    format!("m{ms:011x}{:08x}", fastrand::u32(..))
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

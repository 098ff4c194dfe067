//! The durable spool: every inbound dispatch, appended before the adapter acknowledges it.
//!
//! The order is the guarantee. An adapter advances its seq (and so tells the platform it has
//! the event) only after [`Spool::append`] returned, so an event is either in the spool or will
//! be replayed by the platform on resume: nothing received is lost across a reconnect, and what
//! was stored before a restart stays stored (a new session after a restart replays nothing, so
//! the guarantee there is only for what reached the spool). Replays and resumes deliver the
//! same event twice, so appends are deduplicated by (adapter, event id) over a bounded window
//! of recent events.
//!
//! An append is a `write` into the page cache, which survives the process crashing. Surviving
//! the machine crashing needs an fsync, and one per event would cap throughput at the disk's
//! flush rate; [`Spool::spawn_syncer`] batches them instead.
//!
//! The file is JSON lines (`events.jsonl`), so `tail -f` and `jq` work on it directly. At
//! 64 MiB it is renamed to `events.jsonl.1` and a new one started, so the spool takes at most
//! about twice that on disk.
//!
//! Readers that wait for new events (the local API's long-poll) subscribe to
//! [`Spool::subscribe`] rather than polling the file: it changes after every new line.
//!
//! This file is the writer and the types the rest of the crate uses; the dedupe window, the
//! reading back and the stable cursors have their own files beside it, and the `events`
//! command's output lives with the CLI (`cli/events.rs`).

pub mod cursor;
pub(crate) mod reader;
#[cfg(test)]
pub(crate) mod tests;
mod window;

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Mutex};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn, Instrument};

pub use reader::read;
use window::{dedupe_key, load_window, DedupeKey, Window};

use crate::bounded_read::Owner;
use crate::gateway::replica::{Inherited, Position, Replica};
use crate::trusted_dir::{TrustError, TrustedDir};

/// The current spool file, in the spool directory.
pub(crate) const FILE_NAME: &str = "events.jsonl";
/// The previous spool file, kept after rotation.
pub(crate) const ROTATED_NAME: &str = "events.jsonl.1";
/// Where long-poll adapters keep the cursor that acknowledges what the spool holds
/// (`cursors/ADAPTER`), in the inbox, so that it is as safe from other users as the spool.
pub(crate) const CURSORS_DIR: &str = "cursors";
/// Rotate once the current file has grown past this.
pub(crate) const ROTATE_BYTES: u64 = 64 * 1024 * 1024;
/// How many recent event ids are remembered for deduplication.
pub(crate) const DEDUPE_WINDOW: usize = 200_000;
/// How often `events --follow` looks for new lines.
pub(crate) const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// After a failed rotation, try again once the file has grown this much more, rather than on
/// every append (and warning on every append).
const ROTATE_RETRY_BYTES: u64 = 1024 * 1024;

/// One inbound event as stored: one JSON object per line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The platform's event id, unique per adapter: the dedupe key.
    pub id: String,
    pub(crate) adapter: String,
    /// The dispatch type, e.g. "MESSAGE_CREATE".
    pub(crate) kind: String,
    /// The gateway sequence number, if the platform sends one.
    pub(crate) seq: Option<u64>,
    /// RFC 3339 with milliseconds, UTC ("2024-05-01T09:00:00.123Z").
    pub(crate) received_at: String,
    pub(crate) data: serde_json::Value,
    /// What the access rules decided when the event was stored, for an event that is a chat
    /// message; absent on anything else, and on what was stored before there were rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Verdict>,
}

/// What the access rules decided about a chat message when it was stored ([`Judge`]): kept
/// with it, so that the agent is sent exactly what they admitted then, whatever they say
/// later (a sender approved an hour on does not have their refused messages delivered), and
/// the local API shows why each was refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub admitted: bool,
    /// The rule that decided: what admitted the message, or what refused it.
    pub rule: String,
}

/// Decides, as an event is stored, whether it may reach the agent. Called under the spool's
/// lock, once per event that is not a duplicate, so it must be quick and must not wait:
/// whatever it has to do besides deciding (answer a stranger, count) goes elsewhere.
pub trait Judge: Send + Sync + std::fmt::Debug {
    /// The verdict on `event`, or `None` when it is not a chat message.
    fn judge(&self, event: &Event) -> Option<Verdict>;
}

impl Event {
    /// An event received now.
    pub fn new(
        id: impl Into<String>,
        adapter: impl Into<String>,
        kind: impl Into<String>,
        seq: Option<u64>,
        data: serde_json::Value,
    ) -> Self {
        Self {
            id: id.into(),
            adapter: adapter.into(),
            kind: kind.into(),
            seq,
            received_at: now_rfc3339(),
            data,
            access: None,
        }
    }
}

/// `event`'s dedupe key as a replica stores it: a hash of its adapter and id, so that a
/// platform's ids, however long or hostile, are never copied anywhere.
pub(crate) fn dedupe_tag(event: &Event) -> String {
    dedupe_key(&event.adapter, &event.id).tag()
}

/// The current time as [`Event::received_at`] stores it.
fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Whether an append wrote the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    New,
    /// An event from the same adapter with this id is already in the window; nothing was
    /// written.
    Duplicate,
}

#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("cannot {op} {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot encode event {id:?}")]
    Encode {
        id: String,
        #[source]
        source: serde_json::Error,
    },
    /// The inbox or a spool file is not one only the gateway's user can change; it names
    /// the path and the fix.
    #[error(transparent)]
    Untrusted(#[from] TrustError),
    #[error("no event with id {0:?} in the spool")]
    UnknownSince(String),
    #[error("cannot write output")]
    Output(#[source] io::Error),
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SpoolError + 'a {
    move |source| SpoolError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Limits of a spool. The defaults are what the gateway uses; tests shrink them.
#[derive(Clone, Debug)]
pub(crate) struct SpoolOptions {
    pub(crate) rotate_bytes: u64,
    pub(crate) dedupe_window: usize,
}

impl Default for SpoolOptions {
    fn default() -> Self {
        Self {
            rotate_bytes: ROTATE_BYTES,
            dedupe_window: DEDUPE_WINDOW,
        }
    }
}

#[derive(Debug)]
struct Inner {
    /// Shared with fsyncs running off the lock.
    file: Arc<File>,
    len: u64,
    rotate_at: u64,
    /// The file does not end in a newline (a write torn by a crash or an I/O error), so the
    /// next line must start with one.
    needs_newline: bool,
    /// Written since the last successful fsync.
    dirty: bool,
    seen: Window,
}

/// The append side of the spool. `Send + Sync`; the gateway shares one `Arc<Spool>` among all
/// its adapters.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    /// The inbox, checked once at open; rotation renames and creates relative to it.
    trusted: Arc<TrustedDir>,
    path: PathBuf,
    options: SpoolOptions,
    // A tokio mutex, because rotation holds it across an fsync on the blocking pool.
    inner: Mutex<Inner>,
    /// Counts new lines, so that a waiting reader wakes instead of polling the file.
    appended: watch::Sender<u64>,
    /// Where a cluster's active also records what it stored, for its successor on another
    /// host ([`Replica`]); set once it is the active.
    replica: OnceLock<Arc<dyn Replica>>,
    /// What decides whether each chat message may reach the agent; set once, before any
    /// adapter starts.
    judge: OnceLock<Arc<dyn Judge>>,
}

impl Spool {
    /// Open (creating, mode 0700) the spool in `dir`, remembering the ids of the most recent
    /// events so that a replay after a restart is still recognised. The directory, its
    /// `cursors/` and the spool files must be the user's alone ([`TrustedDir`]): a spool
    /// someone else planted is refused, never appended to or read back as events.
    pub fn open(dir: &Path) -> Result<Spool, SpoolError> {
        Self::open_with(dir, SpoolOptions::default())
    }

    pub(crate) fn open_with(dir: &Path, options: SpoolOptions) -> Result<Spool, SpoolError> {
        let trusted = TrustedDir::create(dir, Owner::SelfOrRoot)?;
        trusted.create_child(CURSORS_DIR)?;
        let path = dir.join(FILE_NAME);
        let seen = load_window(&trusted, options.dedupe_window)?;
        let file = open_append(&trusted)?;
        // The file may be new: its name survives a machine crash only once the directory
        // is synced.
        trusted.sync()?;
        let len = file.metadata().map_err(io_err("stat", &path))?.len();
        let needs_newline = len > 0 && {
            let mut last = [0u8];
            file.read_exact_at(&mut last, len - 1)
                .map_err(io_err("read", &path))?;
            last[0] != b'\n'
        };
        if needs_newline {
            warn!(path = %path.display(), "spool ends in a partial line (torn write); it will be skipped");
        }
        debug!(path = %path.display(), bytes = len, ids = seen.len(), "spool opened");
        Ok(Spool {
            dir: dir.to_owned(),
            trusted: Arc::new(trusted),
            path,
            inner: Mutex::new(Inner {
                file: Arc::new(file),
                len,
                rotate_at: options.rotate_bytes,
                needs_newline,
                dirty: false,
                seen,
            }),
            options,
            appended: watch::Sender::new(0),
            replica: OnceLock::new(),
            judge: OnceLock::new(),
        })
    }

    /// Record what is stored in `replica` too, from now on. Set once, when the run becomes
    /// its cluster's active and before any adapter starts.
    pub(crate) fn set_replica(&self, replica: Arc<dyn Replica>) {
        let _ = self.replica.set(replica);
    }

    /// Judge every event stored from now on with `judge`. Set once, before any adapter starts.
    pub fn set_judge(&self, judge: Arc<dyn Judge>) {
        let _ = self.judge.set(judge);
    }

    /// Whether a successor on another host goes on from what is stored here (a cluster's
    /// active): sessions are then left resumable when they close.
    pub(crate) fn hands_over(&self) -> bool {
        self.replica.get().is_some()
    }

    /// What the previous active left for `adapter`, with the keys of what it stored taken
    /// into the dedupe window; nothing without a replica.
    pub(crate) async fn inherit(&self, adapter: &str) -> Result<Option<Inherited>, String> {
        let Some(replica) = self.replica.get() else {
            return Ok(None);
        };
        let mut inherited = replica.load(adapter).await?;
        self.remember(&std::mem::take(&mut inherited.stored)).await;
        Ok(Some(inherited))
    }

    /// Tell the replica, if there is one, that `adapter` stored `events` and stands `at`:
    /// after the append, before anything is acknowledged. An error means nothing more may be
    /// acknowledged.
    pub(crate) async fn replicate(
        &self,
        adapter: &str,
        at: Position<'_>,
        events: &[Event],
    ) -> Result<(), String> {
        let Some(replica) = self.replica.get() else {
            return Ok(());
        };
        let stored: Vec<String> = events.iter().map(dedupe_tag).collect();
        replica.record(adapter, at, &stored).await
    }

    /// Treat the events with these dedupe keys ([`dedupe_tag`]) as stored already: what a
    /// cluster's previous active stored on its host. A tag that is not one is ignored.
    async fn remember(&self, tags: &[String]) {
        let mut inner = self.inner.lock().await;
        for key in tags.iter().filter_map(|t| DedupeKey::from_tag(t)) {
            inner.seen.insert(&key);
        }
    }

    /// Changes after every event written (not after a duplicate). Mark it seen before
    /// reading the file, then wait for a change: a line appended in between is not missed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }

    /// The directory the spool files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The current spool file.
    #[cfg(test)]
    pub(crate) fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Write `event` as one line, unless its adapter and id are in the dedupe window. When this returns
    /// `Ok`, the line is in the file (not yet necessarily on disk: see [`Spool::sync`]).
    pub async fn append(&self, event: &Event) -> Result<Appended, SpoolError> {
        let mut line = Vec::with_capacity(256);
        line.push(b'\n');
        serde_json::to_writer(&mut line, event).map_err(|source| SpoolError::Encode {
            id: event.id.clone(),
            source,
        })?;
        line.push(b'\n');

        let mut inner = self.inner.lock().await;
        let key = dedupe_key(&event.adapter, &event.id);
        if inner.seen.contains(&key) {
            return Ok(Appended::Duplicate);
        }
        // Judged under the lock, after the dedupe: a replay is neither judged again nor
        // counted against its sender, and the verdict is in the same line as the event.
        if let Some(verdict) = self
            .judge
            .get()
            .filter(|_| event.access.is_none())
            .and_then(|j| j.judge(event))
        {
            with_verdict(&mut line, &verdict);
        }
        let bytes = if inner.needs_newline {
            &line[..]
        } else {
            &line[1..]
        };
        // One write_all under the lock: lines from concurrent appenders never interleave.
        if let Err(e) = (&*inner.file).write_all(bytes) {
            // Part of the line may be in the file; start the next one on a fresh line.
            inner.needs_newline = true;
            inner.dirty = true;
            return Err(SpoolError::Io {
                op: "append to",
                path: self.path.clone(),
                source: e,
            });
        }
        inner.len += bytes.len() as u64;
        inner.needs_newline = false;
        inner.dirty = true;
        inner.seen.insert(&key);
        if inner.len >= inner.rotate_at {
            // The event is written either way; a failed rotation only delays the next one.
            if let Err(e) = self.rotate(&mut inner).await {
                inner.rotate_at = inner.len + ROTATE_RETRY_BYTES;
                warn!(error = %crate::error_chain::one_line(&e), "spool rotation failed; still appending to the current file");
            }
        }
        drop(inner);
        // After a rotation too, so a reader woken by it finds the line in whichever file.
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
        Ok(Appended::New)
    }

    /// Make the rotated file complete and durable before it is renamed, then start a new one.
    async fn rotate(&self, inner: &mut Inner) -> Result<(), SpoolError> {
        let old = inner.file.clone();
        let (path, dir) = (self.path.clone(), self.trusted.clone());
        let new = tokio::task::spawn_blocking(move || -> Result<File, SpoolError> {
            old.sync_data().map_err(io_err("fsync", &path))?;
            match dir.rename(FILE_NAME, ROTATED_NAME) {
                // Renamed by an earlier attempt that then failed to create the new file.
                Err(e) if e.is_not_found() => {}
                other => other?,
            }
            let new = open_append(&dir)?;
            dir.sync()?;
            Ok(new)
        })
        .await
        .map_err(|e| SpoolError::Io {
            op: "rotate",
            path: self.path.clone(),
            source: io::Error::other(e),
        })??;
        info!(path = %self.path.display(), bytes = inner.len, "spool rotated");
        inner.file = Arc::new(new);
        inner.len = 0;
        inner.rotate_at = self.options.rotate_bytes;
        inner.needs_newline = false;
        inner.dirty = false;
        Ok(())
    }

    /// fsync the spool if anything was written since the last fsync. The fsync runs off the
    /// lock, so appends carry on meanwhile.
    pub(crate) async fn sync(&self) -> Result<(), SpoolError> {
        let file = {
            let mut inner = self.inner.lock().await;
            if !inner.dirty {
                return Ok(());
            }
            inner.dirty = false;
            inner.file.clone()
        };
        let synced = tokio::task::spawn_blocking(move || file.sync_data())
            .await
            .unwrap_or_else(|e| Err(io::Error::other(e)));
        if let Err(source) = synced {
            self.inner.lock().await.dirty = true;
            return Err(SpoolError::Io {
                op: "fsync",
                path: self.path.clone(),
                source,
            });
        }
        Ok(())
    }

    /// fsync `every` (100 ms in the gateway) after something was written: a machine crash
    /// loses at most that much of what was acknowledged. Between writes the task sleeps on the
    /// append counter, with no timer, so an idle gateway is not woken ten times a second for
    /// nothing. A failed fsync is tried again `every` later. The task ends by itself once the
    /// last `Arc<Spool>` is dropped; call [`Spool::sync`] once more at shutdown.
    pub(crate) fn spawn_syncer(self: &Arc<Self>, every: Duration) -> JoinHandle<()> {
        let spool: Weak<Spool> = Arc::downgrade(self);
        let mut appended = self.appended.subscribe();
        tokio::spawn(async move {
            loop {
                // Ends (an error) when the spool, which holds the sender, is gone.
                if appended.changed().await.is_err() {
                    return;
                }
                tokio::time::sleep(every).await;
                let Some(spool) = spool.upgrade() else {
                    return;
                };
                if let Err(e) = spool.sync().await {
                    warn!(error = %crate::error_chain::one_line(&e), "spool fsync failed; will retry");
                    appended.mark_changed();
                }
            }
        }
        // Its lines belong to whoever started it (the runtime).
        .in_current_span())
    }

    #[cfg(test)]
    async fn window_len(&self) -> usize {
        self.inner.lock().await.seen.len()
    }
}

/// `line` (a newline, an event's JSON object, a newline) with `verdict` as its `access`
/// field: the object is closed again after it, so nothing else is encoded twice.
fn with_verdict(line: &mut Vec<u8>, verdict: &Verdict) {
    debug_assert!(line.ends_with(b"}\n"));
    line.truncate(line.len() - 2);
    line.extend_from_slice(b",\"access\":");
    // A struct of a bool and a string: its encoding cannot fail.
    let _ = serde_json::to_writer(&mut *line, verdict);
    line.extend_from_slice(b"}\n");
}

/// The current spool file, made (0600) if missing. Readable too, so that `open` can check
/// the last byte for a torn line.
fn open_append(dir: &TrustedDir) -> Result<File, SpoolError> {
    Ok(dir.open_append(FILE_NAME, 0o600)?)
}

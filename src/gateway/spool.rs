//! The durable spool: every inbound dispatch, appended before the adapter acknowledges it.
//!
//! The order is the guarantee. An adapter advances its seq (and so tells the platform it has
//! the event) only after [`Spool::append`] returned, so an event is either in the spool or will
//! be replayed by the platform on resume: nothing received is lost across a reconnect, and what
//! was stored before a restart stays stored (a new session after a restart replays nothing, so
//! the guarantee there is only for what reached the spool). Replays and resumes deliver the same event twice, so appends are deduplicated by
//! (adapter, event id) over a bounded window of recent events.
//!
//! An append is a `write` into the page cache, which survives the process crashing. Surviving
//! the machine crashing needs an fsync, and one per event would cap throughput at the disk's
//! flush rate; [`Spool::spawn_syncer`] batches them instead.
//!
//! The file is JSON lines (`events.jsonl`), so `tail -f` and `jq` work on it directly. At
//! 64 MiB it is renamed to `events.jsonl.1` and a new one started, so the spool takes at most
//! about twice that on disk.

use std::collections::{HashSet, VecDeque};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tracing::{debug, info, warn};

use crate::safe_text::visible;

/// The current spool file, in the spool directory.
pub const FILE_NAME: &str = "events.jsonl";
/// The previous spool file, kept after rotation.
pub const ROTATED_NAME: &str = "events.jsonl.1";
/// Rotate once the current file has grown past this.
pub const ROTATE_BYTES: u64 = 64 * 1024 * 1024;
/// How many recent event ids are remembered for deduplication.
pub const DEDUPE_WINDOW: usize = 200_000;
/// How often `events --follow` looks for new lines.
pub const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// After a failed rotation, try again once the file has grown this much more, rather than on
/// every append (and warning on every append).
const ROTATE_RETRY_BYTES: u64 = 1024 * 1024;

/// One inbound event as stored: one JSON object per line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The platform's event id, unique per adapter: the dedupe key.
    pub id: String,
    pub adapter: String,
    /// The dispatch type, e.g. "MESSAGE_CREATE".
    pub kind: String,
    /// The gateway sequence number, if the platform sends one.
    pub seq: Option<u64>,
    /// RFC 3339 with milliseconds, UTC ("2024-05-01T09:00:00.123Z").
    pub received_at: String,
    pub data: serde_json::Value,
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
        }
    }
}

/// The current time as [`Event::received_at`] stores it.
pub fn now_rfc3339() -> String {
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

/// An error and its causes on one line, for logs.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// Limits of a spool. The defaults are what the gateway uses; tests shrink them.
#[derive(Clone, Debug)]
pub struct SpoolOptions {
    pub rotate_bytes: u64,
    pub dedupe_window: usize,
}

impl Default for SpoolOptions {
    fn default() -> Self {
        Self {
            rotate_bytes: ROTATE_BYTES,
            dedupe_window: DEDUPE_WINDOW,
        }
    }
}

/// Ids are only unique per platform, and two bots in one guild see the same message, so the
/// dedupe key is the adapter plus the id. Adapter names never contain a NUL.
fn dedupe_key(adapter: &str, id: &str) -> String {
    format!("{adapter}\0{id}")
}

/// The last `cap` keys, in arrival order. The set answers "seen?", the queue says which id to
/// forget next, so memory stays at the window size however many events flow.
#[derive(Debug)]
struct Window {
    set: HashSet<Arc<str>>,
    order: VecDeque<Arc<str>>,
    cap: usize,
}

impl Window {
    fn new(cap: usize) -> Self {
        Self {
            set: HashSet::new(),
            order: VecDeque::new(),
            cap,
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }

    fn insert(&mut self, id: &str) {
        if self.set.contains(id) {
            return;
        }
        let id: Arc<str> = Arc::from(id);
        self.set.insert(id.clone());
        self.order.push_back(id);
        while self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }

    fn len(&self) -> usize {
        self.order.len()
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
    path: PathBuf,
    options: SpoolOptions,
    // A tokio mutex, because rotation holds it across an fsync on the blocking pool.
    inner: Mutex<Inner>,
}

impl Spool {
    /// Open (creating, mode 0700) the spool in `dir`, remembering the ids of the most recent
    /// events so that a replay after a restart is still recognised.
    pub fn open(dir: &Path) -> Result<Spool, SpoolError> {
        Self::open_with(dir, SpoolOptions::default())
    }

    pub fn open_with(dir: &Path, options: SpoolOptions) -> Result<Spool, SpoolError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err("create spool directory", dir))?;
        let path = dir.join(FILE_NAME);
        let seen = load_window(dir, options.dedupe_window)?;
        let existed = path.exists();
        let file = open_append(&path).map_err(io_err("open", &path))?;
        if !existed {
            sync_dir(dir).map_err(io_err("fsync", dir))?;
        }
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
        })
    }

    /// The current spool file.
    pub fn path(&self) -> PathBuf {
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
                warn!(error = %chain(&e), "spool rotation failed; still appending to the current file");
            }
        }
        Ok(Appended::New)
    }

    /// Make the rotated file complete and durable before it is renamed, then start a new one.
    async fn rotate(&self, inner: &mut Inner) -> Result<(), SpoolError> {
        let old = inner.file.clone();
        let (path, rotated, dir) = (
            self.path.clone(),
            self.dir.join(ROTATED_NAME),
            self.dir.clone(),
        );
        let new = tokio::task::spawn_blocking(move || -> Result<File, SpoolError> {
            old.sync_data().map_err(io_err("fsync", &path))?;
            match fs::rename(&path, &rotated) {
                // Renamed by an earlier attempt that then failed to create the new file.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                other => other.map_err(io_err("rotate", &path))?,
            }
            let new = open_append(&path).map_err(io_err("create", &path))?;
            sync_dir(&dir).map_err(io_err("fsync", &dir))?;
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
    pub async fn sync(&self) -> Result<(), SpoolError> {
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

    /// fsync every `every` (100 ms in the gateway) while anything was written: a machine
    /// crash loses at most that much of what was acknowledged. The task ends by itself once
    /// the last `Arc<Spool>` is dropped; call [`Spool::sync`] once more at shutdown.
    pub fn spawn_syncer(self: &Arc<Self>, every: Duration) -> JoinHandle<()> {
        let spool: Weak<Spool> = Arc::downgrade(self);
        let mut interval = tokio::time::interval(every.max(Duration::from_millis(1)));
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tokio::spawn(async move {
            loop {
                interval.tick().await;
                let Some(spool) = spool.upgrade() else {
                    return;
                };
                if let Err(e) = spool.sync().await {
                    warn!(error = %chain(&e), "spool fsync failed; will retry");
                }
            }
        })
    }

    #[cfg(test)]
    async fn window_len(&self) -> usize {
        self.inner.lock().await.seen.len()
    }
}

/// Readable too, so that `open` can check the last byte for a torn line.
fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}

/// Makes a created or renamed file's directory entry durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Open a spool file for reading only if it is the file itself: a link is refused (ELOOP)
/// and so is anything but a regular file, which a FIFO planted in the inbox would otherwise
/// turn into a reader that never returns.
fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// The dedupe keys of the last `cap` events, oldest first: the current file's tail, topped up from
/// the rotated file's tail when the current file holds fewer.
fn load_window(dir: &Path, cap: usize) -> Result<Window, SpoolError> {
    #[derive(Deserialize)]
    struct Key {
        adapter: String,
        id: String,
    }
    let tail = |name: &str, keep: usize| -> Result<VecDeque<String>, SpoolError> {
        let path = dir.join(name);
        let mut ids = VecDeque::new();
        let file = match open_regular(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ids),
            Err(e) => return Err(io_err("open", &path)(e)),
        };
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(io_err("read", &path))?;
            if n == 0 {
                break;
            }
            if let Ok(Key { adapter, id }) = serde_json::from_slice(&line) {
                ids.push_back(dedupe_key(&adapter, &id));
                if ids.len() > keep {
                    ids.pop_front();
                }
            }
        }
        Ok(ids)
    };
    let current = tail(FILE_NAME, cap)?;
    let older = if current.len() < cap {
        tail(ROTATED_NAME, cap - current.len())?
    } else {
        VecDeque::new()
    };
    let mut window = Window::new(cap);
    for id in older.iter().chain(current.iter()) {
        window.insert(id);
    }
    Ok(window)
}

// ---- reading ----

/// A parsed line and the line as stored.
struct Record {
    raw: String,
    event: Event,
}

/// Reads one spool file's complete lines as they appear. Holding the file open is what lets
/// `--follow` finish a file that was rotated away under it.
struct LineReader {
    file: File,
    path: PathBuf,
    identity: (u64, u64),
    pending: Vec<u8>,
}

impl LineReader {
    fn open(path: &Path) -> Result<Option<Self>, SpoolError> {
        let file = match open_regular(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("open", path)(e)),
        };
        let meta = file.metadata().map_err(io_err("stat", path))?;
        Ok(Some(Self {
            file,
            path: path.to_owned(),
            identity: (meta.dev(), meta.ino()),
            pending: Vec::new(),
        }))
    }

    /// Every complete line written so far. A partial last line waits for its newline.
    fn read_available(&mut self, out: &mut Vec<Record>) -> Result<(), SpoolError> {
        let start = self.pending.len();
        (&self.file)
            .read_to_end(&mut self.pending)
            .map_err(io_err("read", &self.path))?;
        let Some(last_nl) = self.pending[start..]
            .iter()
            .rposition(|&b| b == b'\n')
            .map(|i| start + i)
        else {
            return Ok(());
        };
        let rest = self.pending.split_off(last_nl + 1);
        for line in self.pending.split(|&b| b == b'\n') {
            parse_line(line, &self.path, out);
        }
        self.pending = rest;
        Ok(())
    }

    /// The file will not grow any more: a last line without a newline counts if it is
    /// whole, and is skipped if it was torn.
    fn finish(&mut self, out: &mut Vec<Record>) {
        let line = std::mem::take(&mut self.pending);
        parse_line(&line, &self.path, out);
    }
}

fn parse_line(line: &[u8], path: &Path, out: &mut Vec<Record>) {
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    match serde_json::from_slice::<Event>(line) {
        Ok(event) => out.push(Record {
            raw: String::from_utf8_lossy(line).into_owned(),
            event,
        }),
        Err(e) => {
            debug!(path = %path.display(), error = %e, bytes = line.len(), "skipping unreadable spool line");
        }
    }
}

/// Both spool files, oldest first. The current file is opened first: if a rotation happens
/// between the two opens, `.1` is then the very file already open as current, and is dropped
/// rather than read twice.
fn open_generations(dir: &Path) -> Result<(Option<LineReader>, Option<LineReader>), SpoolError> {
    let current = LineReader::open(&dir.join(FILE_NAME))?;
    let mut older = LineReader::open(&dir.join(ROTATED_NAME))?;
    if let (Some(c), Some(o)) = (&current, &older) {
        if c.identity == o.identity {
            older = None;
        }
    }
    Ok((older, current))
}

/// The records after the last one with id `since` (all of them without `since`).
fn after(records: Vec<Record>, since: Option<&str>) -> Result<Vec<Record>, SpoolError> {
    let Some(since) = since else {
        return Ok(records);
    };
    match records.iter().rposition(|r| r.event.id == since) {
        Some(i) => Ok(records.into_iter().skip(i + 1).collect()),
        None => Err(SpoolError::UnknownSince(since.to_owned())),
    }
}

/// Everything in both files, with the current file left open for following.
fn read_records(dir: &Path) -> Result<(Vec<Record>, Option<LineReader>), SpoolError> {
    let (older, mut current) = open_generations(dir)?;
    let mut records = Vec::new();
    if let Some(mut older) = older {
        older.read_available(&mut records)?;
        older.finish(&mut records);
    }
    if let Some(current) = current.as_mut() {
        current.read_available(&mut records)?;
    }
    Ok((records, current))
}

/// All events in order (the rotated file, then the current one), or those after the event
/// with id `since`. Unreadable lines (a write torn by a crash) are skipped.
pub fn read(dir: &Path, since: Option<&str>) -> Result<Vec<Event>, SpoolError> {
    let (mut records, current) = read_records(dir)?;
    if let Some(mut current) = current {
        current.finish(&mut records);
    }
    Ok(after(records, since)?
        .into_iter()
        .map(|r| r.event)
        .collect())
}

/// `hermes-svc events`: print the spool, one event per line; with `follow`, keep printing new
/// events until the process is killed. With `json` each line is the stored JSON; otherwise
/// `<received_at> <adapter> <kind> <id> <data>`, with control characters shown as escapes
/// (see [`crate::safe_text`]). A closed output (`| head`) ends it quietly.
///
/// File reads are small and blocking, which is fine on the CLI's own runtime.
pub async fn events_command(
    dir: &Path,
    since: Option<&str>,
    follow: bool,
    json: bool,
    out: &mut (dyn Write + Send),
) -> Result<(), SpoolError> {
    match events_inner(dir, since, follow, json, out).await {
        Err(SpoolError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

async fn events_inner(
    dir: &Path,
    since: Option<&str>,
    follow: bool,
    json: bool,
    out: &mut (dyn Write + Send),
) -> Result<(), SpoolError> {
    let (mut records, mut current) = read_records(dir)?;
    if !follow {
        if let Some(current) = current.as_mut() {
            current.finish(&mut records);
        }
    }
    print(&after(records, since)?, json, out)?;
    if !follow {
        return Ok(());
    }

    let path = dir.join(FILE_NAME);
    loop {
        tokio::time::sleep(FOLLOW_POLL).await;
        let mut batch = Vec::new();
        if let Some(reader) = current.as_mut() {
            reader.read_available(&mut batch)?;
        }
        let rotated = match fs::metadata(&path) {
            Ok(meta) => current
                .as_ref()
                .is_none_or(|r| r.identity != (meta.dev(), meta.ino())),
            // Between the rename and the new file: look again next time.
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(io_err("stat", &path)(e)),
        };
        if rotated {
            if let Some(mut old) = current.take() {
                // Lines written after the read above, before the rename.
                old.read_available(&mut batch)?;
                old.finish(&mut batch);
            }
            current = LineReader::open(&path)?;
            if let Some(reader) = current.as_mut() {
                reader.read_available(&mut batch)?;
            }
        }
        print(&batch, json, out)?;
    }
}

fn print(records: &[Record], json: bool, out: &mut (dyn Write + Send)) -> Result<(), SpoolError> {
    for r in records {
        if json {
            writeln!(out, "{}", r.raw)
        } else {
            // Every field came from a platform or the spool file, so none is printed raw: an
            // event kind of `ESC[2J` must not clear the reader's screen. `data` is JSON, whose
            // encoder escapes C0 controls but not DEL, C1 or the bidi overrides.
            let e = &r.event;
            let data = e.data.to_string();
            writeln!(
                out,
                "{} {} {} {} {}",
                visible(&e.received_at),
                visible(&e.adapter),
                visible(&e.kind),
                visible(&e.id),
                visible(&data)
            )
        }
        .map_err(SpoolError::Output)?;
    }
    out.flush().map_err(SpoolError::Output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hsv-spool-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn event(id: &str) -> Event {
        Event {
            id: id.to_owned(),
            adapter: "qq".into(),
            kind: "MESSAGE_CREATE".into(),
            seq: Some(7),
            received_at: "2024-05-01T09:00:00.123Z".into(),
            data: serde_json::json!({"content": format!("hello {id}"), "n": [1, 2]}),
        }
    }

    fn ids(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.id.as_str()).collect()
    }

    fn small(rotate_bytes: u64) -> SpoolOptions {
        SpoolOptions {
            rotate_bytes,
            ..SpoolOptions::default()
        }
    }

    #[test]
    fn the_spool_is_send_and_sync() {
        fn assert<T: Send + Sync>() {}
        assert::<Spool>();
        assert::<Arc<Spool>>();
    }

    #[tokio::test]
    async fn appended_events_read_back_in_order() {
        let dir = temp_dir("roundtrip");
        let spool = Spool::open(&dir.join("inbox")).unwrap();
        let dir = dir.join("inbox");
        assert_eq!(spool.path(), dir.join("events.jsonl"));
        let events = [
            event("a"),
            event("b"),
            Event::new("c", "dc", "X", None, serde_json::Value::Null),
        ];
        for e in &events {
            assert_eq!(spool.append(e).await.unwrap(), Appended::New);
        }
        spool.sync().await.unwrap();
        assert_eq!(read(&dir, None).unwrap(), events);
        assert_eq!(fs::read_to_string(spool.path()).unwrap().lines().count(), 3);
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(
            fs::metadata(spool.path()).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let at = &events[2].received_at;
        assert!(
            at.len() == 24 && at.ends_with('Z') && at.as_bytes()[19] == b'.',
            "{at}"
        );
        let _ = fs::remove_dir_all(dir.parent().unwrap());
    }

    #[tokio::test]
    async fn a_duplicate_id_is_written_once_even_across_a_reopen() {
        let dir = temp_dir("dupes");
        let spool = Spool::open(&dir).unwrap();
        assert_eq!(spool.append(&event("a")).await.unwrap(), Appended::New);
        assert_eq!(
            spool.append(&event("a")).await.unwrap(),
            Appended::Duplicate
        );
        drop(spool);
        let spool = Spool::open(&dir).unwrap();
        assert_eq!(
            spool.append(&event("a")).await.unwrap(),
            Appended::Duplicate
        );
        assert_eq!(spool.append(&event("b")).await.unwrap(), Appended::New);
        assert_eq!(ids(&read(&dir, None).unwrap()), ["a", "b"]);
        let _ = fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn the_same_id_from_two_adapters_is_two_events() {
        let dir = temp_dir("two-adapters");
        let spool = Spool::open(&dir).unwrap();
        let dc = Event {
            adapter: "dc".into(),
            ..event("m1")
        };
        assert_eq!(spool.append(&event("m1")).await.unwrap(), Appended::New);
        assert_eq!(spool.append(&dc).await.unwrap(), Appended::New);
        drop(spool);
        let spool = Spool::open(&dir).unwrap();
        assert_eq!(spool.append(&dc).await.unwrap(), Appended::Duplicate);
        assert_eq!(read(&dir, None).unwrap(), [event("m1"), dc]);
        let _ = fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn since_returns_the_events_after_an_id() {
        let dir = temp_dir("since");
        let spool = Spool::open(&dir).unwrap();
        for id in ["a", "b", "c", "d"] {
            spool.append(&event(id)).await.unwrap();
        }
        assert_eq!(ids(&read(&dir, Some("b")).unwrap()), ["c", "d"]);
        assert!(read(&dir, Some("d")).unwrap().is_empty());
        assert!(matches!(
            read(&dir, Some("zz")),
            Err(SpoolError::UnknownSince(id)) if id == "zz"
        ));
        // An empty (never written) spool directory reads as empty.
        assert!(read(&dir.join("nothing"), None).unwrap().is_empty());
        let _ = fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_torn_last_line_is_skipped_and_the_next_append_starts_a_new_line() {
        let dir = temp_dir("torn");
        let spool = Spool::open(&dir).unwrap();
        spool.append(&event("a")).await.unwrap();
        spool.append(&event("b")).await.unwrap();
        drop(spool);
        // A crash in the middle of writing "c".
        let line = serde_json::to_string(&event("c")).unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.join(FILE_NAME))
            .unwrap();
        f.write_all(&line.as_bytes()[..line.len() / 2]).unwrap();
        drop(f);
        assert_eq!(ids(&read(&dir, None).unwrap()), ["a", "b"]);

        let spool = Spool::open(&dir).unwrap();
        assert_eq!(
            spool.append(&event("b")).await.unwrap(),
            Appended::Duplicate
        );
        assert_eq!(spool.append(&event("c")).await.unwrap(), Appended::New);
        assert_eq!(ids(&read(&dir, None).unwrap()), ["a", "b", "c"]);
        let text = fs::read_to_string(spool.path()).unwrap();
        assert_eq!(text.lines().last().unwrap(), line);

        // A line cut just before its newline is whole: it counts, and gets its newline.
        drop(spool);
        let whole = serde_json::to_string(&event("d")).unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.join(FILE_NAME))
            .unwrap();
        f.write_all(whole.as_bytes()).unwrap();
        drop(f);
        assert_eq!(ids(&read(&dir, None).unwrap()), ["a", "b", "c", "d"]);
        let spool = Spool::open(&dir).unwrap();
        assert_eq!(
            spool.append(&event("d")).await.unwrap(),
            Appended::Duplicate
        );
        spool.append(&event("e")).await.unwrap();
        assert_eq!(ids(&read(&dir, None).unwrap()), ["a", "b", "c", "d", "e"]);
        let _ = fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn rotation_keeps_everything_readable() {
        let dir = temp_dir("rotate");
        let line_len = serde_json::to_string(&event("e000")).unwrap().len() as u64 + 1;
        // Rotate after the 10th line.
        let spool = Spool::open_with(&dir, small(10 * line_len)).unwrap();
        let all: Vec<String> = (0..15).map(|i| format!("e{i:03}")).collect();
        for id in &all {
            spool.append(&event(id)).await.unwrap();
        }
        assert_eq!(
            fs::read_to_string(dir.join(ROTATED_NAME))
                .unwrap()
                .lines()
                .count(),
            10
        );
        assert_eq!(ids(&read(&dir, None).unwrap()), all);
        assert_eq!(ids(&read(&dir, Some("e008")).unwrap()), &all[9..]);
        spool.sync().await.unwrap();

        // The dedupe window reaches into the rotated file after a reopen.
        drop(spool);
        let spool = Spool::open_with(&dir, small(10 * line_len)).unwrap();
        assert_eq!(spool.window_len().await, 15);
        assert_eq!(
            spool.append(&event("e000")).await.unwrap(),
            Appended::Duplicate
        );

        // A second rotation replaces the old .1: the last two files stay, still in order.
        for i in 15..25 {
            spool.append(&event(&format!("e{i:03}"))).await.unwrap();
        }
        let got = read(&dir, None).unwrap();
        assert_eq!(got.first().unwrap().id, "e010");
        assert_eq!(got.last().unwrap().id, "e024");
        assert_eq!(got.len(), 15);
        let _ = fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn many_appends_stay_fast_and_the_window_stays_bounded() {
        let dir = temp_dir("many");
        let options = SpoolOptions {
            dedupe_window: 10_000,
            ..SpoolOptions::default()
        };
        let spool = Spool::open_with(&dir, options.clone()).unwrap();
        let started = Instant::now();
        for i in 0..100_000 {
            let e = Event {
                data: serde_json::json!({"i": i}),
                ..event(&format!("id-{i}"))
            };
            assert_eq!(spool.append(&e).await.unwrap(), Appended::New);
        }
        spool.sync().await.unwrap();
        let took = started.elapsed();
        assert!(took < Duration::from_secs(8), "100k appends took {took:?}");
        assert_eq!(spool.window_len().await, 10_000);
        assert_eq!(
            spool.append(&event("id-99999")).await.unwrap(),
            Appended::Duplicate
        );
        assert_eq!(
            spool.append(&event("id-90000")).await.unwrap(),
            Appended::Duplicate
        );
        // Out of the window: forgotten, so written again.
        assert_eq!(spool.append(&event("id-0")).await.unwrap(), Appended::New);
        drop(spool);

        let started = Instant::now();
        let spool = Spool::open_with(&dir, options).unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(spool.window_len().await, 10_000);
        assert_eq!(
            spool.append(&event("id-95000")).await.unwrap(),
            Appended::Duplicate
        );
        assert_eq!(read(&dir, None).unwrap().len(), 100_001);
        let _ = fs::remove_dir_all(dir);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_appenders_never_interleave() {
        const TASKS: usize = 50;
        const EACH: usize = 200;
        let dir = temp_dir("concurrent");
        let spool = Arc::new(Spool::open(&dir).unwrap());
        let syncer = spool.spawn_syncer(Duration::from_millis(5));
        let mut handles = Vec::new();
        for t in 0..TASKS {
            let spool = spool.clone();
            handles.push(tokio::spawn(async move {
                let mut new = 0;
                for i in 0..EACH {
                    let e = Event {
                        data: serde_json::json!({"pad": "x".repeat(i * 7 % 3000)}),
                        ..event(&format!("t{t}-{i}"))
                    };
                    spool.append(&e).await.unwrap();
                    // Every task also receives the same replayed event.
                    if spool.append(&event("shared")).await.unwrap() == Appended::New {
                        new += 1;
                    }
                }
                new
            }));
        }
        let mut shared_new = 0;
        for h in handles {
            shared_new += h.await.unwrap();
        }
        assert_eq!(shared_new, 1);
        spool.sync().await.unwrap();

        let text = fs::read_to_string(spool.path()).unwrap();
        assert_eq!(text.lines().count(), TASKS * EACH + 1);
        for line in text.lines() {
            serde_json::from_str::<Event>(line).unwrap();
        }
        let events = read(&dir, None).unwrap();
        let distinct: HashSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(distinct.len(), TASKS * EACH + 1);

        // The syncer holds no strong reference: it ends with the last Arc.
        drop(spool);
        tokio::time::timeout(Duration::from_secs(2), syncer)
            .await
            .expect("syncer ends once the spool is dropped")
            .unwrap();
        let _ = fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn sync_only_fsyncs_after_writes() {
        let dir = temp_dir("sync");
        let spool = Spool::open(&dir).unwrap();
        assert!(!spool.inner.lock().await.dirty);
        spool.append(&event("a")).await.unwrap();
        assert!(spool.inner.lock().await.dirty);
        spool.sync().await.unwrap();
        assert!(!spool.inner.lock().await.dirty);
        spool.append(&event("a")).await.unwrap();
        assert!(
            !spool.inner.lock().await.dirty,
            "a duplicate writes nothing"
        );
        let _ = fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn events_prints_text_or_stored_json() {
        let dir = temp_dir("print");
        let spool = Spool::open(&dir).unwrap();
        spool.append(&event("a")).await.unwrap();
        spool.append(&event("b")).await.unwrap();

        let mut out = Vec::new();
        events_command(&dir, Some("a"), false, false, &mut out)
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "2024-05-01T09:00:00.123Z qq MESSAGE_CREATE b {\"content\":\"hello b\",\"n\":[1,2]}\n"
        );

        let mut out = Vec::new();
        events_command(&dir, None, false, true, &mut out)
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            fs::read_to_string(spool.path()).unwrap()
        );

        let mut out = Vec::new();
        let err = events_command(&dir, Some("nope"), false, true, &mut out).await;
        assert!(matches!(err, Err(SpoolError::UnknownSince(_))));

        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        events_command(&dir, None, false, false, &mut Closed)
            .await
            .unwrap();
        let _ = fs::remove_dir_all(dir);
    }

    #[derive(Clone, Default)]
    struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn ids(&self) -> Vec<String> {
            String::from_utf8_lossy(&self.0.lock().unwrap())
                .lines()
                .filter_map(|l| serde_json::from_str::<Event>(l).ok())
                .map(|e| e.id)
                .collect()
        }
    }

    #[tokio::test]
    async fn follow_prints_new_events_across_rotation() {
        let dir = temp_dir("follow");
        let line_len = serde_json::to_string(&event("f000")).unwrap().len() as u64 + 1;
        let spool = Spool::open_with(&dir, small(4 * line_len)).unwrap();
        spool.append(&event("f000")).await.unwrap();
        spool.append(&event("f001")).await.unwrap();

        let out = Shared::default();
        let follower = tokio::spawn({
            let (dir, mut out) = (dir.clone(), out.clone());
            async move { events_command(&dir, Some("f000"), true, true, &mut out).await }
        });
        let want = |n: usize| (1..n).map(|i| format!("f{i:03}")).collect::<Vec<_>>();
        let wait_for = |n: usize| {
            let out = out.clone();
            async move {
                let deadline = Instant::now() + Duration::from_secs(5);
                while out.ids() != want(n) && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                out.ids()
            }
        };
        assert_eq!(wait_for(2).await, want(2));

        // Two more, then a rotation (after f003), then more in the new file.
        for i in 2..7 {
            spool.append(&event(&format!("f{i:03}"))).await.unwrap();
        }
        assert!(dir.join(ROTATED_NAME).exists());
        assert_eq!(wait_for(7).await, want(7));
        spool.append(&event("f007")).await.unwrap();
        assert_eq!(wait_for(8).await, want(8));
        assert!(!follower.is_finished());
        follower.abort();
        let _ = fs::remove_dir_all(dir);
    }
}

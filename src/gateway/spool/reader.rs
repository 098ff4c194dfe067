//! Reading the spool back: both generations, oldest first, line by line.
//!
//! Both `read` (the demo, the tests, the benches) and `hermes-svc events` read through here, so
//! they agree on what the spool holds: a line torn by a crash is skipped, never fatal, and an
//! event is never read twice when a rotation happens between opening the two files.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use tracing::debug;

use super::{io_err, Event, SpoolError, FILE_NAME, ROTATED_NAME};
use crate::bounded_read::Owner;
use crate::trusted_dir::{identity, TrustedDir};

/// Open the spool file `name` in the checked inbox for reading, if it is there
/// ([`TrustedDir::open_read`]): a link is refused and so is anything but a regular file of
/// the user's that nobody else can write. A FIFO planted in the inbox would otherwise turn
/// into a reader that never returns, and a file of someone else's into events the agent
/// takes for the platform's.
pub(super) fn open_regular(dir: &TrustedDir, name: &str) -> Result<Option<File>, SpoolError> {
    Ok(dir.open_read(name)?)
}

/// The inbox `dir`, checked, if it exists: readers make nothing.
pub(super) fn open_dir(dir: &Path) -> Result<Option<TrustedDir>, SpoolError> {
    Ok(TrustedDir::open(dir, Owner::SelfOrRoot)?)
}

/// A parsed line and the line as stored.
pub(crate) struct Record {
    pub(crate) raw: String,
    pub(crate) event: Event,
}

/// Reads one spool file's complete lines as they appear. Holding the file open is what lets
/// `--follow` finish a file that was rotated away under it.
pub(crate) struct LineReader {
    file: File,
    path: PathBuf,
    identity: (u64, u64),
    pending: Vec<u8>,
}

impl LineReader {
    fn open(dir: &TrustedDir, name: &str) -> Result<Option<Self>, SpoolError> {
        let path = dir.path().join(name);
        let Some(file) = open_regular(dir, name)? else {
            return Ok(None);
        };
        let meta = file.metadata().map_err(io_err("stat", &path))?;
        Ok(Some(Self {
            file,
            path,
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
    pub(crate) fn finish(&mut self, out: &mut Vec<Record>) {
        let line = std::mem::take(&mut self.pending);
        parse_line(&line, &self.path, out);
    }
}

pub(super) fn parse_line(line: &[u8], path: &Path, out: &mut Vec<Record>) {
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
    let Some(dir) = open_dir(dir)? else {
        return Ok((None, None));
    };
    let current = LineReader::open(&dir, FILE_NAME)?;
    let mut older = LineReader::open(&dir, ROTATED_NAME)?;
    if let (Some(c), Some(o)) = (&current, &older) {
        if c.identity == o.identity {
            older = None;
        }
    }
    Ok((older, current))
}

/// The records after the last one with id `since` (all of them without `since`).
pub(crate) fn after(records: Vec<Record>, since: Option<&str>) -> Result<Vec<Record>, SpoolError> {
    let Some(since) = since else {
        return Ok(records);
    };
    match records.iter().rposition(|r| r.event.id == since) {
        Some(i) => Ok(records.into_iter().skip(i + 1).collect()),
        None => Err(SpoolError::UnknownSince(since.to_owned())),
    }
}

/// Everything in both files, with the current file left open for following.
pub(crate) fn read_records(dir: &Path) -> Result<(Vec<Record>, Option<LineReader>), SpoolError> {
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

/// One look for `--follow`: the lines added to `current` since the last look and, once the
/// spool file at `path` is another file (rotated), the rest of the old one and what the new
/// one holds so far. `current` then reads the new file.
pub(crate) fn read_new(
    path: &Path,
    current: &mut Option<LineReader>,
    batch: &mut Vec<Record>,
) -> Result<(), SpoolError> {
    if let Some(reader) = current.as_mut() {
        reader.read_available(batch)?;
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Ok(());
    };
    // Between the rename and the new file, or before the inbox is made: look again next time.
    let Some(dir) = open_dir(dir)? else {
        return Ok(());
    };
    let rotated = match dir.stat(name)? {
        Some(st) => current.as_ref().is_none_or(|r| r.identity != identity(&st)),
        None => false,
    };
    if rotated {
        if let Some(mut old) = current.take() {
            // Lines written after the read above, before the rename.
            old.read_available(batch)?;
            old.finish(batch);
        }
        *current = LineReader::open(&dir, name)?;
        if let Some(reader) = current.as_mut() {
            reader.read_available(batch)?;
        }
    }
    Ok(())
}

//! Stable positions in the spool, for readers that come back later (the local API's
//! `GET /v1/events?after=CURSOR`).
//!
//! An event id cannot be a position: ids are unique per adapter only, and finding one means
//! reading the whole spool. A byte offset alone does not survive rotation, since the file it
//! counts in is renamed under it. So a cursor names the *file* by its inode, which a rename
//! keeps, the offset just after the event's line in that file, and a short hash of the
//! event's adapter and id. Reading after a cursor opens whichever of `events.jsonl` and
//! `events.jsonl.1` has that inode, checks that the line ending at the offset is that event
//! (an inode is reused once its file is deleted, and a reused one must not pass for the old
//! file), and reads on, from the rotated file into the current one.
//!
//! A cursor whose file has been rotated away twice is gone: the events after it may have gone
//! with the file, and saying so ([`CursorError::Gone`]) is the only honest answer.
//!
//! Cursors are only ever made right after a readable event, never at offset 0: a file that
//! has no event yet has nothing for the hash to check. A spool with no event at all is at
//! [`Position::Start`], which is also where its first event will be.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use sha2::{Digest, Sha256};

use super::reader::{open_dir, open_regular, parse_line, Record};
use super::{io_err, Event, SpoolError, FILE_NAME, ROTATED_NAME};
use crate::trusted_dir::TrustedDir;

/// How much is read from a file at a time, in either direction.
const CHUNK: usize = 64 * 1024;

/// Just after one event in one spool file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    ino: u64,
    offset: u64,
    hash: u32,
}

impl Cursor {
    fn after(ino: u64, offset: u64, event: &Event) -> Self {
        Self {
            ino,
            offset,
            hash: event_hash(event),
        }
    }
}

/// The first four bytes of SHA-256 over adapter and id: enough to tell a reused inode from
/// the file a cursor was made in, short enough to keep cursors short.
fn event_hash(event: &Event) -> u32 {
    let mut h = Sha256::new();
    h.update(event.adapter.as_bytes());
    h.update([0]);
    h.update(event.id.as_bytes());
    let d = h.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "i{:x}.o{:x}.h{:08x}", self.ino, self.offset, self.hash)
    }
}

impl FromStr for Cursor {
    type Err = CursorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let malformed = || CursorError::Malformed(s.chars().take(80).collect());
        let mut parts = s.split('.');
        let mut field = |tag: char| {
            parts
                .next()
                .and_then(|p| p.strip_prefix(tag))
                .filter(|hex| !hex.is_empty() && hex.len() <= 16)
                .filter(|hex| hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
                .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        };
        let (ino, offset, hash) = (field('i'), field('o'), field('h'));
        match (ino, offset, hash, parts.next()) {
            (Some(ino), Some(offset), Some(hash), None) if offset > 0 => Ok(Cursor {
                ino,
                offset,
                hash: u32::try_from(hash).map_err(|_| malformed())?,
            }),
            _ => Err(malformed()),
        }
    }
}

/// Where a read starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// From the oldest event still in the spool.
    Start,
    /// After the newest event now in the spool: only what is appended from now on.
    End,
    /// After this event.
    After(Cursor),
}

impl Position {
    /// `None` or `"start"`, `"end"`, or a cursor as [`Position`]'s `Display` wrote it.
    pub fn parse(text: Option<&str>) -> Result<Self, CursorError> {
        match text {
            None | Some("start") => Ok(Position::Start),
            Some("end") => Ok(Position::End),
            Some(c) => c.parse().map(Position::After),
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Start => f.write_str("start"),
            Position::End => f.write_str("end"),
            Position::After(c) => c.fmt(f),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CursorError {
    #[error(
        "cursor {0:?} is not one this gateway gave out: pass an event's `cursor` or a `next` from an earlier answer unchanged, or `start` or `end`"
    )]
    Malformed(String),
    #[error(
        "cursor {cursor} points into a spool file that is no longer kept (the spool keeps the current file and the one before it), so events after it may be gone: read again from `start` (the oldest event kept) or from `end`"
    )]
    Gone { cursor: Cursor },
    #[error(transparent)]
    Spool(#[from] SpoolError),
}

/// One event and the cursor just after it.
pub struct Found {
    pub(crate) record: Record,
    pub cursor: Cursor,
}

impl Found {
    /// The line as stored in the spool.
    pub fn raw(&self) -> &str {
        &self.record.raw
    }
    pub fn event(&self) -> &Event {
        &self.record.event
    }
}

/// What one read found, and where the next read starts: after the last event found, or
/// where this read started if it found none (with [`Position::End`] resolved to the event
/// it meant, so that a reader waiting there sees what is appended next).
pub struct Page {
    pub events: Vec<Found>,
    pub next: Position,
}

/// How much one read returns at most. At least one event is returned whatever its size.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub events: usize,
    pub bytes: usize,
}

/// One spool file, opened once per read, so that a rotation during the read changes nothing
/// about which file is which.
struct Generation {
    file: File,
    path: PathBuf,
    ino: u64,
    /// `events.jsonl.1`: it will not grow, so a last line without a newline is whole.
    rotated: bool,
}

impl Generation {
    fn open(dir: &TrustedDir, name: &str, rotated: bool) -> Result<Option<Self>, SpoolError> {
        let path = dir.path().join(name);
        let Some(file) = open_regular(dir, name)? else {
            return Ok(None);
        };
        let meta = file.metadata().map_err(io_err("stat", &path))?;
        Ok(Some(Self {
            file,
            ino: meta.ino(),
            path,
            rotated,
        }))
    }

    fn len(&self) -> Result<u64, SpoolError> {
        Ok(self
            .file
            .metadata()
            .map_err(io_err("stat", &self.path))?
            .len())
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> Result<usize, SpoolError> {
        loop {
            match self.file.read_at(buf, at) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other.map_err(io_err("read", &self.path)),
            }
        }
    }

    fn parse(&self, line: &[u8]) -> Option<Record> {
        let mut out = Vec::with_capacity(1);
        parse_line(line, &self.path, &mut out);
        out.pop()
    }

    /// The line that ends at `end` (just after its newline, or at the end of a file that
    /// ends without one) and where it starts.
    fn line_ending_at(&self, end: u64) -> Result<(u64, Vec<u8>), SpoolError> {
        let mut content_end = end;
        let mut last = [0u8];
        if end > 0 && self.read_at(&mut last, end - 1)? == 1 && last[0] == b'\n' {
            content_end = end - 1;
        }
        let mut line = Vec::new();
        let mut at = content_end;
        while at > 0 {
            let step = (at as usize).min(CHUNK);
            let mut buf = vec![0u8; step];
            let from = at - step as u64;
            let n = self.read_at(&mut buf, from)?;
            buf.truncate(n);
            if let Some(nl) = buf.iter().rposition(|&b| b == b'\n') {
                line.splice(0..0, buf[nl + 1..].iter().copied());
                return Ok((from + nl as u64 + 1, line));
            }
            line.splice(0..0, buf);
            at = from;
        }
        Ok((0, line))
    }

    /// The cursor after the last readable event that ends at or before `end`.
    fn last_event_before(&self, mut end: u64) -> Result<Option<Cursor>, SpoolError> {
        while end > 0 {
            let (start, line) = self.line_ending_at(end)?;
            if let Some(r) = self.parse(&line) {
                return Ok(Some(Cursor::after(self.ino, end, &r.event)));
            }
            end = start;
        }
        Ok(None)
    }

    /// Where the current file's complete lines end: a last line without its newline is still
    /// being written.
    fn complete_len(&self) -> Result<u64, SpoolError> {
        let len = self.len()?;
        let mut last = [0u8];
        if len == 0 || (self.read_at(&mut last, len - 1)? == 1 && last[0] == b'\n') {
            return Ok(len);
        }
        Ok(self.line_ending_at(len)?.0)
    }

    /// Append the events from `from` on to `page` until `limits` is reached. Returns whether
    /// the limits were reached.
    fn read_from(
        &self,
        from: u64,
        limits: Limits,
        page: &mut Page,
        bytes: &mut usize,
    ) -> Result<bool, SpoolError> {
        let full = |page: &Page, bytes: usize| {
            page.events.len() >= limits.events || (bytes >= limits.bytes && !page.events.is_empty())
        };
        let mut buf: Vec<u8> = Vec::new();
        let mut buf_at = from;
        loop {
            let old = buf.len();
            buf.resize(old + CHUNK, 0);
            let n = self.read_at(&mut buf[old..], buf_at + old as u64)?;
            buf.truncate(old + n);
            if n == 0 {
                break;
            }
            let mut consumed = 0;
            while let Some(nl) = buf[consumed..].iter().position(|&b| b == b'\n') {
                let line = &buf[consumed..consumed + nl];
                let end = buf_at + (consumed + nl + 1) as u64;
                consumed += nl + 1;
                if let Some(record) = self.parse(line) {
                    *bytes += record.raw.len();
                    let cursor = Cursor::after(self.ino, end, &record.event);
                    page.events.push(Found { record, cursor });
                    if full(page, *bytes) {
                        return Ok(true);
                    }
                }
            }
            buf.drain(..consumed);
            buf_at += consumed as u64;
        }
        if self.rotated && !buf.is_empty() {
            if let Some(record) = self.parse(&buf) {
                *bytes += record.raw.len();
                let cursor = Cursor::after(self.ino, buf_at + buf.len() as u64, &record.event);
                page.events.push(Found { record, cursor });
            }
        }
        Ok(full(page, *bytes))
    }
}

/// Both files, oldest first. The current file is opened first: if a rotation happens between
/// the two opens, `.1` is then the file already open as current, and is dropped.
fn open_generations(dir: &Path) -> Result<Vec<Generation>, SpoolError> {
    let Some(dir) = open_dir(dir)? else {
        return Ok(Vec::new());
    };
    let current = Generation::open(&dir, FILE_NAME, false)?;
    let older = Generation::open(&dir, ROTATED_NAME, true)?
        .filter(|o| current.as_ref().is_none_or(|c| c.ino != o.ino));
    Ok(older.into_iter().chain(current).collect())
}

/// The events after `position`, oldest first, up to `limits`.
pub fn read_after(dir: &Path, position: Position, limits: Limits) -> Result<Page, CursorError> {
    let files = open_generations(dir)?;
    let (start_file, start_offset) = match position {
        Position::Start => (0, 0),
        Position::End => {
            return Ok(Page {
                events: Vec::new(),
                next: end_position(&files)?,
            })
        }
        Position::After(cursor) => {
            let i = files
                .iter()
                .position(|g| g.ino == cursor.ino)
                .ok_or(CursorError::Gone { cursor })?;
            if !is_after_event(&files[i], cursor)? {
                return Err(CursorError::Gone { cursor });
            }
            (i, cursor.offset)
        }
    };
    let mut page = Page {
        events: Vec::new(),
        next: position,
    };
    let mut bytes = 0;
    for (i, file) in files.iter().enumerate().skip(start_file) {
        let from = if i == start_file { start_offset } else { 0 };
        if file.read_from(from, limits, &mut page, &mut bytes)? {
            break;
        }
    }
    if let Some(found) = page.events.last() {
        page.next = Position::After(found.cursor);
    }
    Ok(page)
}

/// The event `cursor` was made after, read again: for a reader that kept only the cursor of an
/// event it will need later (the agent's feed, for a chat's messages beyond those it holds).
pub fn read_at(dir: &Path, cursor: Cursor) -> Result<Found, CursorError> {
    let files = open_generations(dir)?;
    let file = files
        .iter()
        .find(|g| g.ino == cursor.ino)
        .ok_or(CursorError::Gone { cursor })?;
    if cursor.offset > file.len()? {
        return Err(CursorError::Gone { cursor });
    }
    let (_, line) = file.line_ending_at(cursor.offset)?;
    match file.parse(&line) {
        Some(record) if event_hash(&record.event) == cursor.hash => Ok(Found { record, cursor }),
        _ => Err(CursorError::Gone { cursor }),
    }
}

/// Whether the line ending at the cursor's offset is the event it was made after.
fn is_after_event(file: &Generation, cursor: Cursor) -> Result<bool, SpoolError> {
    if cursor.offset > file.len()? {
        return Ok(false);
    }
    let (_, line) = file.line_ending_at(cursor.offset)?;
    Ok(file
        .parse(&line)
        .is_some_and(|r| event_hash(&r.event) == cursor.hash))
}

/// After the newest readable event, or the start of an empty spool.
fn end_position(files: &[Generation]) -> Result<Position, SpoolError> {
    for file in files.iter().rev() {
        let end = if file.rotated {
            file.len()?
        } else {
            file.complete_len()?
        };
        if let Some(cursor) = file.last_event_before(end)? {
            return Ok(Position::After(cursor));
        }
    }
    Ok(Position::Start)
}

#[cfg(test)]
mod tests;

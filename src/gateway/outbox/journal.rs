//! The outbox's journal on disk: one JSON line per state change, in `journal.jsonl`.
//!
//! A line torn by a crash is the last one, and it is skipped: the change it recorded had not
//! been confirmed to anyone (a submit is answered, and a request sent, only after its line is
//! synced). Once the file has grown past [`COMPACT_BYTES`] it is rewritten as one `put` per
//! retained message, into a temp file that is synced and then renamed over the journal, so a
//! crash during compaction leaves either the old journal or the new one, never half of one.
//!
//! The directory and the journal are opened by the profile home's rule (`trusted_dir`): a
//! link, a FIFO, or a file or directory someone else owns or may write is refused, so nobody
//! else can plant messages for the bot to post.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::message::Message;
use crate::atomic_file::{self, TempFile};
use crate::bounded_read::Owner;
use crate::gateway::send::PlatformReply;
use crate::trusted_dir::{TrustError, TrustedDir};

pub(crate) use crate::profile::OUTBOX_JOURNAL as FILE_NAME;
/// Compact once the journal is this big (and twice its size after the last compaction).
pub(super) const COMPACT_BYTES: u64 = 8 * 1024 * 1024;
/// A line longer than this is not one we wrote (text is capped well below it).
const MAX_LINE: usize = 1024 * 1024;

/// One state change. `at` is RFC 3339, UTC.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub(super) enum Record {
    /// A new message, or a message's whole state in a compacted journal.
    Put { message: Box<Message> },
    /// Written and synced before each request goes out.
    Sending { id: String, at: String },
    Sent {
        id: String,
        at: String,
        platform_id: Option<String>,
    },
    /// Back to queued, to be tried again.
    Retry {
        id: String,
        at: String,
        error: PlatformReply,
    },
    Failed {
        id: String,
        at: String,
        error: PlatformReply,
    },
    Unknown {
        id: String,
        at: String,
        error: PlatformReply,
    },
}

pub(super) struct Journal {
    dir: TrustedDir,
    file: File,
    /// Bytes in the current file.
    len: u64,
    /// Compact when `len` passes this.
    compact_at: u64,
}

impl Journal {
    /// Open (creating) the journal in `dir`, and read back what it holds.
    pub(super) fn open(dir: &Path) -> Result<(Self, Vec<Record>), TrustError> {
        let dir = TrustedDir::create(dir, Owner::SelfOrRoot)?;
        let file = dir.open_append(FILE_NAME, 0o600)?;
        let path = dir.path().join(FILE_NAME);
        let io = |op| {
            let path = path.clone();
            move |source| TrustError::Io { op, path, source }
        };
        let (records, good_len) = read_records(&file, &path).map_err(io("read"))?;
        // A torn last line is cut off, so the next record starts on a line of its own.
        if good_len < file.metadata().map_err(io("read"))?.len() {
            file.set_len(good_len).map_err(io("cut the torn tail of"))?;
        }
        let journal = Self {
            dir,
            file,
            len: good_len,
            compact_at: COMPACT_BYTES.max(good_len * 2),
        };
        Ok((journal, records))
    }

    pub(super) fn append(&mut self, record: &Record) -> io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        if let Err(e) = self.file.write_all(&line) {
            // A partly written line would swallow the next record into garbage: cut it off.
            let _ = self.file.set_len(self.len);
            return Err(e);
        }
        self.len += line.len() as u64;
        Ok(())
    }

    pub(super) fn wants_compaction(&self) -> bool {
        self.len >= self.compact_at
    }

    /// A handle to sync what has been appended so far, used outside the journal's lock.
    pub(super) fn sync_handle(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// Rewrite the journal as one `put` per message, synced, then renamed into place.
    pub(super) fn compact(&mut self, messages: Vec<Message>) -> Result<(), TrustError> {
        let mut temp = TempFile::create_in(&self.dir, FILE_NAME, 0o600)?;
        let io = |source| TrustError::Io {
            op: "compact",
            path: journal_path(&self.dir),
            source,
        };
        let mut len = 0u64;
        {
            let mut w = io::BufWriter::new(temp.file());
            for message in messages {
                let mut line = serde_json::to_vec(&Record::Put {
                    message: Box::new(message),
                })
                .map_err(|e| io(io::Error::other(e)))?;
                line.push(b'\n');
                w.write_all(&line).map_err(io)?;
                len += line.len() as u64;
            }
            w.flush().map_err(io)?;
        }
        temp.persist(atomic_file::Sync::Durable)?;
        // The renamed file is opened for append from here on (O_APPEND is per open file).
        self.file = self.dir.open_append(FILE_NAME, 0o600)?;
        self.len = len;
        self.compact_at = COMPACT_BYTES.max(len * 2);
        Ok(())
    }
}

/// The journal's path, for a message about it.
fn journal_path(dir: &TrustedDir) -> std::path::PathBuf {
    dir.path().join(FILE_NAME)
}

/// Every complete, well-formed line, and the length of the file up to the last complete
/// line. A line that does not parse in the middle is skipped with a warning (it cannot be
/// ours, but it must not cost the messages after it).
fn read_records(file: &File, path: &Path) -> io::Result<(Vec<Record>, u64)> {
    let mut reader = BufReader::new(file);
    let mut records = vec![];
    let mut good_len = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        if line.last() != Some(&b'\n') {
            if n > MAX_LINE {
                // Not a line of ours (text is capped far below it): skipped like any other
                // garbage, without reading it into memory.
                match skip_line(&mut reader)? {
                    Some(rest) => {
                        tracing::warn!(path = %path.display(), bytes = n as u64 + rest, "skipping an outbox journal line longer than {MAX_LINE} bytes");
                        good_len += n as u64 + rest;
                        continue;
                    }
                    None => {
                        tracing::warn!(path = %path.display(), "outbox journal ends in an overlong torn line; dropping it");
                        break;
                    }
                }
            }
            // The torn tail of a crash.
            tracing::warn!(path = %path.display(), "outbox journal ends in a torn line; dropping it");
            break;
        }
        good_len += n as u64;
        match serde_json::from_slice::<Record>(&line) {
            Ok(r) => records.push(r),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "skipping an unreadable outbox journal line")
            }
        }
    }
    Ok((records, good_len))
}

/// Skip the rest of a line, newline included, holding no more of it than the reader's buffer:
/// the bytes skipped, or `None` when the file ends first.
fn skip_line(reader: &mut impl BufRead) -> io::Result<Option<u64>> {
    let mut skipped = 0u64;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(None);
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(Some(skipped + i as u64 + 1));
            }
            None => {
                let all = buf.len();
                reader.consume(all);
                skipped += all as u64;
            }
        }
    }
}

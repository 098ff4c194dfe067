//! `logs` under launchd: the agent's log files, printed and, with `--follow`, followed as
//! they grow, the way `tail -F` would, a truncated or replaced file read again from the start.
//!
//! A line is printed with every character a terminal would act on shown as an escape: the
//! gateway writes its own lines that way, but a file may hold lines of an older version, or
//! whatever a child printed to stdout, and `logs` must not let either drive the terminal.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::error::LogsError;
use crate::logging::plain_text::words;
use crate::safe_text::visible;

/// How often a followed file is looked at again. launchd offers no way to be told.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// Which lines to print: with `--adapter`, those whose plain-text fields name it.
pub(super) struct Filter {
    /// `adapter=NAME`, as the plain-text log writes the field: one whole word of the line, by
    /// the plain text's own rule (logging/plain_text.rs), so that `adapter=NAME` inside
    /// another field's quoted value is not taken for the field.
    field: Option<String>,
}

impl Filter {
    pub(super) fn new(adapter: Option<&str>) -> Self {
        Filter {
            field: adapter.map(|a| format!("adapter={a}")),
        }
    }

    fn keeps(&self, line: &[u8]) -> bool {
        let Some(field) = &self.field else {
            return true;
        };
        words(line).any(|word| word == field.as_bytes())
    }
}

/// One file being read: where it was read up to, and a line not yet ended.
struct Followed {
    path: PathBuf,
    /// The file's identity and how far it was read; `None` until it exists.
    at: Option<(u64, u64, u64)>,
    partial: Vec<u8>,
}

impl Followed {
    /// Read what was added since the last call, and print its complete lines that `filter`
    /// keeps. A file that is missing is not an error: launchd creates it at the first start.
    fn read_new(&mut self, filter: &Filter, out: &mut impl Write) -> Result<(), LogsError> {
        let read = |source| LogsError::Read {
            path: self.path.clone(),
            source,
        };
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(read(e)),
        };
        let meta = file.metadata().map_err(read)?;
        let offset = match self.at {
            // The same file, not shorter than what was read: go on from there.
            Some((dev, ino, offset))
                if dev == meta.dev() && ino == meta.ino() && meta.len() >= offset =>
            {
                offset
            }
            // A new file, or one truncated: from the start.
            _ => {
                self.partial.clear();
                0
            }
        };
        file.seek(SeekFrom::Start(offset)).map_err(read)?;
        let mut added = Vec::new();
        file.read_to_end(&mut added).map_err(read)?;
        self.at = Some((meta.dev(), meta.ino(), offset + added.len() as u64));
        self.partial.extend_from_slice(&added);
        let complete = match self.partial.iter().rposition(|&b| b == b'\n') {
            Some(end) => self.partial.drain(..=end).collect::<Vec<u8>>(),
            None => return Ok(()),
        };
        for line in complete.split_inclusive(|&b| b == b'\n') {
            if filter.keeps(line) {
                out.write_all(shown(line).as_bytes())
                    .map_err(LogsError::Write)?;
            }
        }
        out.flush().map_err(LogsError::Write)
    }
}

/// Print every file in turn, then, with `follow`, what each one gains, until stdout is closed.
pub(super) fn print(
    paths: &[PathBuf],
    filter: &Filter,
    follow: bool,
    out: &mut impl Write,
) -> Result<(), LogsError> {
    let mut files: Vec<Followed> = paths.iter().map(|p| followed(p)).collect();
    loop {
        for f in &mut files {
            match f.read_new(filter, out) {
                Err(LogsError::Write(e)) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
                other => other?,
            }
        }
        if !follow {
            return Ok(());
        }
        std::thread::sleep(FOLLOW_POLL);
    }
}

/// A line of a file as it is printed: text (bytes that are not UTF-8 as U+FFFD), every
/// character a terminal would act on as an escape, and its own newline.
fn shown(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(line));
    format!("{}\n", visible(&text))
}

fn followed(path: &Path) -> Followed {
    Followed {
        path: path.to_owned(),
        at: None,
        partial: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adapter_filter_matches_the_whole_field_only() {
        let f = Filter::new(Some("qq"));
        assert!(f.keeps(b"2026-12-01T09:00:00Z  INFO connection closed adapter=qq code=4000\n"));
        assert!(!f.keeps(b"2026-12-01T09:00:00Z  INFO connection closed adapter=qq2\n"));
        assert!(!f.keeps(b"2026-12-01T09:00:00Z  INFO gateway ready profile=qq\n"));
        assert!(Filter::new(None).keeps(b"anything\n"));
        // A platform's text that names the adapter inside another field's value.
        let forged = br#"2026-12-01T09:00:00Z  WARN poll failed adapter=tg reason="x\n... adapter=qq" id=Some("a adapter=qq")"#;
        assert!(!f.keeps(forged));
        assert!(Filter::new(Some("tg")).keeps(forged));
    }

    #[test]
    fn control_characters_in_a_file_are_printed_as_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.out.log");
        std::fs::write(&path, b"old\x1b[2J\x1b]0;x\x07 line\rover\xff\nnext\n").unwrap();
        let mut out = Vec::new();
        followed(&path)
            .read_new(&Filter::new(None), &mut out)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "old\\x1b[2J\\x1b]0;x\\x07 line\\rover\u{fffd}\nnext\n"
        );
    }

    /// Lines are printed whole: a line still being written waits for its end, and a file that
    /// was truncated is read again from its start.
    #[test]
    fn new_lines_are_printed_once_and_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.err.log");
        let mut f = followed(&path);
        let mut out = Vec::new();
        let all = Filter::new(None);
        f.read_new(&all, &mut out).unwrap();
        assert!(out.is_empty(), "a missing file prints nothing");
        std::fs::write(&path, "one\ntw").unwrap();
        f.read_new(&all, &mut out).unwrap();
        assert_eq!(out, b"one\n");
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"o\n").unwrap();
        f.read_new(&all, &mut out).unwrap();
        assert_eq!(out, b"one\ntwo\n");
        std::fs::write(&path, "3\n").unwrap();
        f.read_new(&all, &mut out).unwrap();
        assert_eq!(out, b"one\ntwo\n3\n");
    }
}

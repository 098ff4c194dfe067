//! `logs` under launchd: the agent's log files, printed and, with `--follow`, followed as
//! they grow, the way `tail -F` would, a truncated or replaced file read again from the start.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::LogsError;

/// How often a followed file is looked at again. launchd offers no way to be told.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// Which lines to print: with `--adapter`, those whose plain-text fields name it.
pub(super) struct Filter {
    /// `adapter=NAME`, as the plain-text log writes the field.
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
        line.split(|b| b.is_ascii_whitespace())
            .any(|word| word == field.as_bytes())
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
                out.write_all(line).map_err(LogsError::Write)?;
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

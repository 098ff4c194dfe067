//! Counting the lines of a file another process keeps appending to (a spool, a cron job's
//! output) as a test polls it, without rereading what it has already counted.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

/// Counts the lines of a file that only grows, reading each byte once.
pub struct LineCounter {
    path: PathBuf,
    offset: u64,
    lines: usize,
    buf: Vec<u8>,
}

impl LineCounter {
    pub fn new(path: PathBuf) -> Self {
        LineCounter {
            path,
            offset: 0,
            lines: 0,
            buf: vec![0; 1 << 20],
        }
    }

    pub fn count(&mut self) -> usize {
        let Ok(mut f) = fs::File::open(&self.path) else {
            return self.lines;
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return self.lines;
        }
        loop {
            match f.read(&mut self.buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    self.offset += n as u64;
                    self.lines += self.buf[..n].iter().filter(|&&b| b == b'\n').count();
                }
            }
        }
        self.lines
    }
}

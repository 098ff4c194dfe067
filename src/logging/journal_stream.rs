//! Whether stderr is the journal: `JOURNAL_STREAM` names the stream systemd connected, and
//! it counts only while fd 2 is still that stream.
//!
//! systemd.exec(5) sets `JOURNAL_STREAM=DEVICE:INODE` for a service whose stdout or stderr
//! goes to the journal, and says to compare it with `fstat(2)` of the fd: the variable is
//! inherited by children whose stderr may have been redirected (`hermes-svc ... 2>file` run
//! from a cron job of the gateway), and those must keep writing plain text where they were
//! told to.

use std::os::fd::AsFd;

/// The device and inode `JOURNAL_STREAM` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StreamId {
    dev: u64,
    ino: u64,
}

/// `DEVICE:INODE`, both decimal, as systemd writes them; anything else names no stream.
fn parse(value: &str) -> Option<StreamId> {
    let (dev, ino) = value.split_once(':')?;
    Some(StreamId {
        dev: dev.parse().ok()?,
        ino: ino.parse().ok()?,
    })
}

/// The device and inode of what `fd` is open on.
// `dev_t` and `ino_t` are u64 on Linux (the casts are no-ops there) and narrower elsewhere.
#[allow(clippy::unnecessary_cast)]
fn identify(fd: impl AsFd) -> Option<StreamId> {
    let st = nix::sys::stat::fstat(fd).ok()?;
    Some(StreamId {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
    })
}

/// True when `JOURNAL_STREAM` is set and names the stream fd 2 is open on.
pub(super) fn stderr_is_journal() -> bool {
    std::env::var("JOURNAL_STREAM")
        .ok()
        .as_deref()
        .and_then(parse)
        .is_some_and(|named| identify(std::io::stderr()) == Some(named))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_and_inode_parse_as_systemd_writes_them() {
        assert_eq!(
            parse("8:123456"),
            Some(StreamId {
                dev: 8,
                ino: 123456
            })
        );
        for bad in ["", "8", "8:", ":1", "a:1", "8:1:2", " 8:1", "-1:2"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    /// The comparison systemd documents, made on real files: a stream is recognised by its
    /// own device and inode and by no other file's.
    #[test]
    fn a_stream_is_known_by_its_own_device_and_inode() {
        let a = tempfile::tempfile().unwrap();
        let b = tempfile::tempfile().unwrap();
        let id = identify(&a).unwrap();
        let named = parse(&format!("{}:{}", id.dev, id.ino)).unwrap();
        assert_eq!(identify(&a), Some(named));
        assert_ne!(identify(&b), Some(named));
    }
}

//! Whole-file writes that never leave a half-written file behind.
//!
//! A crash or a full disk mid-write leaves either the old file or the new one: the content goes
//! to a temporary file in the same directory, is synced, and is then renamed over the target.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Write `contents` to `path` atomically, creating parent directories, with `mode` for a new
/// file (an existing file's mode is kept, so a person's `chmod` survives).
pub(crate) fn write(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    write_with(path, contents, mode, Sync::Durable)
}

/// Whether the new content must survive a machine crash, or only be replaced whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sync {
    /// fsync the file and its directory: unit files, pid files, anything a person relies on.
    Durable,
    /// Rename only: readers still never see a half file, but a crash may leave the previous
    /// version. For snapshots rewritten every few seconds, whose readers treat an old one as
    /// stale anyway; an fsync per tick would cost more than the snapshot is worth.
    Replace,
}

/// [`write`] with a choice of durability.
pub(crate) fn write_with(path: &Path, contents: &[u8], mode: u32, sync: Sync) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
    fs::create_dir_all(dir)?;
    let mode = match fs::metadata(path) {
        Ok(meta) => std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777,
        Err(_) => mode,
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(contents)?;
        if sync == Sync::Durable {
            f.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if sync == Sync::Durable {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_and_keeps_mode() {
        let dir = std::env::temp_dir().join(format!("hsv-atomic-{}", std::process::id()));
        let p = dir.join("a/b.txt");
        write(&p, b"one", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "one");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        write(&p, b"two", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
        fs::remove_dir_all(dir).unwrap();
    }
}

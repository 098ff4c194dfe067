//! The plan's steps on files, carried out the same way for every manager: whole files written
//! atomically, backups copied, foreign files moved aside, our files removed.

use std::io;
use std::path::{Path, PathBuf};

use crate::atomic_file;
use crate::service::plan::Step;

/// A file step that failed; the steps before it have happened.
#[derive(Debug, thiserror::Error)]
#[error("failed to {what} {path}")]
pub(crate) struct FileError {
    what: &'static str,
    path: PathBuf,
    #[source]
    source: io::Error,
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> FileError + 'a {
    move |source| FileError {
        what,
        path: path.to_owned(),
        source,
    }
}

/// Carry out `step` if it is a step on files; the manager's steps are the backend's.
pub(crate) fn apply(step: &Step) -> Result<(), FileError> {
    match step {
        Step::WriteFile {
            path,
            contents,
            mode,
        } => atomic_file::write(path, contents.as_bytes(), *mode).map_err(io_err("write", path))?,
        Step::Backup { from, to } => {
            std::fs::copy(from, to).map_err(io_err("back up", from))?;
        }
        Step::MoveAside { from, to } => {
            std::fs::rename(from, to).map_err(io_err("move aside", from))?
        }
        Step::PutBack { from, to } => {
            std::fs::rename(from, to).map_err(io_err("put back", from))?
        }
        Step::RemoveFile { path } | Step::RemoveLeftover { path } => {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(io_err("remove", path)(e))
                }
                _ => {}
            }
        }
        Step::CreateDir { path, user } => {
            create_owned_dir(path, user).map_err(io_err("create", path))?
        }
        Step::RemoveEmptyDir { path } => {
            // Not empty (a person's drop-ins) or already gone are both fine.
            let _ = std::fs::remove_dir(path);
        }
        _ => {}
    }
    Ok(())
}

/// Create `path` and its missing parents for `user`: each directory this creates is theirs,
/// mode 0700; one that exists is left as it is.
fn create_owned_dir(path: &Path, user: &str) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let account = nix::unistd::User::from_name(user)
        .map_err(io::Error::from)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no user {user}")))?;
    let missing: Vec<&Path> = path.ancestors().take_while(|p| !p.exists()).collect();
    for dir in missing.into_iter().rev() {
        std::fs::DirBuilder::new().mode(0o700).create(dir)?;
        nix::unistd::chown(dir, Some(account.uid), Some(account.gid)).map_err(io::Error::from)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// Needs root, as the whole suite does (scripts/test): only root can give a directory away.
    #[test]
    fn a_system_units_home_is_created_for_its_user() {
        let base = std::env::temp_dir().join(format!("hsv-owned-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let home = base.join(".hermes/profiles/coder");
        create_owned_dir(&home, "nobody").unwrap();
        let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
        for dir in [
            base.join(".hermes"),
            base.join(".hermes/profiles"),
            home.clone(),
        ] {
            let meta = std::fs::metadata(&dir).unwrap();
            assert_eq!(meta.uid(), nobody.uid.as_raw(), "{}", dir.display());
            assert_eq!(
                meta.permissions().mode() & 0o777,
                0o700,
                "{}",
                dir.display()
            );
        }
        assert_eq!(
            std::fs::metadata(&base).unwrap().uid(),
            0,
            "an existing parent is left"
        );
        let _ = std::fs::remove_dir_all(base);
    }
}

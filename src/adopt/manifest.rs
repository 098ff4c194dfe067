//! The adopt's record, `PROFILE_HOME/agent/adopt/`: a copy of every file of Hermes's that
//! adopt rewrites or removes, taken before anything else changes, and a manifest of what was
//! found and done.
//!
//! It is what makes adopt resumable and undoable. A run killed anywhere finds the manifest and
//! maps Hermes's settings from the backup copies, which never change, rather than from files
//! it may already have split, so every run computes the same switch and each step checks
//! before it acts. `--undo` restores those copies byte for byte (content and mode), puts the
//! moved state back, and brings back Hermes's service as the manifest says it was.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::AdoptError;

/// The manifest's file name, in the record directory.
const MANIFEST: &str = "manifest.json";
/// Where the backup copies go, in the record directory, under their path in the home.
const BACKUP: &str = "backup";

/// How far a run got. Each phase is written only once everything before it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The backups are taken; nothing of Hermes's has changed yet.
    BackedUp,
    /// The switch is complete: the gateway holds the platforms, Hermes runs as its agent.
    Done,
}

/// One of Hermes's files as it was before adopt: copied whole, or recorded as missing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Original {
    /// Relative to the profile home.
    pub path: PathBuf,
    /// `None` when the file did not exist: undo removes what adopt wrote there.
    pub sha256: Option<String>,
    pub mode: Option<u32>,
}

/// Hermes's own gateway job as adopt found it, before it was retired.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HermesJob {
    pub name: String,
    /// Its file (`--migrate` moves it aside as `FILE.migrated.SECONDS`).
    pub path: Option<PathBuf>,
    pub enabled: bool,
    pub active: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    /// Seconds since the epoch at the first run: also the suffix of the retired job's file.
    pub started_at: u64,
    pub phase: Phase,
    pub originals: Vec<Original>,
    /// Copies of the other files the mapping reads (pairings, cron jobs, stored logins): what
    /// a later run maps from. Never restored: those files move with Hermes's state.
    #[serde(default)]
    pub copies: Vec<Original>,
    /// Hermes's jobs serving the profile, as first observed (a re-run sees them retired).
    #[serde(default)]
    pub hermes_jobs: Option<Vec<HermesJob>>,
    /// Whether Hermes's new home (`agent/hermes`) existed before adopt.
    pub agent_home_existed: bool,
}

/// The record directory of one profile.
pub struct Record {
    dir: PathBuf,
}

impl Record {
    pub fn new(agent_dir: &Path) -> Record {
        Record {
            dir: agent_dir.join("adopt"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The manifest, if a run has written one.
    pub fn read(&self) -> Result<Option<Manifest>, AdoptError> {
        let path = self.dir.join(MANIFEST);
        let Some(bytes) = read_own(&path)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| AdoptError::Record {
                path,
                why: format!("it does not read as adopt's manifest ({e}); if no adopt is under way, remove {}", self.dir.display()),
            })
    }

    pub fn write(&self, manifest: &Manifest) -> Result<(), AdoptError> {
        let path = self.dir.join(MANIFEST);
        let text = serde_json::to_vec_pretty(manifest).expect("a manifest serialises");
        self.make_dir()?;
        crate::atomic_file::write(&path, &text, 0o600).map_err(|e| AdoptError::io(&path, e))
    }

    fn make_dir(&self) -> Result<(), AdoptError> {
        fs::create_dir_all(&self.dir).map_err(|e| AdoptError::io(&self.dir, e))?;
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| AdoptError::io(&self.dir, e))
    }

    /// Copy each of `paths` (relative to `home`) into the record, or note it missing.
    pub fn back_up(&self, home: &Path, paths: &[&str]) -> Result<Vec<Original>, AdoptError> {
        self.make_dir()?;
        let mut out = vec![];
        for rel in paths {
            let from = home.join(rel);
            let original = match read_own(&from)? {
                None => Original {
                    path: PathBuf::from(rel),
                    sha256: None,
                    mode: None,
                },
                Some(bytes) => {
                    let mode = fs::metadata(&from)
                        .map_err(|e| AdoptError::io(&from, e))?
                        .permissions()
                        .mode()
                        & 0o7777;
                    let to = self.backup_path(Path::new(rel));
                    if let Some(parent) = to.parent() {
                        fs::create_dir_all(parent).map_err(|e| AdoptError::io(parent, e))?;
                    }
                    crate::atomic_file::write(&to, &bytes, 0o600)
                        .map_err(|e| AdoptError::io(&to, e))?;
                    Original {
                        path: PathBuf::from(rel),
                        sha256: Some(sha256(&bytes)),
                        mode: Some(mode),
                    }
                }
            };
            out.push(original);
        }
        Ok(out)
    }

    fn backup_path(&self, rel: &Path) -> PathBuf {
        self.backup_dir().join(rel)
    }

    /// The backup copies, laid out as in the home: a Hermes home as it was, to map from.
    pub fn backup_dir(&self) -> PathBuf {
        self.dir.join(BACKUP)
    }

    /// The backup copy of `original`, checked against the hash the manifest took.
    pub fn copy_of(&self, original: &Original) -> Result<Option<Vec<u8>>, AdoptError> {
        let Some(want) = &original.sha256 else {
            return Ok(None);
        };
        let path = self.backup_path(&original.path);
        let bytes = read_own(&path)?.ok_or_else(|| AdoptError::Record {
            path: path.clone(),
            why: "the backup copy is missing".into(),
        })?;
        if &sha256(&bytes) != want {
            return Err(AdoptError::Record {
                path,
                why: "the backup copy is not what adopt took (its sha256 differs)".into(),
            });
        }
        Ok(Some(bytes))
    }

    /// Put `original` back at its place in `home`, byte for byte and with its mode, or remove
    /// what is there when it did not exist.
    pub fn restore(&self, home: &Path, original: &Original) -> Result<(), AdoptError> {
        let to = home.join(&original.path);
        match self.copy_of(original)? {
            Some(bytes) => {
                crate::atomic_file::write(&to, &bytes, 0o600)
                    .map_err(|e| AdoptError::io(&to, e))?;
                let mode = original.mode.unwrap_or(0o600);
                fs::set_permissions(&to, fs::Permissions::from_mode(mode))
                    .map_err(|e| AdoptError::io(&to, e))
            }
            None => match fs::remove_file(&to) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(AdoptError::io(&to, e)),
                _ => Ok(()),
            },
        }
    }

    /// Remove the record: the last step of an undo.
    pub fn remove(&self) -> Result<(), AdoptError> {
        match fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(AdoptError::io(&self.dir, e)),
            _ => Ok(()),
        }
    }
}

/// A file of the user's (or root's), read whole within the usual bound; `None` if missing.
fn read_own(path: &Path) -> Result<Option<Vec<u8>>, AdoptError> {
    crate::bounded_read::read(
        path,
        crate::bounded_read::LIMIT,
        crate::bounded_read::Owner::SelfRootOrDirectory,
    )
    .map_err(|e| AdoptError::Read {
        path: path.to_owned(),
        source: e,
    })
}

pub fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restored_file_is_the_original_byte_for_byte_with_its_mode() {
        let home = tempdir();
        fs::write(home.join(".env"), b"A=1\r\nB='x y'\n").unwrap();
        fs::set_permissions(home.join(".env"), fs::Permissions::from_mode(0o640)).unwrap();
        let record = Record::new(&home.join("agent"));
        let originals = record.back_up(&home, &[".env", "config.yaml"]).unwrap();
        assert_eq!(originals[1].sha256, None);

        fs::write(home.join(".env"), b"A=2\n").unwrap();
        fs::set_permissions(home.join(".env"), fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(home.join("config.yaml"), b"written by adopt\n").unwrap();
        for o in &originals {
            record.restore(&home, o).unwrap();
        }
        assert_eq!(fs::read(home.join(".env")).unwrap(), b"A=1\r\nB='x y'\n");
        let mode = fs::metadata(home.join(".env"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o640);
        assert!(!home.join("config.yaml").exists());
    }

    #[test]
    fn a_changed_backup_copy_is_refused() {
        let home = tempdir();
        fs::write(home.join(".env"), b"A=1\n").unwrap();
        let record = Record::new(&home.join("agent"));
        let originals = record.back_up(&home, &[".env"]).unwrap();
        fs::write(record.dir().join("backup/.env"), b"A=3\n").unwrap();
        let err = record.copy_of(&originals[0]).unwrap_err().to_string();
        assert!(err.contains("sha256"), "{err}");
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "adopt-manifest-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }
}

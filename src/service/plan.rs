//! A plan is the list of effects a command will have, computed before any of them happens.
//!
//! Planning is pure (it reads an observation of the world and returns steps), so `--dry-run`
//! can print exactly what would be done, and tests can check decisions without a bus.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// One effect on the file system or the service manager.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub(crate) enum Step {
    /// Write a whole file atomically.
    WriteFile {
        path: PathBuf,
        #[serde(skip)]
        contents: String,
        #[serde(skip)]
        mode: u32,
    },
    /// Copy a file aside before it is rewritten.
    Backup {
        from: PathBuf,
        to: PathBuf,
    },
    /// Rename a file aside so that the manager no longer sees it, keeping it for the person.
    MoveAside {
        from: PathBuf,
        to: PathBuf,
    },
    /// Rename a file that was moved aside back to its name: undoing a migration.
    PutBack {
        from: PathBuf,
        to: PathBuf,
    },
    RemoveFile {
        path: PathBuf,
    },
    /// Remove a temporary file that a killed hermes-svc left behind. The manager never read
    /// it, so this needs no reload.
    RemoveLeftover {
        path: PathBuf,
    },
    /// Create a directory and every missing parent, owned by `user`, mode 0700: a system
    /// unit's profile home, which `ReadWritePaths=` needs to exist before the first start.
    CreateDir {
        path: PathBuf,
        user: String,
    },
    /// Remove a directory if it is empty (our drop-in directory after uninstall).
    RemoveEmptyDir {
        path: PathBuf,
    },
    Reload,
    Enable {
        unit: String,
    },
    Disable {
        unit: String,
    },
    Start {
        unit: String,
    },
    Stop {
        unit: String,
    },
    Restart {
        unit: String,
    },
    ResetFailed {
        unit: String,
    },
}

impl Step {
    /// Whether the step changes unit files, so the manager must reload afterwards.
    pub(crate) fn touches_unit_files(&self) -> bool {
        matches!(
            self,
            Step::WriteFile { .. }
                | Step::MoveAside { .. }
                | Step::PutBack { .. }
                | Step::RemoveFile { .. }
                | Step::RemoveEmptyDir { .. }
        )
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::WriteFile { path, contents, .. } => {
                write!(f, "write {} ({} bytes)", path.display(), contents.len())
            }
            Step::Backup { from, to } => {
                write!(f, "back up {} to {}", from.display(), to.display())
            }
            Step::MoveAside { from, to } => {
                write!(f, "move {} aside to {}", from.display(), to.display())
            }
            Step::PutBack { from, to } => {
                write!(f, "put {} back as {}", from.display(), to.display())
            }
            Step::RemoveFile { path } => write!(f, "remove {}", path.display()),
            Step::RemoveLeftover { path } => {
                write!(f, "remove leftover temporary file {}", path.display())
            }
            Step::RemoveEmptyDir { path } => write!(f, "remove {} if empty", path.display()),
            Step::CreateDir { path, user } => {
                write!(f, "create {} owned by {user}", path.display())
            }
            Step::Reload => f.write_str("reload the manager"),
            Step::Enable { unit } => write!(f, "enable {unit}"),
            Step::Disable { unit } => write!(f, "disable {unit}"),
            Step::Start { unit } => write!(f, "start {unit}"),
            Step::Stop { unit } => write!(f, "stop {unit}"),
            Step::Restart { unit } => write!(f, "restart {unit}"),
            Step::ResetFailed { unit } => write!(f, "reset the failed state of {unit}"),
        }
    }
}

/// What a command will do, and what it wants the person to know.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Plan {
    pub(crate) unit: String,
    pub(crate) steps: Vec<Step>,
    /// Things the person should know that are not errors (an edited unit left alone, ...).
    pub(crate) notes: Vec<String>,
}

impl Plan {
    pub(crate) fn new(unit: String) -> Self {
        Self {
            unit,
            ..Self::default()
        }
    }

    pub(crate) fn push(&mut self, step: Step) {
        self.steps.push(step);
    }

    pub(crate) fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    pub(crate) fn is_unchanged(&self) -> bool {
        self.steps.is_empty()
    }

    pub(crate) fn changes_files(&self) -> bool {
        self.steps.iter().any(Step::touches_unit_files)
    }
}

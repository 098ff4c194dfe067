//! What a submit or the outbox itself can fail with: the caller's mistakes, each with a
//! stable code for the API, and the outbox's own (its journal, its replica).

use std::io;
use std::path::PathBuf;

use super::MAX_KEY_LEN;
use crate::gateway::send::{TargetError, TextUnit};
use crate::trusted_dir::TrustError;

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("no adapter named {adapter:?} can send (adapters that can: {known})")]
    UnknownAdapter { adapter: String, known: String },
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("text is empty; there is nothing to send")]
    EmptyText,
    #[error("text is {len} {}; {adapter} takes at most {max} in one message", unit.name())]
    TextTooLong {
        adapter: String,
        len: usize,
        max: usize,
        unit: TextUnit,
    },
    #[error("idempotency_key is missing; choose one per message, so that a retried submit is accepted once")]
    MissingKey,
    #[error("idempotency_key is longer than {MAX_KEY_LEN} characters or holds control characters")]
    BadKey,
    #[error("idempotency_key {key:?} was already used for a different message ({id})")]
    KeyReused { key: String, id: String },
    #[error("{adapter} cannot post files; send the text alone, or the file through an adapter that can (docs/media.md lists them)")]
    FilesUnsupported { adapter: String },
    #[error("{adapter} cannot post files to {target}; send the text alone, or the file to a target that takes files (docs/media.md lists them)")]
    FilesUnsupportedTo { adapter: String, target: String },
    #[error("{count} files; {adapter} takes at most {max} in one message: send them in several")]
    TooManyFiles {
        adapter: String,
        count: usize,
        max: usize,
    },
    #[error("file {name:?} is {bytes} bytes; {adapter} takes at most {max} bytes in one file")]
    FileTooLarge {
        adapter: String,
        name: String,
        bytes: u64,
        max: u64,
    },
    #[error("the text that goes with files is {len} {}; {adapter} takes a caption of at most {max}: send the text as a message of its own", unit.name())]
    CaptionTooLong {
        adapter: String,
        len: usize,
        max: usize,
        unit: TextUnit,
    },
    #[error("files are not sent in a cluster yet: a file is on this host only, and the host that takes over could not post it")]
    FilesInCluster,
    #[error("this gateway is not its cluster's active, so it queues nothing; send through the active host (`hermes-svc status` names it)")]
    NotActive,
    #[error(transparent)]
    Outbox(#[from] OutboxError),
}

impl SubmitError {
    /// A stable code for API answers.
    pub fn code(&self) -> &'static str {
        match self {
            SubmitError::UnknownAdapter { .. } => "unknown_adapter",
            SubmitError::Target(_) => "bad_target",
            SubmitError::EmptyText => "empty_text",
            SubmitError::TextTooLong { .. } => "text_too_long",
            SubmitError::MissingKey => "missing_idempotency_key",
            SubmitError::BadKey => "bad_idempotency_key",
            SubmitError::KeyReused { .. } => "idempotency_key_reused",
            SubmitError::FilesUnsupported { .. } | SubmitError::FilesUnsupportedTo { .. } => {
                "files_unsupported"
            }
            SubmitError::TooManyFiles { .. } => "too_many_files",
            SubmitError::FileTooLarge { .. } => "file_too_large",
            SubmitError::CaptionTooLong { .. } => "caption_too_long",
            SubmitError::FilesInCluster => "files_in_cluster",
            SubmitError::NotActive => "not_active",
            SubmitError::Outbox(_) => "outbox_write_failed",
        }
    }

    /// The caller's mistake (4xx), rather than ours (5xx).
    pub fn is_client_error(&self) -> bool {
        !matches!(self, SubmitError::Outbox(_) | SubmitError::NotActive)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// The journal or its directory, as the profile home's rule sees them: a link, a FIFO,
    /// someone else's, or writable by others; or one that could not be opened at all.
    #[error("outbox: cannot open the journal")]
    Open(#[source] TrustError),
    /// The cluster's replica (etcd) refused or could not be asked.
    #[error("outbox: cannot {op}: {why}")]
    Replica { op: &'static str, why: String },
    /// A file to send could not be copied into the outbox.
    #[error("outbox: cannot keep a file to send")]
    File(#[source] TrustError),
    #[error("outbox {}: cannot {op}", dir.display())]
    Io {
        op: &'static str,
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl OutboxError {
    /// The error on one line, with what to do about it: what the state file, `status` and
    /// doctor show of an outbox that could not be opened.
    pub(crate) fn with_fix(&self) -> String {
        let said = crate::error_chain::one_line(self);
        let denied = |e: &io::Error| {
            matches!(
                e.raw_os_error().map(nix::errno::Errno::from_raw),
                Some(nix::errno::Errno::EACCES | nix::errno::Errno::EPERM)
            )
        };
        match self {
            // The rule's refusals name the file and what to do with it.
            OutboxError::Open(e) if e.needs_a_fix() => {
                format!("{said}; then restart the gateway (a new journal starts empty)")
            }
            OutboxError::Open(TrustError::Io { source, path, .. }) if denied(source) => format!(
                "{said}: the gateway's user cannot read and write {}: give it back to that \
                 user (chown, chmod 600), or move it aside, then restart the gateway",
                path.display()
            ),
            _ => format!(
                "{said}: check the outbox directory and its journal, then restart the gateway"
            ),
        }
    }
}

//! The values the shell completes as a person types (`--profile`'s profiles, `completions`'
//! shells): what the clap grammar (`args.rs`) names as its completers, below it, while
//! `shell_help.rs` renders the scripts and pages from the grammar, above it.

use std::ffi::OsStr;

use clap_complete::engine::CompletionCandidate;
use clap_complete::env::Shells;

/// The shells `completions` knows, by name.
pub(super) fn shell_names() -> Vec<&'static str> {
    Shells::builtins().names().collect()
}

/// `--profile` candidates: the profiles with a home under `$HERMES_HOME` (or `~/.hermes`).
/// A completion must never fail loudly, so an unreadable home offers nothing.
pub(super) fn profiles(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(prefix) = current.to_str() else {
        return vec![];
    };
    let Ok(home) = crate::profile::hermes_home_from_env() else {
        return vec![];
    };
    crate::profile::names_in(&home)
        .into_iter()
        .map(|n| n.as_str().to_owned())
        .filter(|n| n.starts_with(prefix))
        .map(CompletionCandidate::new)
        .collect()
}

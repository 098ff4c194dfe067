//! hermes-svc: a messaging-bot gateway as a native systemd (or launchd) service, one unit per
//! profile. See docs/architecture.md for the map of modules.

// The modules are public for the integration tests and benches, not as an API: their docs are
// for the project's developers (`cargo doc --document-private-items`, checked in CI), and may
// name the private items they explain.
#![allow(rustdoc::private_intra_doc_links)]

pub mod access;
pub mod adopt;
pub mod agent;
pub(crate) mod ansi;
pub mod api;
pub mod atomic_file;
pub mod bounded_read;
pub mod cli;
pub(crate) mod cluster;
pub mod config;
pub mod demo;
pub mod doctor;
pub mod edit_lock;
pub mod env_file;
pub mod error_chain;
pub mod exit_code;
pub mod gateway;
pub mod hermes_home;
pub mod launchd;
pub(crate) mod lock_holder;
pub(crate) mod logging;
pub mod media;
pub mod mock_platform;
pub mod platform;
pub mod process_probe;
pub mod profile;
pub(crate) mod redact;
pub(crate) mod runtime;
pub mod safe_text;
pub mod service;
pub mod status;
pub mod systemd;
pub mod test_hook;
pub mod trusted_dir;

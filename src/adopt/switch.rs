//! The files of the switch: what the mapping decided, written into the two homes once
//! Hermes's gateway is stopped, and taken out again on undo.
//!
//! Every step checks before it acts, so a run killed anywhere converges when run again: a
//! move is a rename that either happened or did not, and a write writes the same bytes.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::manifest::{Manifest, Record};
use super::{state, AdoptError};

/// What adopt writes, as bytes: made from Hermes's settings by the mapping, the same on every
/// run (it is made from the backup copies).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Switch {
    /// The profile's new `gateway.toml`.
    pub gateway_toml: String,
    /// The profile `.env` from now on: the adopted platforms' credentials alone.
    pub gateway_env: String,
    /// Hermes's `.env` in its new home: every other line of its old one.
    pub hermes_env: String,
    /// Hermes's `config.yaml` with the adopted credentials taken out, or `None` when it moves
    /// as it is.
    pub hermes_config: Option<String>,
    /// Hermes's `cron/jobs.json` with deliveries to adopted platforms sent through the Relay,
    /// or `None` when no job changes.
    pub jobs_json: Option<String>,
    /// Other files for the gateway, relative to the profile home (a login file), with modes.
    pub files: Vec<(PathBuf, Vec<u8>, u32)>,
    /// The proxy Hermes used, for the gateway's drop-in (`HTTPS_PROXY`).
    pub proxy: Option<String>,
}

impl std::fmt::Debug for Switch {
    /// Never the contents: two of them hold credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Switch")
            .field(
                "files",
                &self.files.iter().map(|f| &f.0).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// The files adopt rewrites or adds: backed up before anything changes (or recorded as
/// missing), and restored byte for byte by undo. (`cron/jobs.json` is rewritten too, but also
/// holds run state Hermes keeps updating: undo puts back only the fields adopt changed.)
pub const REWRITTEN: &[&str] = &[".env", "config.yaml", "gateway.toml", "access/pairing.json"];

const CONFIG: &str = "config.yaml";
const JOBS: &str = "cron/jobs.json";

/// Write `switch` into `home` (the profile's) and `agent_home` (Hermes's new one), with
/// Hermes stopped. Returns what it did, one line each, for the report.
pub fn apply(home: &Path, agent_home: &Path, switch: &Switch) -> Result<Vec<String>, AdoptError> {
    let mut did = vec![];
    for name in state::move_all(home, agent_home)? {
        did.push(format!("moved {name} to {}", agent_home.display()));
    }
    crate::test_hook::kill_at("adopt", "moved");
    let (config, new_config) = (home.join(CONFIG), agent_home.join(CONFIG));
    match &switch.hermes_config {
        Some(text) => {
            write(&new_config, text.as_bytes(), 0o600)?;
            remove(&config)?;
            did.push(format!(
                "wrote {} without the adopted credentials",
                new_config.display()
            ));
        }
        None if config.exists() && !new_config.exists() => {
            fs::rename(&config, &new_config).map_err(|e| AdoptError::io(&config, e))?;
            did.push(format!("moved {CONFIG} to {}", agent_home.display()));
        }
        None => {}
    }
    if let Some(jobs) = &switch.jobs_json {
        write(&agent_home.join(JOBS), jobs.as_bytes(), 0o600)?;
        did.push("sent cron deliveries to adopted platforms through the Relay".into());
    }
    write(
        &agent_home.join(".env"),
        switch.hermes_env.as_bytes(),
        0o600,
    )?;
    write(&home.join(".env"), switch.gateway_env.as_bytes(), 0o600)?;
    write(
        &home.join("gateway.toml"),
        switch.gateway_toml.as_bytes(),
        0o600,
    )?;
    for (rel, bytes, mode) in &switch.files {
        write(&home.join(rel), bytes, *mode)?;
    }
    did.push(format!(
        "wrote gateway.toml and the gateway's .env in {}, Hermes's .env in {}",
        home.display(),
        agent_home.display()
    ));
    Ok(did)
}

/// Take the switch out again, with the gateway stopped: Hermes's state back into `home`, and
/// every file adopt rewrote restored byte for byte from the record.
pub fn undo(
    home: &Path,
    agent_home: &Path,
    record: &Record,
    manifest: &Manifest,
) -> Result<Vec<String>, AdoptError> {
    let mut did = vec![];
    if agent_home.exists() {
        for name in state::move_all(agent_home, home)? {
            did.push(format!("moved {name} back to {}", home.display()));
        }
    }
    for original in &manifest.originals {
        record.restore(home, original)?;
    }
    did.push(format!(
        "restored {} as they were",
        manifest
            .originals
            .iter()
            .map(|o| o.path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    for name in [".env", CONFIG] {
        remove(&agent_home.join(name))?;
    }
    if !manifest.agent_home_existed {
        // Empty unless Hermes made something new there since: then it stays, and says so.
        if fs::remove_dir(agent_home).is_err() && agent_home.exists() {
            did.push(format!(
                "left {}: it holds files made since the adopt",
                agent_home.display()
            ));
        }
    }
    Ok(did)
}

/// What [`apply`] would write, one line each, for `--dry-run`.
pub fn describe(home: &Path, agent_home: &Path, switch: &Switch) -> Vec<String> {
    let mut out = vec![];
    match &switch.hermes_config {
        Some(_) => out.push(format!(
            "write {} without the adopted credentials, and remove {}",
            agent_home.join(CONFIG).display(),
            home.join(CONFIG).display()
        )),
        None => out.push(format!(
            "move {} to {}",
            home.join(CONFIG).display(),
            agent_home.display()
        )),
    }
    if switch.jobs_json.is_some() {
        out.push(format!(
            "rewrite {} so deliveries to adopted platforms go through the Relay",
            agent_home.join(JOBS).display()
        ));
    }
    out.push(format!(
        "write {} (Hermes's .env without the adopted platforms' variables, 0600)",
        agent_home.join(".env").display()
    ));
    out.push(format!(
        "write {} (the adopted platforms' credentials alone, 0600)",
        home.join(".env").display()
    ));
    out.push(format!("write {}", home.join("gateway.toml").display()));
    for (rel, _, mode) in &switch.files {
        out.push(format!("write {} ({mode:o})", home.join(rel).display()));
    }
    out
}

fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<(), AdoptError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| AdoptError::io(parent, e))?;
    }
    crate::atomic_file::write(path, bytes, mode).map_err(|e| AdoptError::io(path, e))?;
    // A file that existed keeps its mode through atomic_file; these hold secrets, so narrow.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(|e| AdoptError::io(path, e))
}

fn remove(path: &Path) -> Result<(), AdoptError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(AdoptError::io(path, e)),
        _ => Ok(()),
    }
}

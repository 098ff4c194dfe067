//! Hermes's state, moved from the profile home into the agent's Hermes home
//! (`agent/hermes`), and back on undo.
//!
//! The two homes are one directory before adopt: Hermes's home is the profile home. Hermes
//! must not stay there, because its gateway takes the same `gateway.lock` and `gateway.pid`
//! ours does (and deletes ours as stale), and because the profile `.env` becomes the gateway's
//! alone (docs/research/adopt.md §1.3, §8.1). So its memory, sessions, skills, cron and
//! provider logins move, by an explicit list, with Hermes stopped: each is one `rename(2)`
//! on the same file system, so a kill leaves each entry in one home or the other, never
//! half. What is not on the list stays: other profiles, `active_profile`, Hermes's own
//! installation, the logs, and everything of the gateway's.

use std::fs;
use std::io;
use std::path::Path;

use super::AdoptError;

/// What Hermes keeps in its home that goes with it (hermes-agent 0.19.0: `hermes_cli/profiles.py`
/// and the files its gateway names). `config.yaml`, `.env` and `cron/jobs.json` are handled
/// apart: adopt rewrites them.
pub const ENTRIES: &[&str] = &[
    "SOUL.md",
    "state.db",
    "state.db-wal",
    "state.db-shm",
    "response_store.db",
    "response_store.db-wal",
    "response_store.db-shm",
    "memory_store.db",
    "memory_store.db-wal",
    "memory_store.db-shm",
    "memories",
    "skills",
    "sessions",
    "cron",
    "plugins",
    "scripts",
    "knowledge",
    "preferences",
    "skins",
    "plans",
    "workspace",
    "home",
    "auth.json",
    ".op.env",
    ".anthropic_oauth.json",
    "honcho.json",
    "mem0.json",
    "platforms",
    "pairing",
    "gateway.json",
    "gateway_state.json",
    "gateway-starts.log",
    "gateway",
    "processes.json",
    "slack_tokens.json",
];

/// Where one entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Nowhere,
    From,
    To,
    /// In both homes: something made it again in the home it had left.
    Both,
}

fn place(from: &Path, to: &Path, name: &str) -> Result<Place, AdoptError> {
    let exists = |p: &Path| -> Result<bool, AdoptError> {
        match fs::symlink_metadata(p) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(AdoptError::io(p, e)),
        }
    };
    Ok(match (exists(&from.join(name))?, exists(&to.join(name))?) {
        (false, false) => Place::Nowhere,
        (true, false) => Place::From,
        (false, true) => Place::To,
        (true, true) => Place::Both,
    })
}

/// The entries of [`ENTRIES`] still in `from`: what a move would do (for `--dry-run`).
pub fn pending(from: &Path, to: &Path) -> Result<Vec<&'static str>, AdoptError> {
    let mut out = vec![];
    for name in ENTRIES {
        if matches!(place(from, to, name)?, Place::From | Place::Both) {
            out.push(*name);
        }
    }
    Ok(out)
}

/// Move every entry of [`ENTRIES`] from `from` to `to` (created 0700 if missing); an entry
/// already moved is left. An entry in both is refused, naming both: merging two Hermes
/// states is for a person to decide.
pub fn move_all(from: &Path, to: &Path) -> Result<Vec<&'static str>, AdoptError> {
    crate::trusted_dir::TrustedDir::create(to, crate::bounded_read::Owner::SelfOrRoot).map_err(
        |e| AdoptError::Trust {
            path: to.to_owned(),
            source: e,
        },
    )?;
    let mut moved = vec![];
    for name in ENTRIES {
        match place(from, to, name)? {
            Place::From => {
                let (a, b) = (from.join(name), to.join(name));
                fs::rename(&a, &b).map_err(|e| AdoptError::io(&a, e))?;
                moved.push(*name);
                crate::test_hook::kill_at("adopt-moving", name);
            }
            Place::Both => {
                return Err(AdoptError::BothHomes {
                    name: (*name).to_owned(),
                    from: from.to_owned(),
                    to: to.to_owned(),
                })
            }
            Place::Nowhere | Place::To => {}
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "adopt-state-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn state_moves_there_and_back_and_a_second_move_changes_nothing() {
        let home = tempdir();
        let agent = home.join("agent/hermes");
        fs::create_dir_all(home.join("memories")).unwrap();
        fs::write(home.join("memories/MEMORY.md"), "likes tea").unwrap();
        fs::write(home.join("state.db"), "db").unwrap();
        fs::write(home.join("gateway.toml"), "ours").unwrap();
        fs::create_dir_all(home.join("profiles/other")).unwrap();

        let moved = move_all(&home, &agent).unwrap();
        assert_eq!(moved, ["state.db", "memories"]);
        assert_eq!(
            fs::read_to_string(agent.join("memories/MEMORY.md")).unwrap(),
            "likes tea"
        );
        assert!(home.join("gateway.toml").exists() && home.join("profiles/other").exists());
        assert!(move_all(&home, &agent).unwrap().is_empty());

        let back = move_all(&agent, &home).unwrap();
        assert_eq!(back, ["state.db", "memories"]);
        assert!(home.join("memories/MEMORY.md").exists());
    }

    #[test]
    fn an_entry_in_both_homes_is_refused_by_name() {
        let home = tempdir();
        let agent = home.join("agent/hermes");
        fs::create_dir_all(&agent).unwrap();
        fs::write(home.join("state.db"), "a").unwrap();
        fs::write(agent.join("state.db"), "b").unwrap();
        let err = move_all(&home, &agent).unwrap_err().to_string();
        assert!(err.contains("state.db"), "{err}");
    }
}

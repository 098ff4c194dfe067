//! From a Hermes home to the switch: the mapping's result checked (a refusal stops adopt
//! before anything changes), turned into the bytes [`Switch`] writes, with the report a person
//! reads, line by line. The same input gives the same switch, which is what lets a killed run
//! go on from the backup copies.

use std::path::Path;

use super::mapping::{self, Mapping};
use super::switch::Switch;
use super::{cron, pairing, AdoptError};
use crate::hermes_home::{self, HermesHome};
use crate::profile::Profile;

/// The switch, and what to tell the person about it.
#[derive(Debug)]
pub struct Planned {
    pub switch: Switch,
    pub report: Vec<String>,
    /// Hermes's platform → the adapter adopt makes for it.
    pub adapters: Vec<(&'static str, String)>,
}

/// Plan the adopt of the Hermes home `source` (the profile home, or on a later run the backup
/// copies of it) for the profile whose home is `profile_home`, with the Relay on `relay_port`
/// when given.
pub fn plan(
    source: &Path,
    profile_home: &Path,
    relay_port: Option<u16>,
) -> Result<Planned, AdoptError> {
    let home = read(source)?;
    let m = mapping::map(&home);
    let mut refused: Vec<String> = m
        .refused
        .iter()
        .map(|(what, why)| format!("{what}: {why}"))
        .collect();
    refused.extend(shared_with_other_profiles(profile_home, &m.gateway_env));
    if !refused.is_empty() {
        return Err(AdoptError::Refused(refused));
    }
    if m.adopted.is_empty() {
        return Err(AdoptError::Refused(vec![format!(
            "{}: Hermes runs no platform a hermes-svc adapter serves here (no credential in .env or config.yaml): nothing to adopt",
            source.display()
        )]));
    }
    let mut report = report(&m);
    let jobs_json = match &home.cron_jobs {
        Some(text) => {
            let rewrite = cron::rewrite(text, &m.adopted).map_err(|e| {
                AdoptError::Refused(vec![format!(
                    "{}: {e}",
                    source.join("cron/jobs.json").display()
                )])
            })?;
            report.extend(rewrite.notes.iter().map(|n| format!("note: {n}")));
            for c in &rewrite.changes {
                report.push(format!(
                    "cron job {}: deliver {} becomes {}",
                    c.job_id, c.before, c.after
                ));
            }
            (!rewrite.changes.is_empty()).then_some(rewrite.text)
        }
        None => None,
    };
    let mut gateway_toml = m.gateway_toml.clone();
    if let Some(port) = relay_port {
        gateway_toml = gateway_toml.replacen(
            "kind = \"hermes-relay\"\n",
            &format!("kind = \"hermes-relay\"\nport = {port}\n"),
            1,
        );
    }
    let adapters = m
        .adopted
        .iter()
        .map(|a| (a.hermes_platform, a.adapter.clone()))
        .collect();
    Ok(Planned {
        switch: Switch {
            gateway_toml,
            gateway_env: m.gateway_env,
            hermes_env: m.hermes_env,
            hermes_config: m.hermes_config,
            jobs_json,
            files: m.files,
            proxy: m.proxy,
        },
        report,
        adapters,
    })
}

/// A refusal for each credential adopt would give the gateway that another profile's `.env`
/// (beside `profile_home`, under the same Hermes root) already holds: two gateways on one
/// token take each other's events (the first field report), and adopt would make that so.
/// Named by variable, profile and the credential's short hash, never its value.
fn shared_with_other_profiles(profile_home: &Path, gateway_env: &str) -> Vec<String> {
    let root = match profile_home.parent() {
        Some(p) if p.file_name().is_some_and(|n| n == "profiles") => p.parent(),
        _ => Some(profile_home),
    };
    let Some(root) = root else { return vec![] };
    let ours = crate::env_file::parse(gateway_env).0;
    let mut out = vec![];
    for name in crate::profile::names_in(root) {
        let Ok(other) = crate::profile::Profile::new(name.clone(), root.to_owned()) else {
            continue;
        };
        let other_home = other.home();
        if crate::service::served_profile::same_home(&other_home, profile_home) {
            continue;
        }
        let text = crate::env_file::read(
            &other.env_file(),
            crate::bounded_read::Owner::SelfRootOrDirectory,
        )
        .ok()
        .flatten()
        .unwrap_or_default();
        let theirs = crate::env_file::parse(&text).0;
        for (key, value) in &ours {
            if theirs.iter().any(|(_, v)| v == value) {
                out.push(format!(
                    "{key}: profile {name} holds the same credential (hash {}) in {}, and two gateways on one token take each other's events; give this profile its own bot, or switch profile {name} instead",
                    crate::gateway::token_lock::fingerprint(value),
                    other.env_file().display()
                ));
            }
        }
    }
    out
}

fn read(source: &Path) -> Result<HermesHome, AdoptError> {
    hermes_home::read(source).map_err(|e| AdoptError::Refused(vec![e.to_string()]))
}

/// One line per platform (adopted, left with Hermes), then the notes. Never a secret: the
/// mapping keeps those out of everything but the files' contents.
fn report(m: &Mapping) -> Vec<String> {
    let mut out = vec![];
    for a in &m.adopted {
        out.push(format!(
            "adopt {}: adapter {:?} ({} from Hermes's settings)",
            a.hermes_platform,
            a.adapter,
            a.variables.join(", ")
        ));
    }
    for (platform, why) in &m.left {
        out.push(format!("leave {platform} with Hermes: {why}"));
    }
    if let Some(proxy) = &m.proxy {
        out.push(format!(
            "give the gateway HTTPS_PROXY={proxy} (a drop-in setting)"
        ));
    }
    out.extend(m.notes.iter().map(|n| format!("note: {n}")));
    out
}

/// The files of a Hermes home the mapping reads, relative to it, that exist: what the record
/// keeps a copy of, so a later run maps from the same bytes.
pub fn read_files(home: &Path) -> Vec<String> {
    let mut out: Vec<String> = ["gateway.json", "slack_tokens.json", "cron/jobs.json"]
        .iter()
        .filter(|p| home.join(p).is_file())
        .map(|p| (*p).to_owned())
        .collect();
    for dir in ["platforms/pairing", "pairing", "weixin/accounts"] {
        let Ok(entries) = std::fs::read_dir(home.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json") && e.path().is_file() {
                out.push(format!("{dir}/{name}"));
            }
        }
    }
    out
}

/// Merge Hermes's pairings (read from `source`) into `profile`'s store: whom Hermes approved
/// stays approved, a code Hermes sent minutes ago can still be approved. A re-run adds nothing.
pub fn merge_pairings(
    source: &Path,
    planned: &Planned,
    profile: &Profile,
) -> Result<Vec<String>, AdoptError> {
    let home = read(source)?;
    let adapters: Vec<(&str, &str)> = planned
        .adapters
        .iter()
        .map(|(p, a)| (*p, a.as_str()))
        .collect();
    let carried = pairing::carried(
        &home.pairing_files,
        &adapters,
        crate::access::pairing::now(),
    );
    let mut out: Vec<String> = carried.notes.iter().map(|n| format!("note: {n}")).collect();
    if carried.approved.is_empty() && carried.pending.is_empty() {
        return Ok(out);
    }
    let store = crate::access::pairing::Store::new(&profile.access_dir());
    let merged = pairing::merge(&store, &carried).map_err(|e| AdoptError::Record {
        path: store.path(),
        why: e.to_string(),
    })?;
    if !merged.is_empty() {
        out.push(format!(
            "carried {} approved sender(s) and {} waiting code(s) into {}",
            merged.approved.len(),
            merged.pending.len(),
            store.path().display()
        ));
    }
    Ok(out)
}

/// The cron deliveries adopt rewrote, put back in `home`'s `cron/jobs.json` where the job still
/// has what adopt wrote (the file also holds run state Hermes kept since: only those fields go
/// back). Made again from the backup copies in `source`.
pub fn restore_cron(source: &Path, home: &Path) -> Result<Vec<String>, AdoptError> {
    let backup = read(source)?;
    let Some(text) = &backup.cron_jobs else {
        return Ok(vec![]);
    };
    let m = mapping::map(&backup);
    let rewrite =
        cron::rewrite(text, &m.adopted).map_err(|e| AdoptError::Refused(vec![e.to_string()]))?;
    let path = home.join("cron/jobs.json");
    let Some(now) = crate::bounded_read::read_to_string(
        &path,
        crate::bounded_read::LIMIT,
        crate::bounded_read::Owner::SelfOrRoot,
    )
    .map_err(|e| AdoptError::Read {
        path: path.clone(),
        source: e,
    })?
    else {
        return Ok(vec![]);
    };
    let (restored, kept) = cron::restore(&now, &rewrite.changes)
        .map_err(|e| AdoptError::Refused(vec![e.to_string()]))?;
    if restored != now {
        crate::atomic_file::write(&path, restored.as_bytes(), 0o600)
            .map_err(|e| AdoptError::io(&path, e))?;
    }
    Ok(kept.into_iter().map(|k| format!("note: {k}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_another_profile_holds_is_refused_by_profile_and_hash_never_by_value() {
        let root = tempfile::tempdir().unwrap();
        let other = root.path().join("profiles/other");
        let ours = root.path().join("profiles/ours");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::create_dir_all(&ours).unwrap();
        std::fs::write(other.join(".env"), "BOT=111:shared-token-value\n").unwrap();
        std::fs::write(
            ours.join(".env"),
            "TELEGRAM_BOT_TOKEN=111:shared-token-value\n",
        )
        .unwrap();
        let refused =
            shared_with_other_profiles(&ours, "TELEGRAM_BOT_TOKEN=111:shared-token-value\n");
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].starts_with("TELEGRAM_BOT_TOKEN: profile other"),
            "{}",
            refused[0]
        );
        assert!(!refused[0].contains("shared-token-value"));
        assert!(shared_with_other_profiles(&ours, "TELEGRAM_BOT_TOKEN=222:own\n").is_empty());
    }
}

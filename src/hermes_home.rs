//! What a Hermes home holds (docs/research/adopt.md §1-3, §6), read as Hermes reads it, and what
//! one wing makes of it ([`wing::Wing`]): below both the wings (`Platform::from_hermes`) and
//! `adopt`, which read it, and the agent's checks of Hermes's files (`config_yaml`).
//!
//! Its `.env`
//! (dotenv's rules), its `config.yaml` (top-level scalars and the platforms' blocks, by line),
//! the legacy `gateway.json`, Slack's OAuth tokens, Weixin's stored logins, the pairing files
//! and the cron jobs. Read once, bounded, nothing written; every setting a wing asks for is
//! looked up here in Hermes's own order: environment (`.env`), then a top-level scalar of
//! `config.yaml`, then the platform's block.
//!
//! Adopt acts on what it reads (it moves credentials, writes the gateway's config), so a file
//! must be this user's or root's (`Owner::SelfOrRoot`), as for everything the gateway acts on;
//! `agent::hermes::look` accepts the directory's owner too because it only reports.

use std::path::{Path, PathBuf};

pub mod config_yaml;
pub mod dotenv;
pub mod wing;

use crate::bounded_read::{self, Owner};
use crate::config::Secret;
use config_yaml::Entry;
use dotenv::EnvFile;

/// Files read from one directory at most (pairing files, Weixin logins): a home holds a few.
const MAX_FILES: usize = 256;

/// A Hermes home, read.
#[derive(Debug)]
pub struct HermesHome {
    pub path: PathBuf,
    /// `.env`; empty when there is none.
    pub env: EnvFile,
    /// `config.yaml`, when there is one.
    pub config: Option<ConfigYaml>,
    /// The legacy `gateway.json`, when there is one and it is JSON.
    pub gateway_json: Option<serde_json::Value>,
    /// Whether `slack_tokens.json` (Slack's OAuth installs, one per workspace) exists.
    pub slack_tokens: bool,
    /// `weixin/accounts/ID.json`, the logins Hermes's Weixin adapter stored.
    pub weixin_accounts: Vec<WeixinAccount>,
    /// `(ID, get_updates_buf)` from `weixin/accounts/ID.sync.json`: where Hermes's Weixin
    /// polls had got to, so the gateway's first poll does not fetch again what Hermes handled.
    pub weixin_cursors: Vec<(String, String)>,
    /// `(file name, text)` of each `*-approved.json` and `*-pending.json` in
    /// `platforms/pairing/` and then the legacy `pairing/`.
    pub pairing_files: Vec<(String, String)>,
    /// `cron/jobs.json`'s text.
    pub cron_jobs: Option<String>,
}

/// Hermes's `config.yaml`: its text and its block-mapping entries. Its `Debug` shows the
/// entries' keys only.
pub struct ConfigYaml {
    pub text: String,
    pub entries: Vec<Entry>,
}

impl std::fmt::Debug for ConfigYaml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigYaml")
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}

/// A Weixin login Hermes stored. Its `Debug` shows no token.
#[derive(Clone, Debug)]
pub struct WeixinAccount {
    pub id: String,
    pub token: Secret,
    pub base_url: Option<String>,
    pub user_id: Option<String>,
    pub saved_at: Option<String>,
}

/// Why a Hermes home cannot be adopted as it is.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    File(#[from] bounded_read::ReadError),
    #[error("cannot list {}", path.display())]
    List {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} has more than {MAX_FILES} files: not a directory Hermes made; check it", path.display())]
    TooMany { path: PathBuf },
    #[error("{}: Hermes serves several profiles from one gateway here ({how}); adopt moves one profile's platforms to one hermes-svc profile: turn multiplexing off (or split the profiles) and run adopt again", path.display())]
    Multiplex { path: PathBuf, how: &'static str },
    #[error("{}: {why}", path.display())]
    Invalid { path: PathBuf, why: String },
}

/// A Hermes home holding only `env` as its `.env` and `yaml` as its `config.yaml`, read: what
/// each wing's tests map.
#[cfg(test)]
pub fn written(env: &str, yaml: &str) -> HermesHome {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), env).unwrap();
    std::fs::write(dir.path().join("config.yaml"), yaml).unwrap();
    read(dir.path()).unwrap()
}

/// Read the Hermes home `home`.
pub fn read(home: &Path) -> Result<HermesHome, ReadError> {
    let text = |name: &str| {
        bounded_read::read_to_string(&home.join(name), bounded_read::LIMIT, Owner::SelfOrRoot)
    };
    let env = EnvFile::parse(&text(".env")?.unwrap_or_default());
    let config = text("config.yaml")?.map(|text| ConfigYaml {
        entries: config_yaml::entries(&text),
        text,
    });
    let gateway_json = match text("gateway.json")? {
        Some(t) => Some(serde_json::from_str(&t).map_err(|e| ReadError::Invalid {
            path: home.join("gateway.json"),
            why: format!("not JSON ({e}); Hermes would not read it either: fix or remove it"),
        })?),
        None => None,
    };
    let slack_tokens = text("slack_tokens.json")?.is_some();
    let mut pairing_files = vec![];
    for dir in ["platforms/pairing", "pairing"] {
        for (name, text) in files(&home.join(dir))? {
            if name.ends_with("-approved.json") || name.ends_with("-pending.json") {
                pairing_files.push((name, text));
            }
        }
    }
    let cron_jobs = text("cron/jobs.json")?;
    let (weixin_accounts, weixin_cursors) = weixin_accounts(&home.join("weixin/accounts"))?;
    let home = HermesHome {
        path: home.to_owned(),
        env,
        config,
        gateway_json,
        slack_tokens,
        weixin_accounts,
        weixin_cursors,
        pairing_files,
        cron_jobs,
    };
    if let Some(how) = home.multiplexing() {
        return Err(ReadError::Multiplex {
            path: home.path,
            how,
        });
    }
    Ok(home)
}

/// The regular files directly in `dir` (none when it does not exist), each read bounded.
fn files(dir: &Path) -> Result<Vec<(String, String)>, ReadError> {
    let list = match std::fs::read_dir(dir) {
        Ok(list) => list,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(source) => {
            return Err(ReadError::List {
                path: dir.to_owned(),
                source,
            })
        }
    };
    let mut names = vec![];
    for entry in list {
        let entry = entry.map_err(|source| ReadError::List {
            path: dir.to_owned(),
            source,
        })?;
        if names.len() == MAX_FILES {
            return Err(ReadError::TooMany {
                path: dir.to_owned(),
            });
        }
        if let Ok(name) = entry.file_name().into_string() {
            if name.ends_with(".json") && !name.starts_with('.') {
                names.push(name);
            }
        }
    }
    names.sort();
    let mut out = vec![];
    for name in names {
        let path = dir.join(&name);
        if let Some(text) =
            bounded_read::read_to_string(&path, bounded_read::LIMIT, Owner::SelfOrRoot)?
        {
            out.push((name, text));
        }
    }
    Ok(out)
}

/// The logins, and the poll cursors, Hermes's Weixin adapter stored in `dir`.
type WeixinFiles = (Vec<WeixinAccount>, Vec<(String, String)>);

fn weixin_accounts(dir: &Path) -> Result<WeixinFiles, ReadError> {
    let mut out = vec![];
    let mut cursors = vec![];
    for (name, text) in files(dir)? {
        let Some(id) = name.strip_suffix(".json") else {
            continue;
        };
        if let Some(id) = id.strip_suffix(".sync") {
            // Unreadable is as good as absent: Hermes then polls from no cursor too.
            let buf = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["get_updates_buf"].as_str().map(str::to_owned))
                .filter(|b| !b.is_empty());
            cursors.extend(buf.map(|b| (id.to_owned(), b)));
            continue;
        }
        if id.ends_with(".context-tokens") {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|_| ReadError::Invalid {
            path: dir.join(&name),
            why: "not JSON: not a login Hermes stored; move it aside".to_owned(),
        })?;
        let field = |k: &str| v[k].as_str().filter(|s| !s.is_empty()).map(str::to_owned);
        let Some(token) = field("token") else {
            continue;
        };
        out.push(WeixinAccount {
            id: id.to_owned(),
            token: Secret::new(token),
            base_url: field("base_url"),
            user_id: field("user_id"),
            saved_at: field("saved_at"),
        });
    }
    Ok((out, cursors))
}

/// Whether Hermes's truthy parse (`true`, `1`, `yes`, `on`) takes `value` for yes.
pub fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

impl HermesHome {
    /// How this home multiplexes profiles, if it does.
    fn multiplexing(&self) -> Option<&'static str> {
        let env = self.env.value("GATEWAY_MULTIPLEX_PROFILES").ok().flatten();
        if env.is_some_and(truthy) {
            return Some("GATEWAY_MULTIPLEX_PROFILES in .env");
        }
        let yaml = self.entry(&["gateway", "multiplex_profiles"]);
        yaml.and_then(Entry::scalar)
            .is_some_and(|v| truthy(&v))
            .then_some("gateway.multiplex_profiles in config.yaml")
    }

    /// The entry at `path` in `config.yaml`.
    pub fn entry(&self, path: &[&str]) -> Option<&Entry> {
        self.config
            .as_ref()?
            .entries
            .iter()
            .find(|e| e.path.iter().map(String::as_str).eq(path.iter().copied()))
    }

    /// The variable `name` as Hermes's environment gets it: from `.env`, else a top-level
    /// scalar of `config.yaml`. Empty counts as unset. An error names what cannot be read
    /// plainly (an interpolation, a multi-line or non-scalar value), never the value.
    pub fn var(&self, name: &str) -> Result<Option<String>, String> {
        match self.env.value(name) {
            Ok(Some(v)) if !v.is_empty() => return Ok(Some(v.to_owned())),
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
        let Some(entry) = self.entry(&[name]) else {
            return Ok(None);
        };
        let value = entry.scalar().ok_or_else(|| {
            format!(
                "config.yaml line {}: {name} is not a plain one-line value; write it as {name}: VALUE",
                entry.line + 1
            )
        })?;
        if value.contains("${") {
            return Err(format!(
                "config.yaml line {}: {name} refers to another variable (${{...}}); write the value out",
                entry.line + 1
            ));
        }
        Ok((!value.is_empty()).then_some(value))
    }

    /// `key` of `platform`'s own settings in `config.yaml`: `platforms.P.key`,
    /// `gateway.platforms.P.key`, their `extra.key`, or the top-level `P.key` block Hermes
    /// copies into `extra`.
    pub fn block(&self, platform: &str, key: &str) -> Option<&Entry> {
        [
            &["platforms", platform, key][..],
            &["gateway", "platforms", platform, key],
            &["platforms", platform, "extra", key],
            &["gateway", "platforms", platform, "extra", key],
            &[platform, key],
        ]
        .into_iter()
        .find_map(|path| self.entry(path))
    }

    /// A setting of `platform`: the variable `var` ([`HermesHome::var`]), else `key` of the
    /// platform's block as a scalar.
    pub fn setting(&self, platform: &str, var: &str, key: &str) -> Result<Option<String>, String> {
        if let Some(v) = self.var(var)? {
            return Ok(Some(v));
        }
        Ok(self
            .block(platform, key)
            .and_then(Entry::scalar)
            .filter(|v| !v.is_empty() && !v.contains("${")))
    }

    /// A comma-separated list setting (Hermes's `*_ALLOWED_USERS`), trimmed, empties dropped;
    /// from `config.yaml` a flow or comma list.
    pub fn list(&self, platform: &str, var: &str, key: &str) -> Result<Vec<String>, String> {
        if let Some(v) = self.var(var)? {
            return Ok(split_list(&v));
        }
        Ok(self
            .block(platform, key)
            .and_then(Entry::list)
            .unwrap_or_default())
    }

    /// A yes/no setting, `None` when unset.
    pub fn flag(&self, platform: &str, var: &str, key: &str) -> Result<Option<bool>, String> {
        Ok(self.setting(platform, var, key)?.map(|v| truthy(&v)))
    }

    /// The credential in `var` (or `platform`'s block, keys `block_keys`), with where it is.
    pub fn credential(
        &self,
        platform: &str,
        var: &str,
        block_keys: &[&str],
    ) -> Result<Option<Credential>, String> {
        if self
            .env
            .value(var)
            .map_err(|e| e.to_string())?
            .is_some_and(|v| !v.is_empty())
        {
            let value = self.var(var)?.unwrap_or_default();
            return Ok(Some(Credential {
                value: Secret::new(value),
                from: From::Env,
            }));
        }
        if let Some(v) = self.var(var)? {
            return Ok(Some(Credential {
                value: Secret::new(v),
                from: From::Config,
            }));
        }
        for key in block_keys {
            let Some(entry) = self.block(platform, key) else {
                continue;
            };
            let value = entry.scalar().filter(|v| !v.contains("${")).ok_or_else(|| {
                format!(
                    "config.yaml line {}: {} is not a plain one-line value; move the credential to .env as {var}=VALUE",
                    entry.line + 1,
                    entry.path.join(".")
                )
            })?;
            if !value.is_empty() {
                return Ok(Some(Credential {
                    value: Secret::new(value),
                    from: From::Config,
                }));
            }
        }
        Ok(None)
    }

    /// The lines of `config.yaml` that hold a credential of `platform` (read from `vars`),
    /// each to be removed whole; an error names one that cannot be (a flow mapping, a value
    /// over several lines).
    pub fn credential_lines(&self, platform: &str, vars: &[&str]) -> Result<Vec<usize>, String> {
        let Some(config) = &self.config else {
            return Ok(vec![]);
        };
        let mut lines = vec![];
        for found in config_yaml::credentials(&config.text, &[(platform, vars)]) {
            let entry = config.entries.iter().find(|e| e.line == found.line);
            let one_line = entry.is_some_and(|e| !e.is_flow() && e.scalar().is_some());
            if !one_line {
                return Err(format!(
                    "config.yaml line {}: {} holds a {platform} credential in a form adopt cannot remove line by line (a flow mapping or a multi-line value); move the credential to .env and run adopt again",
                    found.line + 1,
                    found.key
                ));
            }
            lines.push(found.line);
        }
        Ok(lines)
    }
}

/// Where a credential was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum From {
    /// A line of `.env`: it moves to the gateway's `.env` as it is.
    Env,
    /// `config.yaml`: a `KEY=value` line is written for the gateway, the YAML line removed.
    Config,
}

/// A credential and where it was found. Its `Debug` shows no value.
#[derive(Clone, Debug)]
pub struct Credential {
    pub value: Secret,
    pub from: From,
}

/// `a, b,,c` as `[a, b, c]`.
pub fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(files: &[(&str, &str)]) -> (tempfile::TempDir, Result<HermesHome, ReadError>) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let read = read(dir.path());
        (dir, read)
    }

    #[test]
    fn settings_come_from_env_then_config_then_the_platforms_block() {
        let (_d, h) = home(&[
            (".env", "A=from-env\nEMPTY=\n"),
            (
                "config.yaml",
                "A: from-yaml\nB: 'yaml b'\nplatforms:\n  telegram:\n    token: \"1:x\"\n    extra:\n      require_mention: true\ntelegram:\n  allow_from: [1, 2]\n",
            ),
        ]);
        let h = h.unwrap();
        assert_eq!(h.var("A").unwrap().as_deref(), Some("from-env"));
        assert_eq!(h.var("B").unwrap().as_deref(), Some("yaml b"));
        assert_eq!(h.var("EMPTY").unwrap(), None);
        assert_eq!(
            h.flag("telegram", "TELEGRAM_REQUIRE_MENTION", "require_mention")
                .unwrap(),
            Some(true)
        );
        assert_eq!(
            h.list("telegram", "TELEGRAM_ALLOWED_USERS", "allow_from")
                .unwrap(),
            ["1", "2"]
        );
        let c = h
            .credential("telegram", "TELEGRAM_BOT_TOKEN", &["token"])
            .unwrap()
            .unwrap();
        assert_eq!((c.value.expose(), c.from), ("1:x", From::Config));
        assert_eq!(
            h.credential_lines("telegram", &["TELEGRAM_BOT_TOKEN"])
                .unwrap(),
            [4]
        );
    }

    #[test]
    fn a_credential_in_a_flow_mapping_or_behind_a_reference_is_named_not_taken() {
        let (_d, h) = home(&[(
            "config.yaml",
            "TELEGRAM_BOT_TOKEN: ${TG}\nplatforms:\n  discord: {token: abc}\n",
        )]);
        let h = h.unwrap();
        let e = h.var("TELEGRAM_BOT_TOKEN").unwrap_err();
        assert!(e.contains("line 1") && !e.contains("TG}"), "{e}");
        let e = h
            .credential_lines("discord", &["DISCORD_BOT_TOKEN"])
            .unwrap_err();
        assert!(e.contains("line 3") && !e.contains("abc"), "{e}");
    }

    #[test]
    fn pairing_files_logins_and_multiplexing_are_read() {
        let (_d, h) = home(&[
            ("platforms/pairing/telegram-approved.json", "{}"),
            ("pairing/discord-pending.json", "{}"),
            ("pairing/_rate_limits.json", "{}"),
            (
                "weixin/accounts/bot1.json",
                r#"{"token":"wx-secret","base_url":"https://b","user_id":"u"}"#,
            ),
            (
                "weixin/accounts/bot1.sync.json",
                r#"{"get_updates_buf":"x"}"#,
            ),
        ]);
        let h = h.unwrap();
        let names: Vec<_> = h.pairing_files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["telegram-approved.json", "discord-pending.json"]);
        assert_eq!(h.weixin_accounts.len(), 1);
        assert!(!format!("{h:?}").contains("wx-secret"));
        let (_d, h) = home(&[("config.yaml", "gateway:\n  multiplex_profiles: true\n")]);
        assert!(matches!(h, Err(ReadError::Multiplex { .. })));
        let (_d, h) = home(&[(".env", "GATEWAY_MULTIPLEX_PROFILES=1\n")]);
        assert!(matches!(h, Err(ReadError::Multiplex { .. })));
    }
}

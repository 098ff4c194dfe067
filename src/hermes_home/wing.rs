//! What one wing makes of Hermes's settings for its platform, and the settings every wing
//! reads alike (allow-lists, bots, mentions, the unknown-DM answer, proxy, home channel).

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::config::Secret;
use crate::hermes_home::{From, HermesHome};

/// What one wing makes of Hermes's settings for its platform.
#[derive(Default)]
pub struct Wing {
    pub hermes_platform: &'static str,
    /// The `[[adapter]]` keys after `name` and `kind`, in order.
    pub keys: Vec<(&'static str, toml::Value)>,
    pub access: Access,
    /// `.env` variables whose lines go to the gateway's `.env` as they are.
    pub env_credentials: Vec<String>,
    /// Credentials found in `config.yaml`, written to the gateway's `.env`.
    pub config_credentials: Vec<(String, Secret)>,
    /// `config.yaml` lines (0-based) to remove.
    pub config_lines: Vec<usize>,
    /// `.env` variable prefixes that are this platform's (`TELEGRAM_`).
    pub prefixes: &'static [&'static str],
    /// Variables of the platform read into the adapter (no note about them).
    pub used: BTreeSet<String>,
    pub home_target: Option<String>,
    pub files: Vec<(PathBuf, Vec<u8>, u32)>,
    /// The platform's own proxy setting, `(variable, URL)`.
    pub proxy: Option<(String, String)>,
    pub notes: Vec<String>,
}

/// `[adapter.access]` as adopt writes it; `None` keys are left to `[access]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub allow_users: Option<Vec<String>>,
    pub allow_chats: Option<Vec<String>>,
    pub allow_all: Option<bool>,
    pub require_mention: Option<bool>,
    pub allow_bots: Option<bool>,
    pub unknown_dm: Option<&'static str>,
}

impl Wing {
    pub fn new(hermes_platform: &'static str, prefixes: &'static [&'static str]) -> Wing {
        Wing {
            hermes_platform,
            prefixes,
            ..Wing::default()
        }
    }

    pub fn key(&mut self, key: &'static str, value: impl Into<toml::Value>) {
        self.keys.push((key, value.into()));
    }

    /// A setting read into the adapter: no "no equivalent" note for it.
    pub fn used(&mut self, vars: &[&str]) {
        self.used.extend(vars.iter().map(|v| (*v).to_owned()));
    }

    /// The credential in `var` (or the platform's block `block_keys`): where the gateway will
    /// find it, and which `config.yaml` lines lose it. `Ok(false)` when Hermes has none.
    pub fn credential(
        &mut self,
        home: &HermesHome,
        var: &str,
        block_keys: &[&str],
    ) -> Result<bool, String> {
        let Some(c) = home.credential(self.hermes_platform, var, block_keys)? else {
            return Ok(false);
        };
        match c.from {
            From::Env => self.env_credentials.push(var.to_owned()),
            From::Config => self.config_credentials.push((var.to_owned(), c.value)),
        }
        self.used(&[var]);
        Ok(true)
    }

    /// The lines of `config.yaml` holding any of the platform's credentials `vars`.
    pub fn config_credentials_out(
        &mut self,
        home: &HermesHome,
        vars: &[&str],
    ) -> Result<(), String> {
        self.config_lines = home.credential_lines(self.hermes_platform, vars)?;
        Ok(())
    }

    /// The settings every platform shares (prefix `P`, such as `TELEGRAM`): allow-lists with
    /// the global `GATEWAY_ALLOWED_USERS` folded in (an adapter's list replaces the
    /// profile's), allow-all, bots, mentions, the unknown-DM answer, the platform's proxy.
    pub fn common(&mut self, home: &HermesHome, p: &str) -> Result<(), String> {
        let platform = self.hermes_platform;
        let users = home.list(platform, &format!("{p}_ALLOWED_USERS"), "allow_from")?;
        if users.iter().any(|u| u == "*") {
            self.access.allow_all = Some(true);
        } else if !users.is_empty() {
            self.allow_users(home, users)?;
        }
        if home.flag(platform, &format!("{p}_ALLOW_ALL_USERS"), "allow_all_users")? == Some(true) {
            self.access.allow_all = Some(true);
        }
        let bots = home.setting(platform, &format!("{p}_ALLOW_BOTS"), "allow_bots")?;
        if let Some(bots) = bots.map(|b| b.trim().to_ascii_lowercase()) {
            let on =
                matches!(bots.as_str(), "all" | "mentions") || crate::hermes_home::truthy(&bots);
            self.access.allow_bots = Some(on);
            if bots == "mentions" {
                self.notes.push(format!("{p}_ALLOW_BOTS=mentions: hermes-svc admits other bots' messages under the same mention rule as people's (allow-bots = true)"));
            }
        }
        let mention = home.flag(platform, &format!("{p}_REQUIRE_MENTION"), "require_mention")?;
        self.access.require_mention = mention;
        let dm = home
            .block(platform, "unauthorized_dm_behavior")
            .and_then(|e| e.scalar());
        self.access.unknown_dm = dm.as_deref().and_then(unknown_dm);
        self.used(&[
            &format!("{p}_ALLOWED_USERS"),
            &format!("{p}_ALLOW_ALL_USERS"),
            &format!("{p}_ALLOW_BOTS"),
            &format!("{p}_REQUIRE_MENTION"),
        ]);
        let proxy_var = format!("{p}_PROXY");
        if let Some(proxy) = home.setting(platform, &proxy_var, "proxy_url")? {
            self.proxy = Some((proxy_var.clone(), proxy));
        }
        self.used(&[&proxy_var]);
        Ok(())
    }

    /// `users` as the adapter's `allow-users`, with Hermes's global list added: an adapter's
    /// list replaces the profile's in hermes-svc, where Hermes takes the union.
    pub fn allow_users(&mut self, home: &HermesHome, users: Vec<String>) -> Result<(), String> {
        let global = global_users(home)?;
        let mut all: Vec<String> = vec![];
        for u in users.into_iter().chain(global).filter(|u| u != "*") {
            if !all.contains(&u) {
                all.push(u);
            }
        }
        self.access.allow_users = Some(all);
        Ok(())
    }

    /// The home channel in `var` (`platforms.P.home_channel.chat_id` too), as a target made
    /// by `target` (which checks it against the wing's own syntax).
    pub fn home(
        &mut self,
        home: &HermesHome,
        var: &str,
        target: impl Fn(&str) -> Option<String>,
    ) -> Result<(), String> {
        let platform = self.hermes_platform;
        let chat = match home.var(var)? {
            Some(v) => Some(v),
            None => home
                .entry(&["platforms", platform, "home_channel", "chat_id"])
                .and_then(|e| e.scalar())
                .filter(|v| !v.is_empty()),
        };
        self.used(&[var, &format!("{var}_NAME"), &format!("{var}_THREAD_ID")]);
        let Some(chat) = chat else { return Ok(()) };
        match target(chat.trim()) {
            Some(t) => self.home_target = Some(t),
            None => self.notes.push(format!(
                "{var} ({chat}) is not a {platform} chat hermes-svc can address; Hermes's cron deliveries to it are not carried over"
            )),
        }
        if home.var(&format!("{var}_THREAD_ID"))?.is_some() {
            self.notes.push(format!("{var}_THREAD_ID: cron deliveries go to the home chat itself, not its thread (the Relay's chat ids have no thread)"));
        }
        Ok(())
    }
}

impl std::fmt::Debug for Wing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wing")
            .field("hermes_platform", &self.hermes_platform)
            .field("keys", &self.keys)
            .field("access", &self.access)
            .field("env_credentials", &self.env_credentials)
            .field("home_target", &self.home_target)
            .finish_non_exhaustive()
    }
}

/// `GATEWAY_ALLOWED_USERS`, Hermes's allow-list for every platform.
pub(crate) fn global_users(home: &HermesHome) -> Result<Vec<String>, String> {
    Ok(home
        .var("GATEWAY_ALLOWED_USERS")?
        .map(|v| crate::hermes_home::split_list(&v))
        .unwrap_or_default())
}

/// Hermes's `unauthorized_dm_behavior` as `unknown-dm`.
pub(crate) fn unknown_dm(value: &str) -> Option<&'static str> {
    match value.trim().to_ascii_lowercase().as_str() {
        "pair" => Some("pair"),
        "ignore" => Some("ignore"),
        _ => None,
    }
}

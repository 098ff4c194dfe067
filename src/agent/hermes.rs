//! Hermes in the agent unit (`install --agent hermes`): the environment Hermes's own gateway
//! runs with, made from the profile and checked, for `hermes-svc agent run` to exec.
//!
//! Hermes never holds a platform: the gateway is the one program connected to each platform,
//! and two pollers on one Telegram token is the first field report again. So every variable
//! Hermes's own adapters read a platform credential from is left out of its environment, and
//! a Hermes home whose `.env` names one is refused (Hermes loads `$HERMES_HOME/.env` over its
//! environment). Hermes's home for a profile is its own directory, `PROFILE_HOME/agent/hermes`,
//! never the profile home, whose `.env` holds the gateway's secrets.

use std::path::{Path, PathBuf};

use crate::agent::secret;
use crate::bounded_read::{Owner, ReadError};
use crate::config::{self, Bridge, ConfigError};
use crate::profile::Profile;
use crate::trusted_dir::{TrustError, TrustedDir};

/// The platform (as Hermes and the gateway both name it) whose credential Hermes reads from
/// the variable `name`, for the platforms a hermes-svc gateway holds (each wing says which,
/// `Platform::HERMES_CREDENTIALS`). Hermes reads others (WhatsApp, Signal, ...) for platforms
/// hermes-svc does not serve, which Hermes may well connect itself.
fn platform_of_credential(name: &str) -> Option<&'static str> {
    crate::platform::hermes_credentials()
        .into_iter()
        .find(|(_, names)| names.contains(&name))
        .map(|(kind, _)| kind)
}

/// Hermes's home for `profile`: its config.yaml (the model) and its own `.env` (the model's
/// key, never a platform's).
pub fn home(profile: &Profile) -> PathBuf {
    profile.agent_dir().join(HOME)
}

/// The platform credentials Hermes's `config.yaml` `text` holds: `(platform, where)`.
fn config_credentials(text: &str) -> Vec<(String, String)> {
    crate::hermes_home::config_yaml::credentials(text, &crate::platform::hermes_credentials())
        .into_iter()
        .map(|f| (f.platform, f.key))
        .collect()
}

/// What a Hermes home says about the platforms Hermes connects there: the platform
/// credentials its `.env` and its `config.yaml` name (by name: Hermes would connect those
/// platforms when it starts), and the platforms its running gateway reports in
/// `gateway_state.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    pub home: PathBuf,
    /// `(platform, variable)` for each credential `.env` names.
    pub env_credentials: Vec<(String, String)>,
    /// `(platform, key)` for each credential `config.yaml` holds (`TELEGRAM_BOT_TOKEN`,
    /// `platforms.telegram.token`).
    pub config_credentials: Vec<(String, String)>,
    /// `(platform, state)` for each platform a live Hermes reports other than its Relay and
    /// API server, and not given up (`connected`, `connecting`, `retrying`, ...).
    pub connecting: Vec<(String, String)>,
    /// The live Hermes gateway's pid, when `gateway_state.json` names one that runs.
    pub pid: Option<u32>,
}

impl Seen {
    /// The platforms this Hermes connects or would connect, each once.
    pub fn platforms(&self) -> Vec<&str> {
        let mut all: Vec<&str> = self
            .env_credentials
            .iter()
            .chain(&self.config_credentials)
            .chain(&self.connecting)
            .map(|(p, _)| p.as_str())
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// Look at the Hermes home `home`: bounded reads, nothing written. `None` when it holds
/// neither a `.env` nor a `gateway_state.json`.
pub fn look(home: &Path) -> Option<Seen> {
    let env_text = crate::env_file::read(&home.join(".env"), Owner::SelfRootOrDirectory)
        .ok()
        .flatten();
    let state = crate::bounded_read::read_to_string(
        &home.join("gateway_state.json"),
        crate::bounded_read::LIMIT,
        Owner::SelfRootOrDirectory,
    )
    .ok()
    .flatten();
    let config_text = crate::bounded_read::read_to_string(
        &home.join(CONFIG),
        crate::bounded_read::LIMIT,
        Owner::SelfRootOrDirectory,
    )
    .ok()
    .flatten();
    if env_text.is_none() && state.is_none() && config_text.is_none() {
        return None;
    }
    let env_credentials = env_text
        .map(|t| crate::env_file::parse(&t).0)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, _)| Some((platform_of_credential(&k)?.to_owned(), k)))
        .collect();
    let state: serde_json::Value = state
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let pid = state["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .filter(|p| *p > 0 && crate::process_probe::exists(*p));
    let connecting = match (pid, state["platforms"].as_object()) {
        (Some(_), Some(platforms)) => platforms
            .iter()
            .filter_map(|(name, p)| {
                let state = p["state"].as_str().unwrap_or("unknown");
                let given_up = matches!(state, "disconnected" | "stopped" | "fatal" | "failed");
                let ours = matches!(name.as_str(), "relay" | "api_server" | "webhook" | "local");
                (!given_up && !ours).then(|| (name.clone(), state.to_owned()))
            })
            .collect(),
        _ => vec![],
    };
    Some(Seen {
        home: home.to_owned(),
        env_credentials,
        config_credentials: config_text
            .map(|t| config_credentials(&t))
            .unwrap_or_default(),
        connecting,
        pid,
    })
}

/// Hermes's home, in the profile's `agent/`.
const HOME: &str = "hermes";

/// Hermes's configuration, in its home.
const CONFIG: &str = "config.yaml";

/// Where the agent unit's `LoadCredential=relay-secret:` puts the secret.
const CREDENTIAL: &str = "relay-secret";

/// Why Hermes is not started. [`LaunchError::is_temporary`] ones are worth a restart.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{}: the agent unit runs Hermes against the gateway's Relay, which this file does not serve; add\n[agent]\nkind = \"hermes-relay\"\nor uninstall the agent (hermes-svc uninstall removes both units)", config.display())]
    NotRelay { config: PathBuf },
    #[error(transparent)]
    Secret(#[from] secret::SecretError),
    #[error("the relay secret {} does not exist yet: the gateway makes it when it starts with [agent] kind = \"hermes-relay\"", path.display())]
    NoSecret { path: PathBuf },
    #[error("{}: {key} is a platform credential, and Hermes would connect the platform itself beside the gateway (two sessions on one token); remove it from this file: the gateway holds the platforms, Hermes only its Relay", file.display())]
    PlatformCredential { file: PathBuf, key: String },
    #[error("cannot read Hermes's .env or config.yaml")]
    EnvFile(#[from] ReadError),
    /// Hermes's home, or the `agent/` it is in, is not one only this user can change:
    /// Hermes's config can name commands to run, so another user's would run their code.
    #[error(transparent)]
    Home(#[from] TrustError),
}

impl LaunchError {
    /// The secret appears once the gateway has started: worth trying again. Everything else
    /// needs a person.
    pub fn is_temporary(&self) -> bool {
        matches!(self, LaunchError::NoSecret { .. })
    }
}

/// Hermes, ready to be exec'd.
#[derive(Debug)]
pub struct Launch {
    pub program: PathBuf,
    pub args: [&'static str; 3],
    /// Set in Hermes's environment.
    pub set: Vec<(String, String)>,
    /// Left out of Hermes's environment.
    pub remove: Vec<String>,
    /// The Relay's port, which the gateway listens on before its READY=1.
    pub port: u16,
    /// What Hermes's config lacks for a chat's files, each with its fix: for the log.
    pub notes: Vec<&'static str>,
}

/// What Hermes runs with for `profile`, given the process's own environment `env` and, under
/// systemd, `credentials` (`$CREDENTIALS_DIRECTORY`).
pub fn prepare(
    profile: &Profile,
    hermes: &Path,
    env: impl Iterator<Item = (String, String)>,
    credentials: Option<&Path>,
) -> Result<Launch, LaunchError> {
    let config_path = profile.config_file();
    let config = config::load::<crate::platform::Protocol>(&config_path)?;
    let platform_ids = config.agent.as_ref().is_some_and(|a| a.platform_ids);
    let port = match config.agent.map(|a| a.bridge) {
        Some(Bridge::HermesRelay { port }) => port,
        _ => {
            return Err(LaunchError::NotRelay {
                config: config_path,
            })
        }
    };
    let secret = read_secret(profile, credentials)?;
    let home = home(profile);
    // Made, or found, under the home's trust rules: a home another user made or can write
    // would run their config (and the commands it names) as this user.
    TrustedDir::create(&profile.agent_dir(), Owner::SelfOrRoot)?.create_child(HOME)?;
    let env_file = home.join(".env");
    if let Some(text) = crate::env_file::read(&env_file, Owner::SelfOrRoot)? {
        let (vars, _) = crate::env_file::parse(&text);
        if let Some((key, _)) = vars
            .iter()
            .find(|(k, _)| platform_of_credential(k).is_some())
        {
            return Err(LaunchError::PlatformCredential {
                file: env_file,
                key: key.clone(),
            });
        }
    }
    let config_file = home.join(CONFIG);
    let config_text = crate::bounded_read::read_to_string(
        &config_file,
        crate::bounded_read::LIMIT,
        Owner::SelfOrRoot,
    )?;
    if let Some((_, key)) = config_text
        .as_deref()
        .and_then(|t| config_credentials(t).into_iter().next())
    {
        return Err(LaunchError::PlatformCredential {
            file: config_file,
            key,
        });
    }
    let remove = env
        .map(|(k, _)| k)
        .filter(|k| platform_of_credential(k).is_some())
        .collect();
    let mut set: Vec<(String, String)> = [
        ("HERMES_HOME", home.display().to_string()),
        ("GATEWAY_RELAY_URL", format!("http://127.0.0.1:{port}")),
        ("GATEWAY_RELAY_ID", secret::relay_id(profile)),
        ("GATEWAY_RELAY_SECRET", secret),
        // No "no home channel" notice before each new chat's first answer.
        ("RELAY_HOME_CHANNEL", "hermes-svc".to_owned()),
        // Hermes's busy answer blocks its one reader for up to 30 s; the connector never sends
        // a busy chat a message anyway.
        ("HERMES_GATEWAY_BUSY_ACK_ENABLED", "false".to_owned()),
        // The connector re-delivers an interrupted turn's message; Hermes must not answer it
        // again by itself.
        ("HERMES_AUTO_CONTINUE_FRESHNESS", "1".to_owned()),
        // Restart pacing is the service manager's.
        ("HERMES_GATEWAY_MAX_STARTS", "0".to_owned()),
        // Without it Hermes follows a sticky `hermes profile use NAME` (`active_profile` in its
        // root, `~/.hermes` for any home under it) and swaps its home for that profile's: the
        // gateway's own home, whose `.env` holds the platform tokens (docs/research/adopt.md
        // §8.2). The variable is how Hermes's own supervisor pins a child's home.
        ("HERMES_S6_SUPERVISED_CHILD", "1".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    // One hello per platform the gateway names chats by (`[agent] platform-ids`): Hermes then
    // tags each answer with its chat's platform. Its home-channel variables (`TELEGRAM_HOME_CHANNEL`
    // and the like) are left as they are: they name no credential.
    let platforms =
        crate::agent::relay::address::platforms(config.adapters.iter().map(|a| a.protocol.kind()));
    if platform_ids && !platforms.is_empty() {
        set.push(("GATEWAY_RELAY_PLATFORMS".to_owned(), platforms.join(",")));
    }
    Ok(Launch {
        program: hermes.to_owned(),
        args: ["gateway", "run", "--external-supervisor"],
        set,
        remove,
        port,
        notes: crate::hermes_home::config_yaml::media_notes(config_text.as_deref()),
    })
}

/// The secret from systemd's credential, else (launchd, a foreground run) from its file, which
/// only the gateway makes.
fn read_secret(profile: &Profile, credentials: Option<&Path>) -> Result<String, LaunchError> {
    if let Some(path) = credentials
        .map(|dir| dir.join(CREDENTIAL))
        .filter(|p| p.exists())
    {
        return Ok(secret::read(&path)?);
    }
    match secret::load(&profile.agent_dir())? {
        Some(secret) => Ok(secret),
        None => Err(LaunchError::NoSecret {
            path: profile.relay_secret(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ProfileName;

    fn profile(dir: &Path) -> Profile {
        Profile::new(ProfileName::parse("coder").unwrap(), dir.to_owned()).unwrap()
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn hermes_gets_the_relay_and_no_platform_credential() {
        let dir = tempfile::tempdir().unwrap();
        let p = profile(dir.path());
        write(
            &p.config_file(),
            "[agent]\nkind = \"hermes-relay\"\nport = 9123\n",
        );
        secret::load_or_create(&p.agent_dir()).unwrap();
        let env = [
            ("TELEGRAM_BOT_TOKEN", "x"),
            ("PATH", "/usr/bin"),
            ("FEISHU_APP_SECRET", "y"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let launch = prepare(&p, Path::new("/bin/hermes"), env.into_iter(), None).unwrap();
        assert_eq!(launch.remove, ["TELEGRAM_BOT_TOKEN", "FEISHU_APP_SECRET"]);
        let set: std::collections::HashMap<_, _> = launch.set.iter().cloned().collect();
        assert_eq!(set["GATEWAY_RELAY_URL"], "http://127.0.0.1:9123");
        assert_eq!(set["GATEWAY_RELAY_ID"], "hermes-svc-coder");
        assert_eq!(set["GATEWAY_RELAY_SECRET"].len(), 64);
        assert_eq!(set["HERMES_HOME"], home(&p).display().to_string());
        assert_eq!(set["HERMES_S6_SUPERVISED_CHILD"], "1");
        assert!(home(&p).is_dir(), "Hermes's home is made");
    }

    #[test]
    fn with_platform_ids_hermes_says_hello_for_each_platform() {
        let dir = tempfile::tempdir().unwrap();
        let p = profile(dir.path());
        let adapters = "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"T\"\n\n\
                        [[adapter]]\nname = \"ws\"\nkind = \"websocket\"\nurl = \"wss://a.example/ws\"\n\n\
                        [[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"D\"\n\n";
        secret::load_or_create(&p.agent_dir()).unwrap();
        let launch = |agent: &str| {
            write(
                &p.config_file(),
                &format!("{adapters}[agent]\nkind = \"hermes-relay\"\n{agent}"),
            );
            let launch = prepare(&p, Path::new("/bin/hermes"), std::iter::empty(), None).unwrap();
            let set: std::collections::HashMap<_, _> = launch.set.into_iter().collect();
            set.get("GATEWAY_RELAY_PLATFORMS").cloned()
        };
        assert_eq!(
            launch("platform-ids = true\n").as_deref(),
            Some("telegram,discord")
        );
        assert_eq!(launch(""), None, "one hello, relay, as before");
    }

    #[test]
    fn a_platform_token_in_hermess_env_is_refused_by_name_not_value() {
        let dir = tempfile::tempdir().unwrap();
        let p = profile(dir.path());
        write(&p.config_file(), "[agent]\nkind = \"hermes-relay\"\n");
        secret::load_or_create(&p.agent_dir()).unwrap();
        write(
            &home(&p).join(".env"),
            "OPENAI_API_KEY=sk-1\nDISCORD_BOT_TOKEN=dc-secret-value\n",
        );
        let err = prepare(&p, Path::new("/bin/hermes"), std::iter::empty(), None).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("DISCORD_BOT_TOKEN"), "{text}");
        assert!(text.contains("agent/hermes/.env"), "{text}");
        assert!(!text.contains("dc-secret-value"), "{text}");
        assert!(!err.is_temporary());
    }

    #[test]
    fn without_the_relay_or_its_secret_hermes_waits_or_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = profile(dir.path());
        write(&p.config_file(), "");
        let err = prepare(&p, Path::new("/bin/hermes"), std::iter::empty(), None).unwrap_err();
        assert!(matches!(err, LaunchError::NotRelay { .. }), "{err}");
        write(&p.config_file(), "[agent]\nkind = \"hermes-relay\"\n");
        let err = prepare(&p, Path::new("/bin/hermes"), std::iter::empty(), None).unwrap_err();
        assert!(err.is_temporary(), "{err}");
    }
}

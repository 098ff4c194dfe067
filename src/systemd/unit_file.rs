//! The base unit file of a profile: rendering, and telling ours from edited or foreign files.
//!
//! The rendered file carries a hash of its own body in a header comment. That is how a later
//! `install` knows whether a person edited the file (and must leave it alone) without keeping
//! any state elsewhere.

use std::path::{Path, PathBuf};

use askama::Template;
use sha2::{Digest, Sha256};

use crate::profile::Profile;
use crate::service::definition::Provenance;
use crate::service::role::Role;
use crate::systemd::escape::{self, EscapeError};
use crate::systemd::scope::Scope;

/// Defaults baked into the base unit. `set` overrides the tunable ones in the drop-in.
pub(crate) const WATCHDOG_SEC: u64 = 30;
pub(crate) const RESTART_SEC: u64 = 5;
/// Longer than the gateway's own drain timeout, so a drain is never cut short by SIGKILL.
pub(crate) const TIMEOUT_STOP_SEC: u64 = 30;
/// Hermes drains its running turns on SIGTERM; its own units give it a minute.
pub(crate) const AGENT_TIMEOUT_STOP_SEC: u64 = 60;
/// A crash loop of this many starts inside the interval ends in a visible `failed` state.
pub(crate) const START_LIMIT_BURST: u32 = 5;
pub(crate) const START_LIMIT_INTERVAL_SEC: u64 = 300;
/// Past this the kernel reclaims the unit's memory hard and slows it; past
/// [`MEMORY_MAX`] it kills it (and `Restart=always` starts it again), so whatever a platform
/// sends, memory has a ceiling. The gateway itself stays near 32 MiB with 1,000 adapters
/// (docs/benchmarks.md); the room above it is for cron jobs, which share the cgroup.
pub(crate) const MEMORY_HIGH: &str = "512M";
pub(crate) const MEMORY_MAX: &str = "1G";

const HASH_MARKER: &str = "# hermes-svc-hash: sha256:";

/// Why a unit could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Escape(#[from] EscapeError),
    #[error("the executable path {0} is not valid UTF-8")]
    NonUtf8Path(PathBuf),
    #[error("invalid user name {0:?} for --run-as")]
    BadUser(String),
    #[error("{0}: systemd ignores an EnvironmentFile= path with a '..' in it, and the gateway would start without its .env; give HERMES_HOME without '..'")]
    ParentDirInPath(PathBuf),
    #[error("the relay secret's path {path} cannot be a credential: {why}; give HERMES_HOME another path")]
    CredentialPath { path: String, why: &'static str },
    #[error("failed to render template")]
    Template(#[from] askama::Error),
}

/// Everything the base unit depends on. Two equal specs render byte-identical files.
#[derive(Clone, Debug)]
pub struct UnitSpec {
    pub profile: Profile,
    pub scope: Scope,
    /// Absolute path of the `hermes-svc` binary the unit runs.
    pub exec: PathBuf,
    /// `User=` for system-scope units.
    pub run_as: Option<String>,
    /// The gateway's unit, or the agent's beside it.
    pub role: Role,
}

/// Root's token-lock directory under `/run` (see `gateway::token_lock`).
const ROOT_LOCK_DIR: &str = "hermes-svc";

#[derive(Template)]
#[template(path = "service.unit", escape = "none")]
struct Body<'a> {
    profile: &'a str,
    exec_start: String,
    /// `hermes-svc reload --profile P`: it signals the gateway and waits for its answer, so
    /// `systemctl reload` returns with the result (systemd 252 has no `Type=notify-reload`).
    exec_reload: String,
    hermes_home: String,
    env_file: String,
    user: Option<&'a str>,
    /// The profile home, escaped for `ReadWritePaths=`. Set only for system units, which get
    /// the namespace-based half of the sandbox (see [`UnitSpec::render`]).
    read_write_home: Option<String>,
    /// `RuntimeDirectory=` for the token locks (system units).
    lock_dir: Option<String>,
    /// `HERMES_LOCK_DIR=` pointing there, when the gateway would not pick it by itself.
    lock_env: Option<String>,
    watchdog_sec: u64,
    restart_sec: u64,
    timeout_stop_sec: u64,
    start_limit_interval_sec: u64,
    start_limit_burst: u32,
    memory_high: &'a str,
    memory_max: &'a str,
    wanted_by: &'a str,
}

/// The agent's unit: Hermes beside the gateway, bound to it.
#[derive(Template)]
#[template(path = "agent.unit", escape = "none")]
struct AgentBody<'a> {
    profile: &'a str,
    gateway: String,
    exec_start: String,
    hermes_home: String,
    user: Option<&'a str>,
    /// The relay secret's path, for `LoadCredential=`.
    secret: String,
    restart_sec: u64,
    timeout_stop_sec: u64,
    start_limit_interval_sec: u64,
    start_limit_burst: u32,
}

#[derive(Template)]
#[template(path = "header.unit", escape = "none")]
struct Header<'a> {
    version: &'a str,
    profile: &'a str,
    scope_flag: &'a str,
    unit: &'a str,
    /// Whether `hermes-svc set` edits this unit's drop-in (the gateway's; not the agent's).
    settable: bool,
    hash: &'a str,
}

fn path_str(p: &Path) -> Result<&str, RenderError> {
    p.to_str()
        .ok_or_else(|| RenderError::NonUtf8Path(p.to_owned()))
}

/// POSIX portable user names, plus the `$` that Samba machine accounts end with.
fn valid_user(user: &str) -> bool {
    let body = user.strip_suffix('$').unwrap_or(user);
    let mut chars = body.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && user.len() <= 32
}

impl UnitSpec {
    /// The argv the unit runs: always an explicit `--profile`, never `--replace`.
    pub(crate) fn argv(&self) -> Result<Vec<String>, RenderError> {
        let mut argv = vec![path_str(&self.exec)?.to_owned()];
        match self.role.args(self.profile.name()) {
            Some(args) => argv.extend(args),
            None => match &self.role {
                Role::Agent { hermes } => return Err(RenderError::NonUtf8Path(hermes.clone())),
                Role::Gateway => unreachable!("the gateway's arguments are all UTF-8"),
            },
        }
        Ok(argv)
    }

    /// The unit's name: `hermes-gateway-P.service` or `hermes-agent-P.service`.
    pub fn unit_name(&self) -> String {
        self.role.unit_name(self.profile.name())
    }

    /// The runtime directory a system unit's token locks live in, which systemd creates owned
    /// by `User=`, mode 0700, and keeps across stops (other units of the same account share
    /// it). The sandbox leaves `/run` read-only, and an account there has no
    /// `XDG_RUNTIME_DIR`, so the gateway is told where it is. Root's is the directory a root
    /// gateway picks by itself. User units lock in their manager's `XDG_RUNTIME_DIR`.
    fn lock_dir(&self) -> Option<String> {
        match (self.scope, self.run_as.as_deref()) {
            (Scope::System, None | Some("root")) => Some(ROOT_LOCK_DIR.to_owned()),
            (Scope::System, Some(user)) => Some(format!("{ROOT_LOCK_DIR}-{user}")),
            (Scope::User, _) => None,
        }
    }

    /// The unit file's text, header included.
    ///
    /// Both scopes get the sandbox that a user manager without privileges enforces too (no new
    /// privileges, seccomp filters, umask). Only system units get the namespace-based half
    /// (`ProtectSystem=strict`, `PrivateTmp=`, `ProtectKernel*=`, an empty capability bounding
    /// set): an unprivileged user manager skips most of it silently, and refuses to start a
    /// unit that drops capabilities (status 218/CAPABILITIES), so there it would either lie or
    /// break the gateway.
    pub fn render(&self) -> Result<String, RenderError> {
        if let Some(user) = &self.run_as {
            if !valid_user(user) {
                return Err(RenderError::BadUser(user.clone()));
            }
        }
        let env_file = self.profile.env_file();
        if env_file
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(RenderError::ParentDirInPath(env_file));
        }
        let profile = self.profile.name().as_str();
        let body = match &self.role {
            Role::Gateway => self.gateway_body(&env_file)?,
            Role::Agent { .. } => self.agent_body()?,
        };
        // The blank line after the header belongs to the hashed body, so the body is exactly
        // what follows the hash line.
        let body = format!("\n{body}\n");
        let hash = body_hash(&body);
        let header = Header {
            version: env!("CARGO_PKG_VERSION"),
            profile,
            scope_flag: self.scope.systemctl_flag(),
            unit: &self.unit_name(),
            settable: self.role == Role::Gateway,
            hash: &hash,
        }
        .render()?;
        Ok(format!("{header}\n{body}"))
    }

    fn gateway_body(&self, env_file: &Path) -> Result<String, RenderError> {
        let profile = self.profile.name().as_str();
        Ok(Body {
            profile,
            exec_start: escape::exec_line(&self.argv()?)?,
            exec_reload: escape::exec_line(&[
                path_str(&self.exec)?.to_owned(),
                "reload".to_owned(),
                "--profile".to_owned(),
                profile.to_owned(),
            ])?,
            hermes_home: escape::env_assignment(
                "HERMES_HOME",
                path_str(self.profile.hermes_home())?,
            )?,
            env_file: escape::value("EnvironmentFile", path_str(env_file)?)?,
            user: self.run_as.as_deref(),
            read_write_home: match self.scope {
                Scope::System => Some(escape::path_word(path_str(&self.profile.home())?)?),
                Scope::User => None,
            },
            lock_dir: self.lock_dir(),
            lock_env: match self.lock_dir() {
                Some(dir) if dir != ROOT_LOCK_DIR => Some(escape::env_assignment(
                    "HERMES_LOCK_DIR",
                    &format!("/run/{dir}"),
                )?),
                _ => None,
            },
            watchdog_sec: WATCHDOG_SEC,
            restart_sec: RESTART_SEC,
            timeout_stop_sec: TIMEOUT_STOP_SEC,
            start_limit_interval_sec: START_LIMIT_INTERVAL_SEC,
            start_limit_burst: START_LIMIT_BURST,
            memory_high: MEMORY_HIGH,
            memory_max: MEMORY_MAX,
            wanted_by: self.scope.wanted_by(),
        }
        .render()?)
    }

    /// The agent's body: no sandbox beyond the umask, since Hermes runs the tools its user
    /// gives it (a shell among them), which a sandbox made for the gateway would break.
    fn agent_body(&self) -> Result<String, RenderError> {
        let secret = self.profile.relay_secret();
        let secret = path_str(&secret)?;
        if let Some(why) = crate::systemd::dropin::credential_path(secret) {
            return Err(RenderError::CredentialPath {
                path: secret.to_owned(),
                why,
            });
        }
        Ok(AgentBody {
            profile: self.profile.name().as_str(),
            gateway: Role::Gateway.unit_name(self.profile.name()),
            exec_start: escape::exec_line(&self.argv()?)?,
            hermes_home: escape::env_assignment(
                "HERMES_HOME",
                path_str(self.profile.hermes_home())?,
            )?,
            user: self.run_as.as_deref(),
            secret: secret.to_owned(),
            restart_sec: RESTART_SEC,
            timeout_stop_sec: AGENT_TIMEOUT_STOP_SEC,
            start_limit_interval_sec: START_LIMIT_INTERVAL_SEC,
            start_limit_burst: START_LIMIT_BURST,
        }
        .render()?)
    }
}

fn body_hash(body: &str) -> String {
    Sha256::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Classify a unit file's text by its header hash.
pub(crate) fn provenance(text: &str) -> Provenance {
    match split_header(text) {
        None => Provenance::Foreign,
        Some((hash, body)) if body_hash(body) == hash => Provenance::Pristine,
        Some(_) => Provenance::Edited,
    }
}

/// The body two renders are compared by: the header carries the version, which alone is no
/// reason to rewrite (and restart) a unit.
pub(crate) fn body(text: &str) -> Option<&str> {
    split_header(text).map(|(_, body)| body)
}

fn split_header(text: &str) -> Option<(&str, &str)> {
    let start = text.find(HASH_MARKER)?;
    let rest = &text[start + HASH_MARKER.len()..];
    let end = rest.find('\n')?;
    Some((rest[..end].trim(), &rest[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ProfileName;

    fn spec(scope: Scope, run_as: Option<&str>) -> UnitSpec {
        UnitSpec {
            profile: Profile::new(
                ProfileName::parse("coder").unwrap(),
                "/home/u/.hermes".into(),
            )
            .unwrap(),
            scope,
            exec: "/usr/local/bin/hermes-svc".into(),
            run_as: run_as.map(str::to_owned),
            role: crate::service::role::Role::Gateway,
        }
    }

    #[test]
    fn render_is_pristine_and_has_the_contract_lines() {
        let text = spec(Scope::User, None).render().unwrap();
        assert_eq!(provenance(&text), Provenance::Pristine);
        for line in [
            "Type=notify",
            "NotifyAccess=main",
            "ExecStart=/usr/local/bin/hermes-svc gateway run --profile coder",
            "Environment=\"HERMES_HOME=/home/u/.hermes\"",
            "EnvironmentFile=-/home/u/.hermes/profiles/coder/.env",
            "Restart=always",
            "RestartPreventExitStatus=78",
            "KillMode=mixed",
            "WantedBy=default.target",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
        assert!(!text.contains("--replace"));
        assert!(!text.contains("User="));
    }

    #[test]
    fn system_scope_has_user_and_multi_user_target() {
        let text = spec(Scope::System, Some("bot")).render().unwrap();
        assert!(text.contains("\nUser=bot\n"));
        assert!(text.contains("WantedBy=multi-user.target"));
        assert!(spec(Scope::System, Some("a b")).render().is_err());
    }

    /// What an unprivileged user manager enforces goes into both scopes.
    const SANDBOX_BOTH: &[&str] = &[
        "NoNewPrivileges=yes",
        "RestrictSUIDSGID=yes",
        "UMask=0077",
        "LockPersonality=yes",
        "RestrictRealtime=yes",
        "RestrictNamespaces=yes",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
        "SystemCallArchitectures=native",
        "SystemCallFilter=@system-service",
        "SystemCallErrorNumber=EPERM",
    ];

    /// Needs privileges (or a user namespace) to apply. The capability-dropping ones make an
    /// unprivileged user manager fail the unit with 218/CAPABILITIES, so they must never reach
    /// a user unit.
    const SANDBOX_SYSTEM_ONLY: &[&str] = &[
        "CapabilityBoundingSet=",
        "PrivateTmp=yes",
        "PrivateDevices=yes",
        "PrivateMounts=yes",
        "ProtectSystem=strict",
        "ProtectHome=read-only",
        "RuntimeDirectoryMode=0700",
        "RuntimeDirectoryPreserve=yes",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "ProtectKernelLogs=yes",
        "ProtectControlGroups=yes",
        "ProtectClock=yes",
        "ProtectHostname=yes",
        "ProtectProc=invisible",
    ];

    #[test]
    fn the_user_unit_has_only_the_sandbox_a_user_manager_enforces() {
        let text = spec(Scope::User, None).render().unwrap();
        for line in SANDBOX_BOTH {
            assert!(text.lines().any(|l| l == *line), "missing {line}\n{text}");
        }
        for line in SANDBOX_SYSTEM_ONLY {
            let key = line.split('=').next().unwrap();
            assert!(
                !text.lines().any(|l| l.starts_with(&format!("{key}="))),
                "{key} in a user unit\n{text}"
            );
        }
        assert!(!text.contains("ReadWritePaths="));
    }

    #[test]
    fn the_system_unit_can_write_only_its_profile_home_and_the_lock_dir() {
        let text = spec(Scope::System, Some("bot")).render().unwrap();
        for line in SANDBOX_BOTH.iter().chain(SANDBOX_SYSTEM_ONLY) {
            assert!(text.lines().any(|l| l == *line), "missing {line}\n{text}");
        }
        assert!(text.contains("\nReadWritePaths=/home/u/.hermes/profiles/coder\n"));
        assert!(
            text.contains("\nRuntimeDirectory=hermes-svc-bot\n"),
            "{text}"
        );
        assert!(
            text.contains("\nEnvironment=\"HERMES_LOCK_DIR=/run/hermes-svc-bot\"\n"),
            "{text}"
        );
        let root = spec(Scope::System, Some("root")).render().unwrap();
        assert!(root.contains("\nRuntimeDirectory=hermes-svc\n"), "{root}");
        assert!(
            !root.contains("HERMES_LOCK_DIR"),
            "root's own default: {root}"
        );

        let odd = UnitSpec {
            profile: Profile::new(
                ProfileName::parse("default").unwrap(),
                "/srv/bot home/50%".into(),
            )
            .unwrap(),
            ..spec(Scope::System, Some("bot"))
        };
        let text = odd.render().unwrap();
        assert!(
            text.contains("\nReadWritePaths=\"/srv/bot home/50%%\"\n"),
            "{text}"
        );
    }

    #[test]
    fn a_home_with_dot_dot_is_refused() {
        // Found by the round-trip property test: systemd 252 drops an `EnvironmentFile=`
        // path that is not normalized, so the unit would run without the profile's .env.
        let mut s = spec(Scope::User, None);
        s.profile = Profile::new(
            ProfileName::parse("coder").unwrap(),
            "/home/u/../u/.hermes".into(),
        )
        .unwrap();
        assert!(matches!(s.render(), Err(RenderError::ParentDirInPath(_))));
        // `.` and `//` are fine: systemd simplifies them to the same path.
        s.profile = Profile::new(
            ProfileName::parse("coder").unwrap(),
            "/home/u/./x//.hermes".into(),
        )
        .unwrap();
        assert!(s.render().is_ok());
    }

    #[test]
    fn an_edit_is_detected() {
        let text = spec(Scope::User, None).render().unwrap();
        let edited = text.replace("RestartSec=5", "RestartSec=9");
        assert_eq!(provenance(&edited), Provenance::Edited);
        assert_eq!(
            provenance("[Service]\nExecStart=/bin/true\n"),
            Provenance::Foreign
        );
    }
}

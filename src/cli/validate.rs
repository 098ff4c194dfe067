//! Validation: every flag checked and turned into a typed request before anything is touched,
//! so that bad input exits 2 with one line naming the flag and the fix.

use std::path::{Path, PathBuf};

use super::args::{AgentKind, UnitSource};
use super::error::{usage, CliError};
use crate::profile::{Profile, ProfileName};
use crate::service::role::Role;
use crate::service::settings::Settings;
use crate::service::settings::{Directive, MAX_SECONDS};
use crate::systemd::dropin;
use crate::systemd::escape;
use crate::systemd::scope::Scope;
use crate::systemd::unit_file::UnitSpec;

pub(super) fn parse_profile(name: &str) -> Result<ProfileName, CliError> {
    ProfileName::parse(name).map_err(|e| usage(e.to_string()))
}

/// The profile for a unit of `scope`: system units read the `--run-as` user's home.
pub(super) fn resolve_profile(
    name: &str,
    scope: Scope,
    run_as: Option<&str>,
) -> Result<Profile, CliError> {
    let name = parse_profile(name)?;
    let from_env = crate::profile::hermes_home_var();
    // The account is checked even when HERMES_HOME names the home: a unit for a user that
    // does not exist fails at every start.
    let account = match (scope, run_as) {
        (Scope::System, Some(user)) => Some(
            nix::unistd::User::from_name(user)
                .ok()
                .flatten()
                .ok_or_else(|| usage(format!("--run-as {user}: no such user on this machine")))?,
        ),
        _ => None,
    };
    let home = match (account, from_env) {
        (_, Some(home)) => home,
        (Some(account), None) => account.dir.join(".hermes"),
        _ => crate::profile::default_hermes_home().map_err(|e| usage(e.to_string()))?,
    };
    Profile::new(name, home).map_err(|e| usage(e.to_string()))
}

pub(super) fn unit_spec(src: &UnitSource) -> Result<UnitSpec, CliError> {
    let scope = src.scope.scope();
    match (scope, &src.run_as) {
        (Scope::User, Some(_)) => {
            return Err(usage(
                "--run-as only applies to --system units (user units run as you)",
            ))
        }
        (Scope::System, None) => {
            return Err(usage(
                "--system needs --run-as USER: the account the gateway runs as",
            ))
        }
        _ => {}
    }
    let exec = exec_path(src.exec.as_deref())?;
    let profile = resolve_profile(&src.profile, scope, src.run_as.as_deref())?;
    // `EnvironmentFile=` takes its path as a glob (systemd.exec(5)), and a path that is not
    // one file is skipped without a word: the gateway would start without its secrets.
    let env_file = profile.env_file();
    let home = env_file.to_string_lossy();
    if let Some(c) = home
        .chars()
        .find(|c| matches!(c, '*' | '?' | '[' | ']' | '\\'))
    {
        return Err(usage(format!(
            "{home}: {c:?} would make systemd read EnvironmentFile= as a pattern and skip this .env; choose a HERMES_HOME without * ? [ ] or \\"
        )));
    }
    let spec = UnitSpec {
        profile,
        scope,
        exec,
        run_as: src.run_as.clone(),
        role: crate::service::role::Role::Gateway,
    };
    // Render once now, so bad values are usage errors before anything is touched.
    spec.render().map_err(|e| usage(e.to_string()))?;
    Ok(spec)
}

/// `--exec`, or this binary: the program the job runs, checked to be one.
pub(super) fn exec_path(exec: Option<&Path>) -> Result<PathBuf, CliError> {
    let exec = match exec {
        Some(p) => p.to_owned(),
        None => std::env::current_exe().map_err(CliError::CurrentExe)?,
    };
    check_executable("--exec", &exec)?;
    Ok(exec)
}

/// The role of `install --agent hermes`: the `hermes` program (`--agent-exec`, else the first
/// on PATH), for a profile whose gateway serves the Relay it will dial.
pub(super) fn agent_role(
    kind: AgentKind,
    exec: Option<&Path>,
    profile: &Profile,
) -> Result<Role, CliError> {
    let AgentKind::Hermes = kind;
    let config = profile.config_file();
    let relay = crate::config::load::<crate::platform::Protocol>(&config)
        .map_err(|e| usage(format!("--agent hermes: {e}")))?
        .agent
        .is_some_and(|a| matches!(a.bridge, crate::config::Bridge::HermesRelay { .. }));
    if !relay {
        return Err(usage(format!(
            "--agent hermes: Hermes dials the gateway's Relay, which {} does not serve; add\n[agent]\nkind = \"hermes-relay\"\nto it first (docs/agent.md)",
            config.display()
        )));
    }
    let hermes = match exec {
        Some(p) => p.to_owned(),
        None => on_path("hermes").ok_or_else(|| {
            usage("--agent hermes: no `hermes` on PATH; install it (pip install hermes-agent==0.19.0) or give --agent-exec PATH")
        })?,
    };
    check_executable("--agent-exec", &hermes)?;
    Ok(Role::Agent { hermes })
}

/// The first executable file called `name` in the directories of `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn check_executable(flag: &str, path: &Path) -> Result<(), CliError> {
    use std::os::unix::fs::PermissionsExt;
    if !path.is_absolute() {
        return Err(usage(format!(
            "{flag} {}: must be an absolute path",
            path.display()
        )));
    }
    // systemd does not undo `$$` in the executable's own path (only in arguments), so a `$`
    // there can only end in a unit that fails with 203/EXEC.
    if path.to_string_lossy().contains('$') {
        return Err(usage(format!(
            "{flag} {}: systemd cannot run a program whose path contains '$'; move or link it elsewhere",
            path.display()
        )));
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
        Ok(_) => Err(usage(format!(
            "{flag} {}: not an executable file",
            path.display()
        ))),
        Err(e) => Err(usage(format!("{flag} {}: {e}", path.display()))),
    }
}

fn seconds(flag: &str, raw: &str) -> Result<u64, CliError> {
    let raw = raw.trim();
    let digits = raw.strip_suffix('s').unwrap_or(raw);
    match digits.parse::<u64>() {
        Ok(n) if n > 0 && n <= MAX_SECONDS => Ok(n),
        _ => Err(usage(format!(
            "{flag}={raw:?}: must be a whole number of seconds from 1 to {}, like 30",
            MAX_SECONDS
        ))),
    }
}

fn env_pair(flag: &str, raw: &str) -> Result<(String, String), CliError> {
    let (k, v) = raw.split_once('=').ok_or_else(|| {
        usage(format!(
            "{flag} {raw:?}: expected KEY=VALUE, like HTTPS_PROXY=http://proxy:8080"
        ))
    })?;
    escape::env_assignment(k, v).map_err(|e| usage(format!("{flag} {k}: {e}")))?;
    if let Some(why) = dropin::reserved_env(k) {
        return Err(usage(format!("{flag} {k}: cannot be set here: {why}")));
    }
    Ok((k.to_owned(), v.to_owned()))
}

/// `--credential NAME=PATH`: NAME as gateway.toml names the secret's variable, PATH a file
/// the manager can read when the unit starts.
fn credential_pair(raw: &str) -> Result<(String, String), CliError> {
    let (name, path) = raw.split_once('=').ok_or_else(|| {
        usage(format!(
            "--credential {raw:?}: expected NAME=PATH, like BOT_TOKEN=/etc/hermes/bot.token"
        ))
    })?;
    escape::env_name(name).map_err(|e| usage(format!("--credential {name}: {e}")))?;
    if let Some(why) = dropin::credential_path(path) {
        return Err(usage(format!("--credential {name}={path}: {why}")));
    }
    if !std::path::Path::new(path).is_file() {
        return Err(usage(format!(
            "--credential {name}={path}: no such file; write the secret to it first (mode 0600)"
        )));
    }
    Ok((name.to_owned(), path.to_owned()))
}

pub(super) fn settings(
    env: &[String],
    credentials: &[String],
    watchdog: Option<&str>,
    restart: Option<&str>,
) -> Result<Settings, CliError> {
    let mut s = Settings::default();
    for raw in env {
        s.env.push(env_pair("--env", raw)?);
    }
    for raw in credentials {
        s.credentials.push(credential_pair(raw)?);
    }
    if let Some(w) = watchdog {
        s.directives
            .push((Directive::WatchdogSec, seconds("--watchdog-sec", w)?));
    }
    if let Some(r) = restart {
        s.directives
            .push((Directive::RestartSec, seconds("--restart-sec", r)?));
    }
    Ok(s)
}

/// `set` pairs: a supported directive name sets the directive, anything else an env var.
pub(super) fn set_pairs(pairs: &[String]) -> Result<Settings, CliError> {
    let mut s = Settings::default();
    for raw in pairs {
        let (k, v) = raw.split_once('=').ok_or_else(|| {
            usage(format!(
                "{raw:?}: expected KEY=VALUE, like HTTPS_PROXY=http://proxy:8080 or WatchdogSec=60"
            ))
        })?;
        match Directive::from_name(k) {
            Some(d) => s.directives.push((d, seconds(d.name(), v)?)),
            None => s.env.push(env_pair("set", raw)?),
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_name_the_flag_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dc.token");
        std::fs::write(&file, "t\n").unwrap();
        let ok = format!("DC_TOKEN={}", file.display());
        let s = settings(&[], &[ok], None, None).unwrap();
        assert_eq!(
            s.credentials,
            [("DC_TOKEN".to_owned(), file.display().to_string())]
        );
        let missing = format!("DC_TOKEN={}", dir.path().join("nope").display());
        let pct = format!("DC_TOKEN={}/%h", dir.path().display());
        for (raw, says) in [
            ("DC_TOKEN", "expected NAME=PATH"),
            ("DC TOKEN=/etc/x", "--credential DC TOKEN"),
            ("DC_TOKEN=relative/x", "absolute path"),
            (missing.as_str(), "no such file"),
            (pct.as_str(), "specifier"),
        ] {
            let e = settings(&[], &[raw.to_owned()], None, None).unwrap_err();
            assert!(e.to_string().contains(says), "{raw}: {e}");
            assert_eq!(e.exit_code(), crate::exit_code::USAGE);
        }
    }
}

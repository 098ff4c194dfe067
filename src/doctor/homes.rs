//! The profile homes doctor looks at, whichever manager runs them: each profile's files
//! (`.env`, `gateway.toml`, pid file, state file), who holds its instance lock, the platforms'
//! word on their adapters' standing, and beside them the manager's services seen only as far as these
//! checks need (which profile each serves, and its process).
//!
//! Both doctors build one [`Homes`] per run, from the homes their units or jobs run with and
//! the caller's own, and the manager-neutral checks (`checks::{profile_home, bot_account,
//! outbox}`) read nothing else, so they run unchanged under systemd and launchd. All impure
//! work happens here, so those checks stay pure.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::SystemTime;

use crate::bounded_read::Owner;
use crate::config;
use crate::doctor::standing;
use crate::gateway::pid_file::{PidFile, PidRecord};
use crate::gateway::state_file::StateFile;
use crate::gateway::token_lock;
pub(crate) use crate::lock_holder::LockHolder;
use crate::lock_holder::LockLookup;
use crate::platform::standing::{Question, Standing};
use crate::profile::{Profile, ProfileName};
use crate::systemd::scope::Scope;

/// Everything the manager-neutral checks look at.
#[derive(Clone, Debug)]
pub(crate) struct Homes {
    /// When the snapshot was taken: a state file older than its own limit then is stale.
    pub(crate) now: SystemTime,
    pub(crate) profiles: Vec<ProfileSnap>,
    /// The manager's gateway units or jobs, in the order it listed them.
    pub(crate) services: Vec<ServiceSnap>,
}

impl Default for Homes {
    fn default() -> Self {
        Self {
            now: SystemTime::now(),
            profiles: vec![],
            services: vec![],
        }
    }
}

impl Homes {
    /// Read every profile under `dirs` (each a `HERMES_HOME`), beside the manager's
    /// `services`, and ask the platforms about their adapters' standing.
    pub(crate) async fn gather(dirs: BTreeSet<PathBuf>, services: Vec<ServiceSnap>) -> Homes {
        let now = SystemTime::now();
        let main_pids = services.iter().filter_map(|s| s.pid).collect();
        let (mut profiles, questions) = profiles_in(dirs, main_pids);
        for (p, adapter, standing) in standing::ask(questions).await {
            profiles[p].standing.push((adapter, standing));
        }
        Homes {
            now,
            profiles,
            services,
        }
    }
}

/// A systemd unit or launchd job that runs a gateway, as far as the profile-home checks need
/// it: which profile it serves, and its process, to tell whose process a pid file names
/// (HSV007); and its scope, for the `--system` a fix names (HSV019).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServiceSnap {
    /// How a finding names it: the unit's name, or the job's `Label` (else its file name).
    pub(crate) name: String,
    /// The profile it serves, judged from its argv, `HERMES_HOME` and the sticky file.
    pub(crate) serves: Option<ProfileName>,
    /// The `HERMES_HOME` it runs with.
    pub(crate) hermes_home: PathBuf,
    /// The scope hermes-svc names it by: a system unit's, else the user's (every launchd job).
    pub(crate) scope: Scope,
    /// Whether its manager says it runs, or is on its way up.
    pub(crate) active: bool,
    /// Its main process, when it has one.
    pub(crate) pid: Option<u32>,
}

/// What the process a pid file names looks like now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PidProcess {
    Dead,
    /// Alive; its command line, NUL-separated arguments joined by spaces.
    // Only the Linux build makes one: macOS has no /proc to read a command line from.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Alive {
        cmdline: String,
    },
    /// Alive, but its command line can't be read on this platform (macOS has no `/proc`), so
    /// nothing is concluded from what it runs.
    // Only the macOS build makes one: Linux reads every command line it asks for from /proc.
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    AliveUnreadable,
}

/// One profile's home on disk.
#[derive(Clone, Debug)]
pub(crate) struct ProfileSnap {
    pub(crate) name: ProfileName,
    pub(crate) hermes_home: PathBuf,
    pub(crate) home: PathBuf,
    pub(crate) pid_path: PathBuf,
    pub(crate) pid: Option<(PidRecord, PidProcess)>,
    pub(crate) state: Option<StateFile>,
    pub(crate) env_path: PathBuf,
    /// Permission bits of `.env`, when it exists.
    pub(crate) env_mode: Option<u32>,
    pub(crate) config_path: PathBuf,
    /// Why `gateway.toml` does not load (the message names file and line, never a secret).
    pub(crate) config_error: Option<String>,
    /// `(adapter, short hash of its identity)` for every adapter whose credential is in `.env`.
    pub(crate) token_hashes: Vec<(String, String)>,
    /// `(adapter, standing)` for every adapter whose platform doctor asked about it, in the
    /// order of `gateway.toml`.
    pub(crate) standing: Vec<(String, Standing)>,
    /// `(adapter, variable)` for every adapter whose secret gateway.toml names a variable for.
    pub(crate) secret_vars: Vec<(String, String)>,
    /// The process holding the profile's instance lock: the kernel's word on which gateway
    /// serves the profile right now, whatever pid files say.
    pub(crate) lock_holder: Option<LockHolder>,
    /// The outbox's journal, for the fix of an outbox the gateway could not open.
    pub(crate) outbox_journal: PathBuf,
    /// How long messages may wait for the agent before it is a finding (`[agent] idle-alarm`),
    /// when the profile has an agent.
    pub(crate) agent_idle_alarm: Option<std::time::Duration>,
    /// Whether gateway.toml has a `[cluster]` (none when it cannot be read), and the note a
    /// gateway that ran in a cluster left (cluster/membership.rs).
    pub(crate) clustered: Option<bool>,
    pub(crate) membership: Option<crate::cluster::Membership>,
    /// `(adapter, kind)` for every adapter in `gateway.toml`: the platforms its gateway holds.
    pub(crate) held: Vec<(String, &'static str)>,
    /// The Hermes homes of this profile that connect, or would connect, a platform themselves:
    /// the agent unit's (its `.env` and its running gateway) and Hermes's own profile of the
    /// same name, which is the profile home (its running gateway only: the `.env` there is the
    /// gateway's).
    pub(crate) hermes: Vec<crate::agent::hermes::Seen>,
    /// Who may reach the agent through each adapter, when the profile has an agent (none
    /// when `gateway.toml` cannot be read).
    pub(crate) access: Vec<AdapterAccess>,
    /// Why the pairing store cannot be used, when it cannot: one another user could write
    /// (the gateway then admits no paired sender), or one that does not read.
    pub(crate) pairing_error: Option<String>,
}

/// What one adapter's access rules let through (`access/rules.rs`), for doctor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AdapterAccess {
    pub(crate) adapter: String,
    pub(crate) kind: &'static str,
    /// `allow-all`: anyone who finds the bot reaches the agent.
    pub(crate) allow_all: bool,
    /// Someone is admitted by a rule: a listed sender or chat, or a paired sender.
    pub(crate) admits_someone: bool,
    /// Unknown senders' DMs are answered with a pairing code.
    pub(crate) pairs: bool,
}

/// Every profile home under `homes`, read for the profile checks. `main_pids` are the pids the
/// manager runs as services, whose instance locks need no look at the kernel's lock table.
/// Every profile under `homes`, and the questions for their platforms, each with the index
/// of its profile.
fn profiles_in(
    mut homes: BTreeSet<PathBuf>,
    main_pids: BTreeSet<u32>,
) -> (Vec<ProfileSnap>, Vec<(usize, Question)>) {
    homes.retain(|h| !h.as_os_str().is_empty());
    let locks = LockLookup::new(main_pids);
    let (mut out, mut questions) = (vec![], vec![]);
    for h in homes {
        for name in crate::profile::names_in(&h) {
            if let Ok(p) = Profile::new(name, h.clone()) {
                let (snap, asked) = profile_snap(&p, &locks);
                questions.extend(asked.into_iter().map(|q| (out.len(), q)));
                out.push(snap);
            }
        }
    }
    (out, questions)
}

#[cfg(target_os = "linux")]
fn pid_process(pid: u32) -> PidProcess {
    match crate::lock_holder::cmdline(pid) {
        Some(cmdline) => PidProcess::Alive { cmdline },
        None => PidProcess::Dead,
    }
}

#[cfg(not(target_os = "linux"))]
fn pid_process(pid: u32) -> PidProcess {
    if crate::process_probe::exists(pid) {
        PidProcess::AliveUnreadable
    } else {
        PidProcess::Dead
    }
}

fn profile_snap(p: &Profile, locks: &LockLookup) -> (ProfileSnap, Vec<Question>) {
    let env_path = p.env_file();
    // Bounded reads: a FIFO, a symlink to /dev/zero or a huge file must not hang doctor.
    let env_text = crate::env_file::read(&env_path, Owner::SelfRootOrDirectory)
        .ok()
        .flatten();
    let env_mode = std::fs::metadata(&env_path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777);
    let config_path = p.config_file();
    let vars = env_text
        .as_deref()
        .map(|t| crate::env_file::parse(t).0)
        .unwrap_or_default();
    let config =
        config::load_with::<crate::platform::Protocol>(&config_path, Owner::SelfRootOrDirectory);
    let agent_idle_alarm = config
        .as_ref()
        .ok()
        .and_then(|c| c.agent.as_ref().map(|a| a.idle_alarm));
    let clustered = config.as_ref().ok().map(|c| c.cluster.is_some());
    let held = config
        .as_ref()
        .map(|c| {
            c.adapters
                .iter()
                .map(|a| (a.name.clone(), a.protocol.kind()))
                .collect()
        })
        .unwrap_or_default();
    let store = crate::access::pairing::Store::new(&p.access_dir());
    let (book, pairing_error) = match store.read_as(Owner::SelfRootOrDirectory) {
        Ok(book) => (book, None),
        Err(e) => (Default::default(), Some(crate::error_chain::one_line(&e))),
    };
    let access = access_of(&config, &book);
    let hermes = [(crate::agent::hermes::home(p), true), (p.home(), false)]
        .into_iter()
        .filter_map(|(home, read_env)| {
            let mut seen = crate::agent::hermes::look(&home)?;
            if !read_env {
                seen.env_credentials.clear();
            }
            (!seen.platforms().is_empty()).then_some(seen)
        })
        .collect();
    let (config_error, token_hashes, questions, secret_vars) = match config {
        Err(e) => (
            Some(redact(&crate::error_chain::one_line(&e), &vars)),
            vec![],
            vec![],
            vec![],
        ),
        Ok(cfg) => {
            let hashes = cfg
                .adapters
                .iter()
                .filter_map(|spec| {
                    let secrets = secrets_in(spec, &vars)?;
                    Some((
                        spec.name.clone(),
                        token_lock::fingerprint(&spec.identity(&secrets)),
                    ))
                })
                .collect();
            let questions = cfg
                .adapters
                .iter()
                .filter_map(|spec| {
                    let secrets = secrets_in(spec, &vars)?;
                    crate::platform::question(spec, &secrets, &config_path)
                })
                .collect();
            let secret_vars = cfg
                .adapters
                .iter()
                .flat_map(|a| {
                    a.credential_envs()
                        .into_iter()
                        .map(|var| (a.name.clone(), var.to_owned()))
                })
                .collect();
            (None, hashes, questions, secret_vars)
        }
    };
    let pid_path = p.pid_file();
    let snap = ProfileSnap {
        name: p.name().clone(),
        hermes_home: p.hermes_home().to_owned(),
        home: p.home(),
        outbox_journal: p.outbox_journal(),
        pid: PidFile::read(&pid_path).map(|r| {
            let proc = pid_process(r.pid);
            (r, proc)
        }),
        pid_path,
        state: StateFile::read(&p.state_file()),
        env_path,
        env_mode,
        config_path,
        config_error,
        token_hashes,
        standing: vec![],
        secret_vars,
        lock_holder: locks.holder(&p.lock_file()),
        agent_idle_alarm,
        clustered,
        membership: crate::cluster::Membership::read(&p.cluster_membership()),
        held,
        hermes,
        access,
        pairing_error,
    };
    (snap, questions)
}

/// Each adapter's access rules as doctor judges them, when the profile has an agent.
fn access_of(
    config: &Result<crate::platform::GatewayConfig, config::ConfigError>,
    book: &crate::access::pairing::Book,
) -> Vec<AdapterAccess> {
    let Ok(c) = config else { return vec![] };
    if c.agent.is_none() {
        return vec![];
    }
    c.adapters
        .iter()
        .map(|a| {
            let kind = a.protocol.kind();
            let rules = crate::access::Rules::resolve(
                &a.access,
                &c.access,
                crate::platform::requires_mention(kind),
            );
            AdapterAccess {
                adapter: a.name.clone(),
                kind,
                allow_all: rules.allow_all,
                admits_someone: rules.allow_all
                    || !rules.allow_users.is_empty()
                    || !rules.allow_chats.is_empty()
                    || book.approved.get(&a.name).is_some_and(|s| !s.is_empty()),
                pairs: rules.unknown_dm == crate::config::UnknownDm::Pair,
            }
        })
        .collect()
}

/// The adapter's secrets as `.env` gives them (the last of a name winning, as the unit's
/// `EnvironmentFile=` reads it), or `None` when it has none or one is missing or empty.
fn secrets_in(
    spec: &crate::platform::AdapterSpec,
    vars: &[(String, String)],
) -> Option<Vec<config::Secret>> {
    let envs = spec.credential_envs();
    if envs.is_empty() {
        return None;
    }
    let mut secrets = vec![];
    for var in envs {
        let value = vars.iter().rev().find(|(k, _)| k == var)?.1.clone();
        if value.is_empty() {
            return None;
        }
        secrets.push(config::Secret::new(value));
    }
    Some(secrets)
}

/// Hide every `.env` value in `text`. A parse error may quote a value, and a token pasted
/// into gateway.toml by mistake must not reach doctor's output through it.
pub(crate) fn redact(text: &str, vars: &[(String, String)]) -> String {
    let mut out = text.to_owned();
    for (_, v) in vars {
        if v.len() >= 4 {
            out = out.replace(v.as_str(), "<redacted>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_are_redacted_from_messages() {
        let vars = vec![("T".to_owned(), "s3cr3t-token".to_owned())];
        assert_eq!(
            redact("invalid type: string \"s3cr3t-token\"", &vars),
            "invalid type: string \"<redacted>\""
        );
        assert_eq!(redact("line 3: unknown key", &vars), "line 3: unknown key");
    }
}

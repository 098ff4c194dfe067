//! The real gateway binary run the way launchd runs a profile's LaunchAgent: argv and
//! environment taken from the rendered plist (so `HERMES_SERVICE_MANAGER=launchd`, no
//! `NOTIFY_SOCKET`, no `WATCHDOG_USEC`), stdin from /dev/null and stdout and stderr appended
//! to the plist's `StandardOutPath` and `StandardErrorPath`. Each exit status is then judged
//! by that same plist's `KeepAlive` (`Job::restarts_after_exit`): a wedged adapter must come
//! back, a token conflict or a bad `gateway.toml` must not respawn in a loop, a SIGTERM (what
//! `launchctl bootout` sends) stays 0. The same runs with systemd's manager named keep the
//! codes the unit acts on (75, 78, 0).
//!
//! The mock platform runs inside the test process; profile names start with `lw`.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use hermes_svc::launchd::plist::{Job, LaunchAgent};
use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use hermes_svc::profile::{Profile, ProfileName};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::harness::{scratch_dir, wait_for, TempDir, BIN};
use crate::mock_runtime::{mock_runtime, start_mock};

/// The self-watchdog deadline the wedge test gives the gateway, as `set WatchdogSec=2` would.
const WATCHDOG_SEC: u64 = 2;

/// One profile's LaunchAgent, rendered for a `HERMES_HOME` of its own and parsed back.
struct Agent {
    /// Holds `HERMES_HOME`; removed on drop.
    _home: TempDir,
    profile: Profile,
    job: Job,
    err_log: PathBuf,
    out_log: PathBuf,
}

impl Agent {
    /// Write the profile's `gateway.toml` and `.env`, then render and parse its plist with
    /// `env` among its `EnvironmentVariables` (as `set` would put them there).
    fn new(
        name: &str,
        gateway_toml: &str,
        dotenv: &str,
        watchdog_sec: Option<u64>,
        env: &[(&str, &Path)],
    ) -> Agent {
        let home = scratch_dir(name);
        let profile = Profile::new(ProfileName::parse(name).unwrap(), home.path().into()).unwrap();
        let dir = profile.home();
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("gateway.toml"), gateway_toml).unwrap();
        fs::write(dir.join(".env"), dotenv).unwrap();
        let mut agent = LaunchAgent::new(profile.clone(), BIN.into());
        agent.watchdog_sec = watchdog_sec;
        for (k, v) in env {
            agent
                .env
                .insert((*k).to_owned(), v.to_str().unwrap().to_owned());
        }
        let job = Job::parse(agent.render().unwrap().as_bytes()).unwrap();
        let path = |key: &str| PathBuf::from(job.raw.get(key).and_then(|v| v.as_string()).unwrap());
        let (out_log, err_log) = (path("StandardOutPath"), path("StandardErrorPath"));
        Agent {
            _home: home,
            profile,
            job,
            err_log,
            out_log,
        }
    }

    /// The job's process as launchd would start it: its `ProgramArguments`, its
    /// `EnvironmentVariables` over a bare environment, stdin from /dev/null (launchd.plist(5):
    /// launchd redirects stdio itself), stdout and stderr appended to its log files. With
    /// `manager`, `HERMES_SERVICE_MANAGER` is replaced, for the systemd column.
    fn command(&self, manager: Option<&str>) -> Command {
        let (program, args) = self.job.arguments.split_first().unwrap();
        let mut cmd = Command::new(program);
        cmd.args(args).env_clear().envs(&self.job.env);
        cmd.env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
            .env("XPC_SERVICE_NAME", self.job.label.as_deref().unwrap());
        if let Some(m) = manager {
            cmd.env("HERMES_SERVICE_MANAGER", m);
        }
        fs::create_dir_all(self.err_log.parent().unwrap()).unwrap();
        let append = |p: &Path| -> File {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .unwrap()
        };
        cmd.stdin(Stdio::null())
            .stdout(append(&self.out_log))
            .stderr(append(&self.err_log));
        cmd
    }

    fn err_log(&self) -> String {
        fs::read_to_string(&self.err_log).unwrap_or_default()
    }

    /// The state file, if the gateway has written one that parses.
    fn state(&self) -> Option<serde_json::Value> {
        serde_json::from_str(
            &fs::read_to_string(self.profile.home().join("state/gateway.json")).ok()?,
        )
        .ok()
    }

    fn truncate_logs(&self) {
        for p in [&self.err_log, &self.out_log] {
            let _ = fs::write(p, "");
        }
    }
}

/// Run to completion, within `limit`.
fn exit_of(mut cmd: Command, limit: Duration, what: &str) -> ExitStatus {
    let mut child = cmd.spawn().unwrap();
    wait_for(limit, what, || child.try_wait().unwrap())
}

/// The status launchd would see: an exit code (a death by signal has none, and fails here).
fn code(status: ExitStatus) -> u8 {
    let code = status.code().expect("exited, not killed by a signal");
    u8::try_from(code).unwrap()
}

fn term(child: &Child) {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
}

/// A qqbot adapter against the mock whose time to READY and retry deadline are short.
fn qq_adapter(mock: &MockPlatform, app_id: &str) -> String {
    let base = mock.http_base();
    format!(
        "[[adapter]]\nname = \"qq\"\nkind = \"qqbot\"\napp-id = \"{app_id}\"\n\
         secret-env = \"LW_QQ_SECRET\"\napi-base = \"{base}\"\n\
         token-url = \"{base}/app/getAppAccessToken\"\n\
         connect-timeout = \"1s\"\nhello-timeout = \"1s\"\n\
         backoff-min = \"200ms\"\nbackoff-max = \"1s\"\n"
    )
}

/// A wedged adapter under launchd: the self-watchdog (deadline from `HERMES_WATCHDOG_SEC`)
/// ends the run with 75, which the plist restarts, and says why. Run with systemd's manager
/// named (and still no `WATCHDOG_USEC`, as in a foreground run), the same wedge exits 75 too.
///
/// The bound: the gateway ticks every `WATCHDOG_SEC`/2 and writes the state file on each
/// tick. The first tick at which qq's heartbeat is past its deadline writes `fresh: false`;
/// that is the earliest the wedge can be seen, and the moment measured from (the test polls
/// the file every 50 ms, so it sees it a little later, which only makes the bound looser).
/// The self-watchdog fires on the first tick more than `WATCHDOG_SEC` past the deadline,
/// which is at most `WATCHDOG_SEC` after that first stale tick (two ticks later). The 1 s on
/// top covers the drain (the stale adapter is given up at once), the spool's sync and the exit.
#[test]
fn a_wedged_adapter_exits_within_the_self_watchdog_deadline_with_a_status_the_plist_restarts() {
    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let locks = scratch_dir("lw-wedge-locks");
    let agents: Vec<(Option<&str>, Agent)> =
        [(None, "lwwedge", "1"), (Some("systemd"), "lwwedgesd", "2")]
            .into_iter()
            .map(|(manager, name, app_id)| {
                let agent = Agent::new(
                    name,
                    &qq_adapter(&mock, app_id),
                    "LW_QQ_SECRET=lw-wedge-secret\n",
                    Some(WATCHDOG_SEC),
                    &[("HERMES_LOCK_DIR", locks.path())],
                );
                (manager, agent)
            })
            .collect();
    // Both run at once, each watched by a thread of its own from its start, so that neither
    // one's stale window is missed while the other is watched.
    std::thread::scope(|scope| {
        for (manager, agent) in &agents {
            let mut cmd = agent.command(*manager);
            cmd.env("HERMES_TEST_FAULT", "wedge:qq");
            let child = cmd.spawn().unwrap();
            scope.spawn(move || watch_the_wedge(manager.unwrap_or("launchd"), agent, child));
        }
    });
}

/// Wait for the wedge to be seen, then for the self-watchdog's exit, and judge both.
fn watch_the_wedge(column: &str, agent: &Agent, mut child: Child) {
    let stale_at = wait_for(Duration::from_secs(30), "qq to be reported stale", || {
        let s = agent.state()?;
        let qq = s["components"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "qq")?;
        (qq["fresh"] == false).then(Instant::now)
    });
    let status = wait_for(
        Duration::from_secs(WATCHDOG_SEC + 10),
        "the self-watchdog to end the run",
        || child.try_wait().unwrap(),
    );
    let took = stale_at.elapsed();
    let log = agent.err_log();
    println!("{column}: {status} {took:?} after qq was first seen stale");
    assert!(
        took <= Duration::from_secs(WATCHDOG_SEC + 1),
        "{column}: exit came {took:?} after the wedge was first seen (> {WATCHDOG_SEC} s + 1 s):\n{log}"
    );
    assert_eq!(status.code(), Some(75), "{column}:\n{log}");
    assert!(
        agent.job.restarts_after_exit(code(status)),
        "the plist must restart a self-watchdog exit"
    );
    assert!(log.contains("test fault: wedged"), "{column}:\n{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("ERROR") && l.contains("(self-watchdog)")),
        "{column}: the reason is logged as an error:\n{log}"
    );
    let summary = agent.state().unwrap()["summary"].clone();
    assert!(
        summary.as_str().unwrap().starts_with(&format!(
            "exited 75 under {column}: restarting: qq stale in"
        )),
        "{column}: {summary}"
    );
}

/// A profile whose gateway must refuse to run, the reason it must give, and the variables a
/// hand edit of its plist added.
type Refusal<'a> = (&'a Agent, &'a str, &'a [(&'a str, &'a str)]);

/// A second gateway on a token another profile's gateway holds, a profile with a bad
/// `gateway.toml`, and one with a `HERMES_WATCHDOG_SEC` that is no deadline: under launchd
/// each exits 0, which the plist does not restart, with the reason in `gateway.err.log` (an
/// error-level line saying why a failure exits 0) and in the state file; under systemd each
/// keeps 78. The holder is not disturbed, and stops with 0 on SIGTERM.
#[test]
fn a_token_conflict_or_a_bad_config_exits_with_a_status_the_plist_does_not_restart() {
    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let locks = scratch_dir("lw-conflict-locks");
    let discord = format!(
        "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"LW_TOKEN\"\n\
         api-base = \"{}\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n",
        mock.http_base()
    );
    let with_locks = [("HERMES_LOCK_DIR", locks.path())];
    let holder = Agent::new(
        "lwhold",
        &discord,
        "LW_TOKEN=lw-shared\n",
        None,
        &with_locks,
    );
    let second = Agent::new(
        "lwsecond",
        &discord,
        "LW_TOKEN=lw-shared\n",
        None,
        &with_locks,
    );
    let bad = Agent::new(
        "lwbadtoml",
        "[[adapter]]\nname = 1\n",
        "",
        None,
        &with_locks,
    );
    // A deadline no `set` would store, as a hand edit of the plist could leave it.
    let bad_dog = Agent::new("lwbaddog", "", "", None, &with_locks);
    let soon = [("HERMES_WATCHDOG_SEC", "soon")];

    let mut first = holder.command(None).spawn().unwrap();
    // The pid file is written after the token locks are taken.
    wait_for(Duration::from_secs(10), "the holder's pid file", || {
        holder
            .profile
            .home()
            .join("gateway.pid")
            .exists()
            .then_some(())
    });
    let held = format!(
        "token for adapter dc already held by profile lwhold (PID {})",
        first.id()
    );

    let cases: [Refusal; 3] = [
        (&second, &held, &[]),
        (&bad, "gateway.toml:2: invalid type", &[]),
        (
            &bad_dog,
            "HERMES_WATCHDOG_SEC=\"soon\" is not a self-watchdog deadline",
            &soon,
        ),
    ];
    for (agent, why, env) in cases {
        let name = agent.profile.name().to_string();
        let mut launchd = agent.command(None);
        launchd.envs(env.iter().copied());
        let status = exit_of(launchd, Duration::from_secs(10), "the refusal");
        let log = agent.err_log();
        println!("{name} under launchd: {status}\n{log}");
        assert_eq!(status.code(), Some(0), "{name}:\n{log}");
        assert!(
            !agent.job.restarts_after_exit(code(status)),
            "{name}: the plist would respawn it"
        );
        assert!(
            log.contains(why),
            "{name}: the reason is in gateway.err.log:\n{log}"
        );
        assert!(
            log.lines()
                .any(|l| l.contains("ERROR") && l.contains("the gateway stays down")),
            "{name}: the exit 0 is explained at error level:\n{log}"
        );
        let summary = agent.state().expect("a state file")["summary"].clone();
        let summary = summary.as_str().unwrap();
        assert!(
            summary.starts_with("exited 0 under launchd: ") && summary.contains(why),
            "{name}: {summary}"
        );

        agent.truncate_logs();
        let mut systemd = agent.command(Some("systemd"));
        systemd.envs(env.iter().copied());
        let status = exit_of(
            systemd,
            Duration::from_secs(10),
            "the refusal under systemd",
        );
        let log = agent.err_log();
        assert_eq!(status.code(), Some(78), "{name} under systemd:\n{log}");
        assert!(log.contains(why), "{name} under systemd:\n{log}");
        assert!(!log.contains("stays down"), "{name} under systemd:\n{log}");
    }

    // The holder ran on throughout, and a requested stop stays 0 under launchd.
    assert_eq!(first.try_wait().unwrap(), None, "the holder was disturbed");
    term(&first);
    let status = wait_for(Duration::from_secs(25), "the holder to stop", || {
        first.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(0), "{}", holder.err_log());
    assert!(!holder.job.restarts_after_exit(code(status)));
}

//! `hermes-svc adopt` on a real systemd user manager, with the real Hermes 0.19.0 installed the
//! way its own docs say: its `.env` and `config.yaml` in its home, and the unit its installer
//! renders (`generate_systemd_unit()`, as `hermes gateway install` writes it), enabled and
//! running its own gateway against the mock platforms. After adopt the gateway holds the
//! token alone, Hermes runs as the agent with no platform credential, the access rules admit
//! whom Hermes admitted, and `--undo` puts everything back byte for byte. Profile names start
//! with `ad`.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use hermes_svc::mock_platform::telegram::TelegramConfig;
use hermes_svc::mock_platform::{MockConfig, MockPlatform};

use crate::doctor::{doctor, findings};
use crate::harness::{free_port, scratch_dir, stderr, stdout, unit, wait_for, Manager, TempDir};
use crate::hermes_rig::{config_yaml, lazy_packages, start_model, user_turns, venv, Proc};
use crate::mock_runtime::{mock_runtime, start_mock};

/// The one user Hermes's allow-list admits (a DM's chat id is its user's id on the mock).
const FRIEND: i64 = 1001;
const STRANGER: i64 = 2002;
/// A user Hermes approved by DM pairing.
const PAIRED: i64 = 3003;

/// A Hermes install on its own, as its docs leave it, under a manager of its own.
struct Install {
    m: Manager,
    profile: String,
    mock: MockPlatform,
    _rt: tokio::runtime::Runtime,
    _model: Proc,
    model_log: PathBuf,
    _locks: TempDir,
    relay_port: u16,
}

impl Install {
    fn new(profile: &str) -> Install {
        let rt = mock_runtime();
        let mock = start_mock(&rt, MockConfig::default());
        let m = Manager::boot();
        let model_log = m.dir.path().join("model.log");
        let (model, model_port) = start_model(&model_log);
        let locks = scratch_dir("ad-locks");
        // python-telegram-bot for Hermes's own Telegram adapter (scripts/hermes-venv).
        let out = m.systemctl(&[
            "set-environment",
            &format!("HERMES_LOCK_DIR={}", locks.path().display()),
            &format!("PYTHONPATH={}", lazy_packages().display()),
        ]);
        assert!(out.status.success(), "{out:?}");
        let home = m.profile_home(profile);
        fs::create_dir_all(&home).unwrap();
        let token = TelegramConfig::default().token;
        let env = format!(
            "# Hermes's own .env\nTELEGRAM_BOT_TOKEN={token}\nTELEGRAM_ALLOWED_USERS={FRIEND}\n\
             OPENAI_API_KEY=sk-fake-key-for-tests\nHERMES_GATEWAY_BUSY_ACK_ENABLED=false\n"
        );
        fs::write(home.join(".env"), env).unwrap();
        fs::set_permissions(home.join(".env"), fs::Permissions::from_mode(0o600)).unwrap();
        let config = format!(
            "{}platforms:\n  telegram:\n    extra:\n      base_url: {}/bot\n",
            config_yaml(model_port),
            mock.http_base()
        );
        fs::write(home.join("config.yaml"), config).unwrap();
        // Someone Hermes approved by pairing, not on the allow-list.
        fs::create_dir_all(home.join("platforms/pairing")).unwrap();
        fs::write(
            home.join("platforms/pairing/telegram-approved.json"),
            format!("{{\"{PAIRED}\": {{\"user_name\": \"pat\", \"approved_at\": 1765000000.5}}}}"),
        )
        .unwrap();
        fs::create_dir_all(home.join("memories")).unwrap();
        fs::write(home.join("memories/MEMORY.md"), "the user likes tea\n").unwrap();
        let install = Install {
            m,
            profile: profile.to_owned(),
            mock,
            _rt: rt,
            _model: Proc(model),
            model_log,
            _locks: locks,
            relay_port: free_port(),
        };
        install.install_hermes_unit();
        install
    }

    fn home(&self) -> PathBuf {
        self.m.profile_home(&self.profile)
    }

    fn hermes_unit(&self) -> String {
        match self.profile.as_str() {
            "default" => "hermes-gateway.service".to_owned(),
            name => format!("hermes-gateway-{name}.service"),
        }
    }

    /// The unit Hermes's installer renders for this home, written where it writes it, enabled
    /// and started, as `hermes gateway install` leaves it.
    fn install_hermes_unit(&self) {
        self.write_hermes_unit();
        let out = self.m.systemctl(&["enable", "--now", &self.hermes_unit()]);
        assert!(out.status.success(), "{out:?}");
        self.m.wait_active(&self.hermes_unit());
    }

    /// What `hermes gateway install` does to the unit file: render it and write it over
    /// whatever is there, then reload the manager.
    fn write_hermes_unit(&self) {
        let out = self
            .m
            .command(venv().join("bin/python").to_str().unwrap())
            .args([
                "-c",
                "from hermes_cli.gateway import generate_systemd_unit as g; print(g(), end='')",
            ])
            .env("HOME", self.m.home())
            .env("HERMES_HOME", self.home())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let unit_file = self.m.unit_dir().join(self.hermes_unit());
        fs::create_dir_all(self.m.unit_dir()).unwrap();
        fs::write(&unit_file, stdout(&out)).unwrap();
        assert!(self.m.systemctl(&["daemon-reload"]).status.success());
    }

    fn adopt(&self, extra: &[&str]) -> std::process::Output {
        self.adopt_with(extra, None)
    }

    /// `adopt`, killed with SIGKILL at `fault` (`HERMES_TEST_FAULT`) when one is given.
    fn adopt_with(&self, extra: &[&str], fault: Option<&str>) -> std::process::Output {
        let hermes = venv().join("bin/hermes");
        let port = self.relay_port.to_string();
        let mut args = vec![
            "adopt",
            "--profile",
            &self.profile,
            "--agent-exec",
            hermes.to_str().unwrap(),
            "--relay-port",
            &port,
        ];
        args.extend_from_slice(extra);
        let mut cmd = self.m.command(crate::harness::BIN);
        if let Some(fault) = fault {
            cmd.env("HERMES_TEST_FAULT", fault);
        }
        cmd.args(&args).output().unwrap()
    }

    fn adopt_ok(&self, extra: &[&str]) -> String {
        let out = self.adopt(extra);
        assert!(
            out.status.success(),
            "adopt {extra:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    }

    /// The files a person has in a Hermes install, with bytes and mode, and whether each file
    /// adopt adds exists: what `--dry-run` must leave and `--undo` must give back. (Hermes's
    /// runtime files change as it runs, and are not compared.)
    fn snapshot(&self) -> BTreeMap<PathBuf, Option<(Vec<u8>, u32)>> {
        let home = self.home();
        let units = self.m.unit_dir();
        let paths = [
            home.join(".env"),
            home.join("config.yaml"),
            home.join("memories/MEMORY.md"),
            home.join("gateway.toml"),
            home.join("access/pairing.json"),
            home.join("agent/hermes/.env"),
            home.join("agent/adopt/manifest.json"),
            units.join(self.hermes_unit()),
            units.join(format!("{}.d/50-hermes-svc.conf", self.hermes_unit())),
            units.join(format!("hermes-agent-{}.service", self.profile)),
        ];
        paths
            .into_iter()
            .map(|p| {
                let got = fs::read(&p)
                    .ok()
                    .map(|b| (b, fs::metadata(&p).unwrap().permissions().mode() & 0o7777));
                (p, got)
            })
            .collect()
    }

    /// That every file of [`Install::snapshot`] is as it was in `before`, byte for byte.
    fn assert_restored(&self, before: &BTreeMap<PathBuf, Option<(Vec<u8>, u32)>>) {
        let after = self.snapshot();
        let changed: Vec<_> = before
            .keys()
            .filter(|k| before.get(*k) != after.get(*k))
            .collect();
        assert!(changed.is_empty(), "not restored: {changed:#?}");
    }

    /// Wait until Hermes's own gateway polls the mock with the token.
    fn wait_hermes_polling(&self) {
        let from = self.mock.telegram_stats().polls;
        wait_for(
            Duration::from_secs(90),
            "Hermes's own gateway to poll",
            || (self.mock.telegram_stats().polls > from + 1).then_some(()),
        );
    }

    /// The user turns the model was given with the turn that ends in `text`, oldest first.
    fn history_of(&self, text: &str) -> Vec<String> {
        let log = fs::read_to_string(&self.model_log).unwrap_or_default();
        let call: serde_json::Value = log
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|c| c["kind"] == "chat" && c["last_user"].as_str() == Some(text))
            .unwrap_or_else(|| panic!("the model was never asked {text:?}"));
        user_turns(&call)
    }

    /// Doctor's errors about the profile.
    fn doctor_errors(&self) -> Vec<serde_json::Value> {
        let out = doctor(&self.m, &["--json", "--profile", &self.profile]);
        findings(&out)
            .into_iter()
            .filter(|f| f["severity"] == "error")
            .collect()
    }

    fn wait_answered(&self, text: &str) -> usize {
        let want = format!("echo: {text}");
        wait_for(
            Duration::from_secs(90),
            &format!("an answer to {text:?}"),
            || {
                let n = self
                    .mock
                    .posts()
                    .iter()
                    .filter(|p| p.content.contains(&want))
                    .count();
                (n > 0).then_some(n)
            },
        )
    }
}

#[test]
fn adopt_switches_a_running_hermes_to_the_gateway_and_undo_switches_back() {
    let h = Install::new("adone");
    let home = h.home();
    let before = h.snapshot();

    // Hermes's own gateway holds the token, and holds a conversation.
    h.wait_hermes_polling();
    h.mock
        .telegram_emit_text(FRIEND, "remember the word teapot");
    assert_eq!(h.wait_answered("remember the word teapot"), 1);

    // A dry run says what it would do, and does nothing.
    let plan = h.adopt_ok(&["--dry-run"]);
    assert!(plan.contains("telegram"), "{plan}");
    assert_eq!(h.snapshot(), before, "--dry-run changed nothing");
    assert_eq!(h.m.prop(&h.hermes_unit(), "ActiveState"), "active");

    let out = h.adopt_ok(&[]);
    assert!(out.contains("adopted"), "{out}");
    // A named profile's Hermes unit has our unit's name: it is ours now, Hermes's moved aside.
    let gateway = unit(&h.profile);
    assert_eq!(gateway, h.hermes_unit());
    h.m.wait_active(&gateway);
    let agent = format!("hermes-agent-{}.service", h.profile);
    h.m.wait_active(&agent);
    let text = fs::read_to_string(h.m.unit_dir().join(&gateway)).unwrap();
    assert!(text.contains("gateway run --profile adone"), "{text}");

    // The token is the gateway's alone: not in Hermes's new home, not in its environment.
    let token = TelegramConfig::default().token;
    let agent_home = home.join("agent/hermes");
    let hermes_env = fs::read_to_string(agent_home.join(".env")).unwrap();
    assert!(!hermes_env.contains(&token), "{hermes_env}");
    let hermes_config = fs::read_to_string(agent_home.join("config.yaml")).unwrap();
    assert!(!hermes_config.contains(&token), "{hermes_config}");
    assert!(hermes_env.contains("OPENAI_API_KEY=sk-fake-key-for-tests"));
    let environ = fs::read(format!("/proc/{}/environ", h.m.main_pid(&agent))).unwrap();
    assert!(
        !String::from_utf8_lossy(&environ).contains(&token),
        "the agent's environment holds no platform token"
    );
    assert_eq!(
        fs::read_to_string(agent_home.join("memories/MEMORY.md")).unwrap(),
        "the user likes tea\n",
        "Hermes's memory went with it"
    );

    // Whom Hermes admitted is admitted, once; a stranger is not.
    h.mock.telegram_emit_text(STRANGER, "hello from a stranger");
    h.mock.telegram_emit_text(FRIEND, "hello from a friend");
    h.mock
        .telegram_emit_text(PAIRED, "hello from a paired user");
    assert_eq!(h.wait_answered("hello from a friend"), 1);
    assert_eq!(h.wait_answered("hello from a paired user"), 1);
    // The conversation Hermes's own gateway held goes on: the model sees the earlier turn.
    let history = h.history_of("hello from a friend");
    assert!(
        history
            .iter()
            .any(|t| t.contains("remember the word teapot")),
        "{history:?}"
    );
    // The turn Hermes's own gateway answered is not answered again by ours.
    assert_eq!(h.wait_answered("remember the word teapot"), 1);
    assert!(
        !h.mock
            .posts()
            .iter()
            .any(|p| p.content.contains("echo: hello from a stranger")),
        "the stranger reached the agent"
    );

    // Run again: unchanged. Doctor: no error.
    let again = h.adopt_ok(&[]);
    assert!(again.contains("unchanged"), "{again}");
    let errors = h.doctor_errors();
    assert!(errors.is_empty(), "doctor after adopt: {errors:#?}");

    // Undo: every file as it was, byte for byte, and Hermes's own gateway running again.
    let out = h.adopt_ok(&["--undo"]);
    assert!(out.contains("undone"), "{out}");
    h.m.wait_active(&h.hermes_unit());
    h.assert_restored(&before);
    let text = fs::read_to_string(h.m.unit_dir().join(h.hermes_unit())).unwrap();
    assert!(
        text.contains("hermes_cli.main --profile adone gateway run"),
        "{text}"
    );
}

#[test]
fn an_adopt_killed_at_any_step_converges_when_run_again() {
    let h = Install::new("adkill");
    for point in [
        "kill:adopt:backed-up",
        "kill:adopt:stopped",
        "kill:adopt-moving:memories",
        "kill:adopt:moved",
        "kill:adopt:switched",
        "kill:adopt:installed",
    ] {
        let out = h.adopt_with(&[], Some(point));
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&out.status),
            Some(9),
            "{point}: the adopt was killed there:\nstdout: {}\nstderr: {}",
            stdout(&out),
            stderr(&out)
        );
    }
    let out = h.adopt_ok(&[]);
    assert!(out.contains("adopted"), "{out}");
    h.m.wait_active(&unit(&h.profile));
    h.m.wait_active(&format!("hermes-agent-{}.service", h.profile));
    assert_eq!(
        fs::read_to_string(h.home().join("agent/hermes/memories/MEMORY.md")).unwrap(),
        "the user likes tea\n"
    );
    h.mock.telegram_emit_text(FRIEND, "hello after the kills");
    assert_eq!(h.wait_answered("hello after the kills"), 1);
    let again = h.adopt_ok(&[]);
    assert!(again.contains("unchanged"), "{again}");
}

/// The default profile: Hermes's home is `~/.hermes` itself and its unit is
/// `hermes-gateway.service`, a sibling of ours rather than our unit's name.
#[test]
fn the_default_profile_is_adopted_beside_hermess_own_unit_name_and_given_back() {
    let h = Install::new("default");
    let before = h.snapshot();
    let hermes_file = h.m.unit_dir().join(h.hermes_unit());
    h.adopt_ok(&[]);
    let gateway = unit("default");
    assert_ne!(gateway, h.hermes_unit());
    h.m.wait_active(&gateway);
    assert_ne!(h.m.prop(&h.hermes_unit(), "ActiveState"), "active");
    assert!(!hermes_file.exists(), "Hermes's unit moved aside");
    assert!(
        h.home().join("profiles").exists() || !h.home().join("agent/hermes/profiles").exists(),
        "other profiles never move"
    );
    h.mock.telegram_emit_text(FRIEND, "hello default");
    assert_eq!(h.wait_answered("hello default"), 1);

    h.adopt_ok(&["--undo"]);
    h.m.wait_active(&h.hermes_unit());
    assert_ne!(h.m.prop(&gateway, "LoadState"), "loaded");
    h.assert_restored(&before);
}

/// `hermes gateway install` run again after an adopt rewrites our unit with Hermes's (a named
/// profile's units share a name): doctor says so, and install with --migrate puts ours back.
#[test]
fn doctor_catches_hermes_reinstalling_its_unit_over_ours_after_an_adopt() {
    let h = Install::new("adre");
    h.adopt_ok(&[]);
    h.m.wait_active(&unit(&h.profile));
    h.write_hermes_unit();
    let errors = h.doctor_errors();
    let hsv033: Vec<_> = errors.iter().filter(|f| f["id"] == "HSV033").collect();
    assert_eq!(
        hsv033.len(),
        1,
        "doctor missed Hermes's unit over ours: {errors:#?}"
    );
    assert_eq!(
        hsv033[0]["fix"],
        format!("hermes-svc install --profile {} --migrate", h.profile)
    );

    let hermes = venv().join("bin/hermes");
    h.m.hermes_ok(&[
        "install",
        "--profile",
        &h.profile,
        "--agent",
        "hermes",
        "--agent-exec",
        hermes.to_str().unwrap(),
        "--migrate",
    ]);
    let errors = h.doctor_errors();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// A Hermes gateway started by hand in the profile home (no unit): adopt cannot stop it, so it
/// refuses before anything of Hermes's moves, and goes on once it is stopped.
#[test]
fn a_hermes_gateway_run_by_hand_is_refused_until_it_is_stopped() {
    let h = Install::new("adhand");
    let out = h.m.systemctl(&["stop", &h.hermes_unit()]);
    assert!(out.status.success(), "{out:?}");
    let by_hand =
        h.m.command(venv().join("bin/python").to_str().unwrap())
            .args([
                "-m",
                "hermes_cli.main",
                "--profile",
                &h.profile,
                "gateway",
                "run",
            ])
            .env("HOME", h.m.home())
            .env("HERMES_HOME", h.home())
            .env("PYTHONPATH", lazy_packages())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
    let mut by_hand = Proc(by_hand);
    let pid = by_hand.id();
    wait_for(
        Duration::from_secs(60),
        "the hand-run Hermes's state",
        || {
            let text = fs::read_to_string(h.home().join("gateway_state.json")).ok()?;
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            (v["pid"] == pid).then_some(())
        },
    );
    let out = h.adopt(&[]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(&format!("pid {pid}")),
        "{}",
        stderr(&out)
    );
    assert!(
        h.home().join("memories/MEMORY.md").exists(),
        "nothing moved"
    );
    assert!(!h.home().join("gateway.toml").exists());

    crate::hermes_rig::stop(&mut by_hand);
    h.adopt_ok(&[]);
    h.m.wait_active(&unit(&h.profile));
}

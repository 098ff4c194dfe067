//! The real Hermes agent (hermes-agent 0.19.0 from PyPI, in the venv `scripts/hermes-venv`
//! makes) behind a real gateway process, with the mock platform on the other side and
//! `tests/hermes/fake_llm.py` as its model. Hermes is a client no one here wrote: what it does
//! on the wire is what the gateway must meet. Profile names start with `ha`.
//!
//! Two mocks: QQ Bot, Feishu, Telegram and Weixin on one, Discord on the other, since a QQ and a
//! Discord session on one mock both receive every dispatch.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hermes_svc::config::Secret;
use hermes_svc::mock_platform::weixin::WeixinConfig;
use hermes_svc::mock_platform::{FeishuConfig, MockConfig, MockPlatform, Post};
use hermes_svc::platform::weixin::WeixinLogin;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::harness::{scratch_dir, wait_for, TempDir, BIN};
use crate::mock_runtime::{mock_runtime, start_mock};

pub(crate) const TG_TOKEN: &str = "HA_TG_TOKEN";
pub(crate) const WX_PEER: &str = "hauser@im.wechat";

/// Access rules that admit every sender, in groups without a mention, with no budget: for the
/// tests of what the bridges do with a message, not of who may send one (tests/it/access.rs).
pub(crate) const OPEN: &str =
    "[access]\nallow-all = true\nrequire-mention = false\nbudget = \"off\"\n\n";

/// The venv with the pinned Hermes: `HERMES_VENV`, or `target/hermes-venv`.
pub(crate) fn venv() -> PathBuf {
    let venv = std::env::var_os("HERMES_VENV").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target/hermes-venv"),
        PathBuf::from,
    );
    assert!(
        venv.join("bin/hermes").exists(),
        "no Hermes agent at {}: run scripts/hermes-venv (scripts/test does)",
        venv.display()
    );
    venv
}

pub(crate) struct Rig {
    pub(crate) home: TempDir,
    pub(crate) profile: String,
    pub(crate) mock: MockPlatform,
    pub(crate) discord: MockPlatform,
    /// Runs the mocks; kept for as long as they serve.
    _rt: tokio::runtime::Runtime,
    model: Child,
    pub(crate) model_log: PathBuf,
}

impl Rig {
    /// A profile with adapters qq, dc, fs, tg and wx against the mocks, and `agent` as its
    /// `[agent]` section; the model is running.
    pub(crate) fn new(profile: &str, agent: &str) -> Rig {
        let rt = mock_runtime();
        let config = MockConfig {
            weixin: WeixinConfig {
                longpolling_timeout_ms: 1000,
                ..WeixinConfig::default()
            },
            ..MockConfig::default()
        };
        let mock = start_mock(&rt, config);
        let discord = start_mock(&rt, MockConfig::default());
        let home = scratch_dir(profile);
        let (base, dbase) = (mock.http_base(), discord.http_base());
        let app_id = 100_000 + u32::from(mock.addr().port());
        // Tests of the bridges admit everyone; tests of the access rules write their own.
        let access = if agent.contains("[access]") { "" } else { OPEN };
        let toml = format!(
            "[[adapter]]\nname = \"qq\"\nkind = \"qqbot\"\napp-id = \"{app_id}\"\n\
             secret-env = \"HA_QQ_SECRET\"\napi-base = \"{base}\"\n\
             token-url = \"{base}/app/getAppAccessToken\"\n\n\
             [[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"HA_DC_TOKEN\"\n\
             api-base = \"{dbase}\"\n\n\
             [[adapter]]\nname = \"fs\"\nkind = \"feishu\"\napp-id = \"{}\"\n\
             secret-env = \"HA_FS_SECRET\"\napi-base = \"{base}\"\n\n\
             [[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"{TG_TOKEN}\"\n\
             api-base = \"{base}\"\npoll-timeout = \"1s\"\npoll-grace = \"1s\"\n\n\
             [[adapter]]\nname = \"wx\"\nkind = \"weixin\"\napi-base = \"{base}\"\n\
             poll-timeout = \"1s\"\npoll-grace = \"1s\"\n\n{access}{agent}\n",
            FeishuConfig::default().app_id
        );
        let profile_home = home.path().join("profiles").join(profile);
        fs::create_dir_all(&profile_home).unwrap();
        fs::write(profile_home.join("gateway.toml"), toml).unwrap();
        WeixinLogin::new(
            Secret::new(WeixinConfig::default().token),
            base,
            "habot@im.bot".into(),
            WX_PEER.into(),
        )
        .write(&profile_home.join("weixin/wx.json"))
        .unwrap();
        let model_log = home.path().join("model.log");
        let model = start_model(&model_log);
        Rig {
            home,
            profile: profile.to_owned(),
            mock,
            discord,
            _rt: rt,
            model: model.0,
            model_log,
        }
        .with_model_port(model.1)
    }

    fn with_model_port(self, port: u16) -> Rig {
        fs::write(self.home.path().join("model.port"), port.to_string()).unwrap();
        self
    }

    pub(crate) fn model_port(&self) -> u16 {
        fs::read_to_string(self.home.path().join("model.port"))
            .unwrap()
            .parse()
            .unwrap()
    }

    pub(crate) fn profile_home(&self) -> PathBuf {
        self.home.path().join("profiles").join(&self.profile)
    }

    pub(crate) fn log(&self) -> String {
        fs::read_to_string(self.home.path().join("gateway.log")).unwrap_or_default()
    }

    pub(crate) fn hermes_log(&self) -> String {
        fs::read_to_string(self.home.path().join("hermes.log")).unwrap_or_default()
    }

    /// The model's requests, one JSON object each.
    pub(crate) fn model_calls(&self) -> Vec<serde_json::Value> {
        fs::read_to_string(&self.model_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The gateway in the foreground; its stderr goes to [`Rig::log`].
    pub(crate) fn gateway(&self) -> Proc {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.home.path().join("gateway.log"))
            .unwrap();
        Command::new(BIN)
            .args(["gateway", "run", "--profile", &self.profile])
            .env("HERMES_HOME", self.home.path())
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("HERMES_TEST_FAULT")
            .env("HA_QQ_SECRET", format!("qq-secret-{}", self.profile))
            .env("HA_DC_TOKEN", format!("dc-token-{}", self.profile))
            .env("HA_FS_SECRET", FeishuConfig::default().app_secret)
            .env(
                TG_TOKEN,
                hermes_svc::mock_platform::telegram::TelegramConfig::default().token,
            )
            .env("HA_API_KEY", API_KEY)
            .env("HERMES_LOCK_DIR", self.home.path().join("locks"))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map(Proc)
            .unwrap()
    }

    /// Wait until this life of the gateway has every adapter connected.
    pub(crate) fn wait_connected(&self, gw: &mut Child) {
        wait_for(Duration::from_secs(30), "every adapter to connect", || {
            assert!(
                gw.try_wait().unwrap().is_none(),
                "the gateway died:\n{}",
                self.log()
            );
            let text = fs::read_to_string(self.profile_home().join("state/gateway.json")).ok()?;
            let s: serde_json::Value = serde_json::from_str(&text).ok()?;
            let components = s["components"].as_array()?;
            let all = s["pid"] == gw.id()
                && ["qq", "dc", "fs", "tg", "wx"].iter().all(|name| {
                    components
                        .iter()
                        .any(|c| c["name"] == *name && c["state"] == "connected")
                });
            all.then_some(())
        });
    }

    /// Hermes's home: a config with the fake model and no tools.
    fn hermes_home(&self) -> PathBuf {
        let home = self.home.path().join("hermes-home");
        fs::create_dir_all(&home).unwrap();
        fs::write(home.join("config.yaml"), config_yaml(self.model_port())).unwrap();
        home
    }

    /// `hermes gateway run` headless, fronted by this profile's relay on `port`.
    pub(crate) fn hermes_relay(&self, port: u16) -> Proc {
        let secret = fs::read_to_string(self.profile_home().join("agent/relay-secret")).unwrap();
        self.hermes(&[
            ("GATEWAY_RELAY_URL", format!("http://127.0.0.1:{port}")),
            ("GATEWAY_RELAY_ID", format!("hermes-svc-{}", self.profile)),
            ("GATEWAY_RELAY_SECRET", secret.trim().to_owned()),
            ("RELAY_HOME_CHANNEL", "hermes-svc".to_owned()),
        ])
    }

    /// `hermes-svc agent run` for this profile (what the agent unit runs), in the foreground:
    /// Hermes in `PROFILE_HOME/agent/hermes`, with the environment the gateway's code makes.
    /// Its output goes to [`Rig::hermes_log`].
    pub(crate) fn agent_run(&self) -> Proc {
        let venv = venv();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.home.path().join("hermes.log"))
            .unwrap();
        let agent_home = self.profile_home().join("agent/hermes");
        let hermes = venv.join("bin/hermes");
        Command::new(BIN)
            .args(["agent", "run", "--profile", &self.profile, "--hermes"])
            .arg(&hermes)
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", venv.join("bin").display()),
            )
            .env("HOME", &agent_home)
            .env("HERMES_HOME", self.home.path())
            .env("LANG", "C.UTF-8")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .map(Proc)
            .unwrap()
    }

    /// `hermes gateway run` headless, serving its API on `port`.
    pub(crate) fn hermes_api(&self, port: u16) -> Proc {
        self.hermes(&[
            ("API_SERVER_ENABLED", "true".to_owned()),
            ("API_SERVER_KEY", API_KEY.to_owned()),
            ("API_SERVER_PORT", port.to_string()),
        ])
    }

    fn hermes(&self, env: &[(&str, String)]) -> Proc {
        let home = self.hermes_home();
        self.spawn_hermes(&home, env)
    }

    /// Hermes's own gateway, holding platforms itself as a Hermes install does before it is
    /// switched to hermes-svc (`hermes gateway run`, Hermes's own adapters): in the rig's Hermes
    /// home, whose `config.yaml` is the fake model's followed by `config_extra` (a platform's
    /// `platforms:` block, say), with `env` (a platform's token, its `*_ALLOW_ALL_USERS`) added
    /// to its environment. python-telegram-bot, which Hermes's Telegram adapter needs and its
    /// wheel leaves to a lazy install, comes from [`lazy_packages`]. Its log is
    /// [`Rig::hermes_log`]; it is in the same home the Relay's Hermes later runs in.
    pub(crate) fn hermes_own_gateway(&self, config_extra: &str, env: &[(&str, String)]) -> Proc {
        let home = self.hermes_home();
        let config = format!("{}{config_extra}", config_yaml(self.model_port()));
        fs::write(home.join("config.yaml"), config).unwrap();
        let mut env = env.to_vec();
        env.push(("PYTHONPATH", lazy_packages().display().to_string()));
        self.spawn_hermes(&home, &env)
    }

    /// Hermes's own Telegram adapter's Bot API base (`platforms.telegram.extra.base_url`,
    /// python-telegram-bot's base, to which it appends the token): the mock's.
    pub(crate) fn telegram_base_url(&self) -> String {
        format!("{}/bot", self.mock.http_base())
    }

    /// The rig's Hermes home, where [`Rig::hermes_relay`] and [`Rig::hermes_own_gateway`] run.
    pub(crate) fn hermes_home_dir(&self) -> PathBuf {
        self.home.path().join("hermes-home")
    }

    /// Wait until the Hermes gateway in `home` reports `platform` connected
    /// (`gateway_state.json`).
    pub(crate) fn wait_hermes_platform(&self, home: &Path, platform: &str, hermes: &mut Child) {
        wait_for(
            Duration::from_secs(90),
            "Hermes to connect its platform",
            || {
                assert!(
                    hermes.try_wait().unwrap().is_none(),
                    "Hermes died:\n{}",
                    tail(&self.hermes_log())
                );
                let text = fs::read_to_string(home.join("gateway_state.json")).ok()?;
                let s: serde_json::Value = serde_json::from_str(&text).ok()?;
                (s["platforms"][platform]["state"] == "connected").then_some(())
            },
        );
    }

    fn spawn_hermes(&self, home: &Path, env: &[(&str, String)]) -> Proc {
        let venv = venv();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.home.path().join("hermes.log"))
            .unwrap();
        let mut cmd = Command::new(venv.join("bin/hermes"));
        cmd.args(["gateway", "run", "--external-supervisor"])
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", venv.join("bin").display()),
            )
            .env("HOME", home)
            .env("HERMES_HOME", home)
            .env("LANG", "C.UTF-8")
            .env("HERMES_GATEWAY_BUSY_ACK_ENABLED", "false")
            .env("HERMES_GATEWAY_MAX_STARTS", "0")
            .env("HERMES_AUTO_CONTINUE_FRESHNESS", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Proc(cmd.spawn().unwrap())
    }

    /// Posts on the first mock (QQ, Feishu, Telegram, Weixin) and on Discord's.
    pub(crate) fn posts(&self) -> Vec<Post> {
        let mut all = self.mock.posts();
        all.extend(self.discord.posts());
        all
    }

    /// One line on what happened, for the first line of a failure (CI shows a failure's
    /// first lines and its last, and cuts the logs between).
    fn brief(&self) -> String {
        let asked: Vec<String> = self
            .model_calls()
            .iter()
            .filter(|c| c["kind"] == "chat")
            .filter_map(|c| c["last_user"].as_str().map(str::to_owned))
            .collect();
        let posted: Vec<String> = self.posts().into_iter().map(|p| p.content).collect();
        let log = self.log();
        let warned: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .collect();
        format!(
            "the model was last asked {:?}; last posts {:?}; gateway warnings: {:?}",
            &asked[asked.len().saturating_sub(4)..],
            &posted[posted.len().saturating_sub(4)..],
            &warned[warned.len().saturating_sub(3)..],
        )
    }

    /// Wait until a post whose text contains `text` is made, and return every such post.
    pub(crate) fn wait_post(&self, text: &str) -> Vec<Post> {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let p: Vec<Post> = self
                .posts()
                .into_iter()
                .filter(|p| p.content.contains(text))
                .collect();
            if !p.is_empty() {
                return p;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no post with {text:?} in 60 s; {}\n--- gateway:\n{}\n--- hermes:\n{}\n--- model:\n{}",
                self.brief(),
                tail(&self.log()),
                tail(&self.hermes_log()),
                tail(&fs::read_to_string(&self.model_log).unwrap_or_default()),
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = self.model.kill();
        let _ = self.model.wait();
    }
}

/// A directory holding python-telegram-bot 22.6 (the version Hermes 0.19.0 pins for its
/// Telegram adapter, `tools/lazy_deps.py`), for Hermes's own gateway: `HERMES_LAZY_PACKAGES`,
/// or `target/hermes-lazy`, installed there once with the venv's pip (`--no-deps`: its
/// dependencies, httpx among them, are Hermes's own).
pub(crate) fn lazy_packages() -> PathBuf {
    let dir = std::env::var_os("HERMES_LAZY_PACKAGES").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target/hermes-lazy"),
        PathBuf::from,
    );
    if dir.join("telegram/__init__.py").exists() {
        return dir;
    }
    // Installed beside, then renamed into place: two tests at once never see half of it.
    let part = dir.with_extension(format!("part-{}", std::process::id()));
    let ok = Command::new(venv().join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--no-deps", "--target"])
        .arg(&part)
        .args(["python-telegram-bot==22.6", "tornado==6.6.1"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "cannot install python-telegram-bot into {}",
        part.display()
    );
    if fs::rename(&part, &dir).is_err() {
        let _ = fs::remove_dir_all(&part);
    }
    assert!(
        dir.join("telegram/__init__.py").exists(),
        "{}",
        dir.display()
    );
    dir
}

/// The user messages the model was given in `call` (one line of the fake model's log), oldest
/// first: what it saw of the conversation so far.
pub(crate) fn user_turns(call: &serde_json::Value) -> Vec<String> {
    call["history"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .collect()
}

/// The last lines of a log.
pub(crate) fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(25)..].join("\n")
}

/// Hermes's config.yaml: the fake model on `model_port`, taken to see images (so Hermes passes
/// it the pixels, not a description) and to transcribe voice (its STT endpoint, transcripts not
/// echoed to the chat, never a lazy install of a local STT), no tools, no busy answers, no
/// delivery ledger (docs/agent.md says why each).
pub(crate) fn config_yaml(model_port: u16) -> String {
    format!(
        "model:\n  provider: custom\n  default: fake-model\n  base_url: http://127.0.0.1:{model_port}/v1\n\
         \x20 api_key: sk-fake-key-for-tests\n  context_length: 131072\n  supports_vision: true\n\
         platform_toolsets: {{relay: [], api_server: []}}\n\
         security: {{tirith_enabled: false, allow_lazy_installs: false}}\n\
         stt:\n  provider: openai\n  echo_transcripts: false\n  openai:\n    api_key: sk-fake-key-for-tests\n\
         \x20   base_url: http://127.0.0.1:{model_port}/v1\n    model: whisper-1\n\
         display: {{busy_ack_enabled: false}}\n\
         gateway:\n  delivery_ledger: false\n  api_server:\n    max_concurrent_runs: 2\n\
         onboarding:\n  profile_build: \"off\"\n  seen: {{profile_build_offered: true, busy_input_prompt: true}}\n"
    )
}

pub(crate) const API_KEY: &str = "ha-api-key-0123456789abcdef";

/// The fake model, on a port it picks; its request log goes to `log`.
pub(crate) fn start_model(log: &Path) -> (Child, u16) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hermes/fake_llm.py");
    let mut child = Command::new(venv().join("bin/python"))
        .arg(script)
        .arg("0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("PORT ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the fake model said {line:?}"));
    (child, port)
}

/// A child process killed when dropped, so a failing test leaves no gateway or Hermes behind.
pub(crate) struct Proc(pub(crate) Child);

impl std::ops::Deref for Proc {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Proc {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn signal(child: &mut Child, sig: Signal) {
    let _ = kill(Pid::from_raw(child.id() as i32), sig);
    if sig == Signal::SIGKILL {
        let _ = child.wait();
    }
}

/// Stop a Hermes: it exits 1 on SIGTERM.
pub(crate) fn stop(child: &mut Child) {
    signal(child, Signal::SIGTERM);
    let _ = wait_for(Duration::from_secs(20), "the process to stop", || {
        child.try_wait().unwrap()
    });
}

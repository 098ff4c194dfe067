//! A real gateway process with a Discord and a QQ Bot adapter pointed at the mock platform
//! in this test process, for the outbox's end-to-end tests: the process is started, killed
//! with SIGKILL and started again, and what reached the platform is read from the mock's
//! record of posts. Profile names start with `ob`.

use std::fs::{self, OpenOptions};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hermes_svc::api::client::{Client, ClientError};
use hermes_svc::api::wire::SendBody;
use hermes_svc::gateway::outbox::{Message, Policy};
use hermes_svc::mock_platform::{MockConfig, MockPlatform, Post};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::harness::{scratch_dir, wait_for, TempDir, BIN};
use crate::mock_runtime::{mock_runtime, start_mock};

pub(crate) struct Rig {
    pub(crate) home: TempDir,
    pub(crate) profile: String,
    pub(crate) mock: MockPlatform,
    pub(crate) rt: tokio::runtime::Runtime,
}

impl Rig {
    /// A profile with adapters `dc` (Discord) and `qq` (QQ Bot) against a fresh mock, and
    /// `extra` appended to its `gateway.toml` (`{base}` in it is the mock's HTTP base; the
    /// mock Feishu app's secret is in `OB_FS_SECRET`, for a feishu adapter of its own).
    pub(crate) fn new(profile: &str, extra: &str) -> Rig {
        Rig::with_mock(profile, extra, MockConfig::default())
    }

    /// [`Rig::new`] against a mock configured with `config`.
    pub(crate) fn with_mock(profile: &str, extra: &str, config: MockConfig) -> Rig {
        let rt = mock_runtime();
        let mock = start_mock(&rt, config);
        let home = scratch_dir(profile);
        let rig = Rig {
            home,
            profile: profile.to_owned(),
            mock,
            rt,
        };
        let base = rig.mock.http_base();
        // Credentials of its own: token locks are machine-wide, and rigs run side by side.
        let app_id = 100_000 + u32::from(rig.mock.addr().port());
        let toml = format!(
            "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"OB_DC_TOKEN\"\n\
             api-base = \"{base}\"\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n\n\
             [[adapter]]\nname = \"qq\"\nkind = \"qqbot\"\napp-id = \"{app_id}\"\n\
             secret-env = \"OB_QQ_SECRET\"\napi-base = \"{base}\"\n\
             token-url = \"{base}/app/getAppAccessToken\"\n\
             backoff-min = \"200ms\"\nbackoff-max = \"1s\"\n\n{}",
            extra.replace("{base}", &base)
        );
        fs::create_dir_all(rig.profile_home()).unwrap();
        fs::write(rig.profile_home().join("gateway.toml"), toml).unwrap();
        rig
    }

    pub(crate) fn profile_home(&self) -> PathBuf {
        self.home.path().join("profiles").join(&self.profile)
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.home.path().join("gateway.log")
    }

    pub(crate) fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// `hermes-svc` with this rig's `HERMES_HOME`.
    pub(crate) fn hermes(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env("HERMES_HOME", self.home.path())
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("HERMES_TEST_FAULT");
        cmd
    }

    /// Start the gateway in the foreground, with `faults` as `HERMES_TEST_FAULT`; its stderr
    /// is appended to [`Rig::log`].
    pub(crate) fn gateway(&self, faults: &str) -> Child {
        self.gateway_with(&[], faults)
    }

    /// [`Rig::gateway`] with these variables added too (an adapter's token).
    pub(crate) fn gateway_with(&self, env: &[(&str, &str)], faults: &str) -> Child {
        let mut env = env.to_vec();
        if !faults.is_empty() {
            env.push(("HERMES_TEST_FAULT", faults));
        }
        self.gateway_with_env(&env)
    }

    /// Start the gateway in the foreground with these variables added.
    pub(crate) fn gateway_with_env(&self, env: &[(&str, &str)]) -> Child {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let mut cmd = self.hermes();
        cmd.args(["gateway", "run", "--profile", &self.profile])
            .env("OB_DC_TOKEN", format!("dc-token-{}", self.profile))
            .env("OB_QQ_SECRET", format!("qq-secret-{}", self.profile))
            .env(
                "OB_FS_SECRET",
                hermes_svc::mock_platform::FeishuConfig::default().app_secret,
            )
            // Token locks of its own: they are machine-wide, and rigs run side by side.
            .env("HERMES_LOCK_DIR", self.home.path().join("locks"))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .envs(env.iter().copied());
        cmd.spawn().unwrap()
    }

    /// The state file, when the gateway has written one that parses.
    pub(crate) fn state(&self) -> Option<serde_json::Value> {
        let text = fs::read_to_string(self.profile_home().join("state/gateway.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Wait until `child`'s state file, written after this call began (an older one may
    /// predate the last submit), says the outbox holds nothing that is not final.
    pub(crate) fn wait_drained(&self, child: &Child, timeout: Duration) -> serde_json::Value {
        let since = std::time::SystemTime::now();
        wait_for(timeout, "the outbox to drain", || {
            let s = self.state()?;
            let written = humantime::parse_rfc3339(s["updated_at"].as_str()?).ok()?;
            (written > since && s["pid"] == child.id() && s["outbox"]["depth"] == 0).then_some(s)
        })
    }

    /// Adapter `adapter`'s stored events, as the spool's lines have them.
    pub(crate) fn events(&self, adapter: &str) -> Vec<serde_json::Value> {
        hermes_svc::gateway::spool::read(&self.profile_home().join("inbox"), None)
            .unwrap_or_default()
            .into_iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .filter(|e| e["adapter"] == adapter)
            .collect()
    }

    /// Adapter `adapter`'s stored event ids, in the spool's order.
    pub(crate) fn stored(&self, adapter: &str) -> Vec<String> {
        self.events(adapter)
            .into_iter()
            .map(|e| e["id"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    pub(crate) fn posts(&self) -> Vec<Post> {
        self.mock.posts()
    }

    pub(crate) fn client(&self) -> Client {
        Client::new(self.profile_home().join("state/api/agent.sock"))
    }

    /// Wait until this life's API answers (a killed life leaves its socket file behind,
    /// which the next one replaces when it binds); false if `child` died first.
    pub(crate) fn wait_api(&self, child: &mut Child) -> bool {
        let client = self.client();
        wait_for(Duration::from_secs(20), "the agent API to answer", || {
            if child.try_wait().unwrap().is_some() {
                return Some(false);
            }
            self.rt
                .block_on(client.message("m-none"))
                .ok()
                .map(|_| true)
        })
    }

    /// Wait until this life of the gateway (`child`) has `adapter` connected: the mock sends a
    /// dispatch only to the sessions it has, so one emitted sooner is never delivered.
    pub(crate) fn wait_adapter(&self, child: &Child, adapter: &str) {
        wait_for(
            Duration::from_secs(30),
            &format!("the {adapter} adapter to connect"),
            || {
                let s = self.state()?;
                let connected = s["pid"] == child.id()
                    && s["components"]
                        .as_array()?
                        .iter()
                        .any(|c| c["name"] == adapter && c["state"] == "connected");
                connected.then_some(())
            },
        );
    }

    /// Submit through the API; the answer, or why there was none.
    pub(crate) fn submit(
        &self,
        key: &str,
        target: (&str, &str),
        text: &str,
        reply_to: Option<&str>,
        policy: Policy,
    ) -> Result<Message, ClientError> {
        let body = SendBody {
            adapter: target.0.to_owned(),
            target: target.1.to_owned(),
            text: text.to_owned(),
            reply_to: reply_to.map(str::to_owned),
            idempotency_key: key.to_owned(),
            policy: Some(policy),
            attachments: vec![],
        };
        self.rt
            .block_on(self.client().submit(&body))
            .map(|s| s.message)
    }

    /// Every message by idempotency key's text, as the API reports it.
    pub(crate) fn message(&self, id: &str) -> Message {
        self.rt
            .block_on(self.client().message(id))
            .unwrap()
            .unwrap_or_else(|| panic!("message {id} known"))
    }
}

pub(crate) fn sigkill(child: &mut Child) {
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
    let _ = child.wait();
}

pub(crate) fn sigterm(child: &mut Child) {
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    let status = wait_for(Duration::from_secs(30), "the gateway to stop", || {
        child.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(0), "a clean stop");
}

/// Wait for `child` to die of SIGKILL (a test fault's kill), within `timeout`.
pub(crate) fn killed_by_fault(child: &mut Child, timeout: Duration) {
    use std::os::unix::process::ExitStatusExt;
    let status = wait_for(timeout, "the gateway to kill itself at the fault", || {
        child.try_wait().unwrap()
    });
    assert_eq!(
        status.signal(),
        Some(9),
        "killed by the fault, not {status:?}"
    );
}

//! A profile with one adapter against the hostile server (`hostile_server.rs`), and its
//! gateway: what the hostile-platform tests and a platform's own tests share.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hermes_svc::gateway::spool;
use serde_json::Value;

use crate::harness::{scratch_dir, wait_for, TempDir, BIN};
use crate::hostile_server::HostileServer;

pub(crate) const TOKEN: &str = "424242:hostile-test-token";

/// A profile with one adapter against the hostile server, and its gateway.
pub(crate) struct Rig {
    pub(crate) home: TempDir,
    pub(crate) profile: String,
    pub(crate) server: HostileServer,
}

impl Rig {
    /// `adapter` is the `[[adapter]]` body; `{base}` in it is the server's base URL.
    pub(crate) fn new(profile: &str, adapter: &str) -> Rig {
        let server = HostileServer::start();
        let rig = Rig {
            home: scratch_dir(profile),
            profile: profile.to_owned(),
            server,
        };
        fs::create_dir_all(rig.profile_home()).unwrap();
        let toml = format!(
            "[[adapter]]\n{}\nbackoff-min = \"200ms\"\nbackoff-max = \"1s\"\n",
            adapter.replace("{base}", &rig.server.base())
        );
        fs::write(rig.profile_home().join("gateway.toml"), toml).unwrap();
        rig
    }

    pub(crate) fn profile_home(&self) -> PathBuf {
        self.home.path().join("profiles").join(&self.profile)
    }

    pub(crate) fn log(&self) -> String {
        fs::read_to_string(self.home.path().join("gateway.log")).unwrap_or_default()
    }

    pub(crate) fn gateway(&self, faults: &str) -> Child {
        let log = fs::File::create(self.home.path().join("gateway.log")).unwrap();
        Command::new(BIN)
            .args(["gateway", "run", "--profile", &self.profile])
            .env("HERMES_HOME", self.home.path())
            .env("HERMES_LOCK_DIR", self.home.path().join("locks"))
            .env("HP_TOKEN", TOKEN)
            .env("HERMES_TEST_FAULT", faults)
            .env("RUST_LOG", "info")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    /// The state file's component `name`, once it passes `want`.
    pub(crate) fn component(&self, name: &str, want: impl Fn(&Value) -> bool) -> Value {
        let path = self.profile_home().join("state/gateway.json");
        wait_for(Duration::from_secs(20), "the adapter's state", || {
            let state: Value = serde_json::from_str(&fs::read_to_string(&path).ok()?).ok()?;
            let c = state["components"]
                .as_array()?
                .iter()
                .find(|c| c["name"] == name)?
                .clone();
            want(&c).then_some(c)
        })
    }

    pub(crate) fn events(&self) -> Vec<spool::Event> {
        spool::read(&self.profile_home().join("inbox"), None).unwrap_or_default()
    }
}

pub(crate) struct Running(pub(crate) Child);

impl Drop for Running {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

pub(crate) fn telegram(profile: &str) -> Rig {
    Rig::new(
        profile,
        "name = \"tg\"\nkind = \"telegram\"\ntoken-env = \"HP_TOKEN\"\napi-base = \"{base}\"\n\
         poll-timeout = \"1s\"\npoll-grace = \"1s\"",
    )
}

pub(crate) fn matrix(profile: &str) -> Rig {
    Rig::new(
        profile,
        "name = \"mx\"\nkind = \"matrix\"\nhomeserver = \"{base}\"\nuser-id = \"@bot:hs\"\n\
         token-env = \"HP_TOKEN\"\npoll-timeout = \"1s\"\npoll-grace = \"1s\"",
    )
}

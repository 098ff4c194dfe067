//! A builder for the setup the gateway-under-systemd tests share: a profile with this config
//! and `.env`, installed under a real, isolated user manager (harness.rs) with a lock directory
//! of its own and its gateway's output captured, after just's `Test` builder, so that a test
//! states only what is particular to it.
//!
//! ```ignore
//! let t = ProfileTest::new("gsfrozen")
//!     .config(&toml)
//!     .env("GS_TOKEN=gs-frozen-token\n")
//!     .install_args(&["--watchdog-sec", "2"])
//!     .run();
//! ```

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

use crate::harness::{scratch_dir, stderr, stdout, unit, Manager, TempDir};

/// A profile to be: its name, its `gateway.toml`, its `.env` and what `install` is told.
pub struct ProfileTest {
    name: String,
    config: String,
    env: String,
    install_args: Vec<String>,
}

impl ProfileTest {
    /// Units of every test share the cgroup tree, so `name` must be unique across the suite
    /// (each test file uses a prefix of its own).
    pub fn new(name: &str) -> ProfileTest {
        ProfileTest {
            name: name.to_owned(),
            config: String::new(),
            env: String::new(),
            install_args: vec![],
        }
    }

    /// The profile's `gateway.toml`.
    pub fn config(mut self, gateway_toml: &str) -> ProfileTest {
        self.config = gateway_toml.to_owned();
        self
    }

    /// The profile's `.env` (written with mode 0600, as a person keeping secrets would).
    pub fn env(mut self, env: &str) -> ProfileTest {
        self.env = env.to_owned();
        self
    }

    /// Arguments for `install` after `--profile` and the lock directory.
    pub fn install_args(mut self, args: &[&str]) -> ProfileTest {
        self.install_args = args.iter().map(|a| (*a).to_owned()).collect();
        self
    }

    /// Boot a manager of its own, then write, install and start the profile in it. Returns
    /// once the unit is active.
    pub fn run(self) -> Running {
        let m = Manager::boot();
        let locks = scratch_dir(&format!("{}-locks", self.name));
        let profile = self.write(&m);
        let installed_at = Instant::now();
        profile.install_ok(&m, locks.path());
        let pid = m.wait_active(&profile.unit);
        Running {
            m,
            locks,
            profile,
            installed_at,
            pid,
        }
    }

    /// Write the profile's files in `m`, as a person would before installing, and capture its
    /// gateway's output; install nothing yet.
    pub fn write(self, m: &Manager) -> Profile {
        let home = m.profile_home(&self.name);
        fs::create_dir_all(&home).unwrap();
        fs::write(home.join("gateway.toml"), &self.config).unwrap();
        let env_file = home.join(".env");
        fs::write(&env_file, &self.env).unwrap();
        fs::set_permissions(&env_file, fs::Permissions::from_mode(0o600)).unwrap();
        let unit = unit(&self.name);
        let log = m.capture_logs(&unit);
        Profile {
            name: self.name,
            unit,
            home,
            log,
            install_args: self.install_args,
        }
    }
}

/// A profile whose files are written in a manager.
pub struct Profile {
    pub name: String,
    pub unit: String,
    pub home: PathBuf,
    /// Where the gateway's stdout goes.
    pub log: PathBuf,
    install_args: Vec<String>,
}

impl Profile {
    /// `hermes-svc install --profile P --env HERMES_LOCK_DIR=<locks> <install args>...`.
    pub fn install(&self, m: &Manager, locks: &Path) -> Output {
        let lock_env = format!("HERMES_LOCK_DIR={}", locks.display());
        let mut args = vec!["install", "--profile", &self.name, "--env", &lock_env];
        args.extend(self.install_args.iter().map(String::as_str));
        m.hermes(&args)
    }

    pub fn install_ok(&self, m: &Manager, locks: &Path) {
        let out = self.install(m, locks);
        assert!(
            out.status.success(),
            "install {} failed ({}):\nstdout: {}\nstderr: {}",
            self.name,
            out.status,
            stdout(&out),
            stderr(&out)
        );
    }
}

/// A profile installed and active under a manager of its own.
pub struct Running {
    /// First, so that the manager (and the gateway under it) is gone before its lock directory.
    pub m: Manager,
    pub locks: TempDir,
    pub profile: Profile,
    /// Just before `install` ran.
    pub installed_at: Instant,
    /// The gateway's PID once the unit was first active.
    pub pid: u32,
}

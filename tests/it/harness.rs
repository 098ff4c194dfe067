//! A real, isolated `systemd --user` manager with its own D-Bus session bus, per test.
//!
//! The manager runs in a private mount namespace (where `/run/systemd/system` can exist
//! without touching the host), so it believes it is on a systemd-booted machine. Tests talk to
//! it exactly as a person would: through `hermes-svc`, `systemctl --user` and `busctl --user`.
//! Nothing about systemd is mocked. When no manager can boot, tests fail: they never skip.

// The benches include this file with `#[path]` and use only the manager, not the helpers.
#![allow(dead_code)]

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_hermes-svc");

pub use tempfile::TempDir;

/// A fresh directory under the system temp dir, removed on drop. Named `hsv-<tag>-…` so that a
/// leftover of a killed run says which test made it. Its mode is what `create_dir_all` would
/// give (0777 less the umask), not tempfile's 0700: units that systemd starts, sandboxed ones
/// included, read files in it.
pub fn scratch_dir(tag: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("hsv-{tag}-"))
        .permissions(std::fs::Permissions::from_mode(0o777))
        .tempdir()
        .expect("a scratch directory under the system temp dir")
}

/// The unit that serves `profile`, spelled out here rather than asked of the code under test.
pub fn unit(profile: &str) -> String {
    format!("hermes-gateway-{profile}.service")
}

/// A loopback port free at the moment of asking, for a server the test starts next.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Poll `f` until it returns `Some`, or panic with `what` after `timeout`.
pub fn wait_for<T>(timeout: Duration, what: &str, f: impl FnMut() -> Option<T>) -> T {
    try_wait_for(timeout, f)
        .unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// Poll `f` until it returns `Some`; `None` after `timeout`, for a caller that says more
/// about what it waited for than [`wait_for`] can.
pub fn try_wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub struct Manager {
    pub dir: TempDir,
    child: Child,
    cgroup: String,
}

impl Manager {
    /// Boot a manager and wait until its bus answers.
    pub fn boot() -> Manager {
        Self::boot_in(scratch_dir("mgr"))
    }

    /// Boot a manager whose bus daemon also reads a policy file the test can change later
    /// with [`Manager::set_bus_policy`] (it starts empty: the stock session policy).
    pub fn boot_with_bus_policy() -> Manager {
        let dir = scratch_dir("mgr");
        let d = dir.path();
        let dropin = d.join("config/systemd/user/dbus.service.d");
        std::fs::create_dir_all(&dropin).unwrap();
        std::fs::write(d.join("bus-policy.conf"), busconfig("")).unwrap();
        std::fs::write(
            d.join("bus.conf"),
            busconfig(&format!(
                "<include>/usr/share/dbus-1/session.conf</include>\n\
                 <include>{}</include>",
                d.join("bus-policy.conf").display()
            )),
        )
        .unwrap();
        std::fs::write(
            dropin.join("10-policy.conf"),
            format!(
                "[Service]\nExecStart=\nExecStart=/usr/bin/dbus-daemon --config-file={} \
                 --address=systemd: --nofork --nopidfile --systemd-activation --syslog-only\n",
                d.join("bus.conf").display()
            ),
        )
        .unwrap();
        Self::boot_in(dir)
    }

    /// Replace the extra bus policy with `policy` (`<policy>` elements) and make the bus
    /// daemon load it before returning: `ReloadConfig` answers only once it has.
    pub fn set_bus_policy(&self, policy: &str) {
        let file = self.dir.path().join("bus-policy.conf");
        assert!(
            file.exists(),
            "boot with Manager::boot_with_bus_policy first"
        );
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, busconfig(policy)).unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        let out = self.call_bus_daemon("ReloadConfig");
        assert!(out.status.success(), "ReloadConfig: {out:?}");
    }

    /// `method` of the bus daemon itself (no arguments), called with `busctl`.
    pub fn call_bus_daemon(&self, method: &str) -> std::process::Output {
        self.command("busctl")
            .args([
                "--user",
                "call",
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                method,
            ])
            .output()
            .unwrap()
    }

    fn boot_in(dir: TempDir) -> Manager {
        let d = dir.path();
        for sub in ["xdg", "config/systemd/user", "home"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        std::fs::set_permissions(d.join("xdg"), std::fs::Permissions::from_mode(0o700)).unwrap();
        let inner = d.join("inner.sh");
        // Each manager gets a cgroup of its own (in every hierarchy that exists), so that two
        // managers never think the same cgroup is theirs: otherwise stopping one manager's
        // dbus.service or unit kills another's of the same name.
        let cgroup = format!("hsv-{}", d.file_name().unwrap().to_string_lossy());
        // A service's credentials are mounted in a namespace of its own and moved into
        // `xdg/credentials/UNIT`, which the manager sees only if that mount is shared: shared
        // inside this private namespace, so the host is untouched.
        let xdg = d.join("xdg").display().to_string();
        std::fs::write(
            &inner,
            format!(
                "#!/bin/bash\n\
                 for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do\n\
                   if [ -e \"$h/cgroup.procs\" ]; then mkdir -p \"$h/{cgroup}\" && echo $$ > \"$h/{cgroup}/cgroup.procs\"; fi\n\
                 done\n\
                 mount -t tmpfs tmpfs /run/systemd && mkdir -p /run/systemd/system || exit 97\n\
                 mount --bind '{xdg}' '{xdg}' && mount --make-shared '{xdg}' || exit 96\n\
                 exec /lib/systemd/systemd --user\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = std::fs::File::create(d.join("manager.log")).unwrap();
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private"])
            .arg(&inner)
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        for (k, v) in env_for(d) {
            cmd.env(k, v);
        }
        // SAFETY: setsid is async-signal-safe; the manager gets its own session so that a
        // terminal's signals never reach it.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .expect("failed to spawn unshare (is util-linux installed?)");
        let mut m = Manager { dir, child, cgroup };
        let private = m.dir.path().join("xdg/systemd/private");
        let bus = m.dir.path().join("xdg/bus");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !(private.exists() && bus.exists()) {
            if let Ok(Some(status)) = m.child.try_wait() {
                panic!(
                    "systemd --user exited early ({status}); log:\n{}",
                    std::fs::read_to_string(m.dir.path().join("manager.log")).unwrap_or_default()
                );
            }
            if Instant::now() > deadline {
                panic!("systemd --user did not come up within 20 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        wait_for(
            Duration::from_secs(20),
            "the manager to answer on its bus",
            || {
                m.systemctl(&["show", "-p", "Version", "--value"])
                    .status
                    .success()
                    .then_some(())
            },
        );
        m
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    pub fn hermes_home(&self) -> PathBuf {
        self.home().join(".hermes")
    }
    pub fn unit_dir(&self) -> PathBuf {
        self.dir.path().join("config/systemd/user")
    }
    pub fn profile_home(&self, profile: &str) -> PathBuf {
        if profile == "default" {
            self.hermes_home()
        } else {
            self.hermes_home().join("profiles").join(profile)
        }
    }

    pub fn env(&self) -> Vec<(String, String)> {
        env_for(self.dir.path())
    }

    /// A command with this manager's environment (and nothing of the host's session).
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_remove("HERMES_HOME")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .stdin(Stdio::null());
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        cmd
    }

    pub fn hermes(&self, args: &[&str]) -> Output {
        self.command(BIN).args(args).output().unwrap()
    }

    /// Run hermes-svc and require success; returns stdout.
    pub fn hermes_ok(&self, args: &[&str]) -> String {
        let out = self.hermes(args);
        assert!(
            out.status.success(),
            "hermes-svc {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn systemctl(&self, args: &[&str]) -> Output {
        self.command("systemctl")
            .arg("--user")
            .args(args)
            .output()
            .unwrap()
    }

    /// The units matching `pattern` that the manager holds loaded right now (its
    /// `ListUnitsByPatterns`, through `systemctl list-units --all`), sorted.
    pub fn loaded_units(&self, pattern: &str) -> Vec<String> {
        let out = self.systemctl(&["list-units", "--all", "--plain", "--no-legend", pattern]);
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect();
        names.sort();
        names
    }

    /// `daemon-reload`, then wait until the manager holds no unit matching `pattern`: what a
    /// disabled profile's unit looks like to it (it drops an unreferenced inactive unit).
    pub fn reload_until_unloaded(&self, pattern: &str) {
        assert!(self.systemctl(&["daemon-reload"]).status.success());
        wait_for(
            Duration::from_secs(30),
            "the manager to drop the units",
            || self.loaded_units(pattern).is_empty().then_some(()),
        );
    }

    /// Enable `units` by linking them into `default.target.wants/`, as `enable` does, and
    /// reload, so the manager loads them (not started); returns the wants directory.
    pub fn load_by_enabling(&self, units: &[String]) -> PathBuf {
        let wants = self.unit_dir().join("default.target.wants");
        std::fs::create_dir_all(&wants).unwrap();
        for u in units {
            std::os::unix::fs::symlink(self.unit_dir().join(u), wants.join(u)).unwrap();
        }
        assert!(self.systemctl(&["daemon-reload"]).status.success());
        wants
    }

    /// Unit properties as `systemctl --user show` prints them.
    pub fn show(&self, unit: &str) -> HashMap<String, String> {
        let out = self.systemctl(&["show", unit]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    pub fn prop(&self, unit: &str, name: &str) -> String {
        self.show(unit).remove(name).unwrap_or_default()
    }

    /// A property read straight off the bus by an independent client (busctl), as JSON.
    pub fn bus_property(&self, unit: &str, interface: &str, name: &str) -> serde_json::Value {
        let path = hermes_svc::systemd::unit_object_path(unit);
        let out = self
            .command("busctl")
            .args([
                "--user",
                "--json=short",
                "get-property",
                "org.freedesktop.systemd1",
            ])
            .args([path.as_str(), interface, name])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "busctl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["data"].clone()
    }

    pub fn main_pid(&self, unit: &str) -> u32 {
        self.prop(unit, "MainPID").parse().unwrap_or(0)
    }

    pub fn wait_active(&self, unit: &str) -> u32 {
        wait_for(Duration::from_secs(30), &format!("{unit} active"), || {
            let p = self.show(unit);
            (p.get("ActiveState").map(String::as_str) == Some("active"))
                .then(|| p.get("MainPID").and_then(|v| v.parse().ok()))
                .flatten()
                .filter(|pid: &u32| *pid != 0)
        })
    }

    /// Write, enable and start the field's legacy unit `name`: `gateway run --replace` with no
    /// `--profile`, on `hermes_home`, backed by a harmless sleep. Returns its file.
    pub fn start_legacy_unit(&self, name: &str, hermes_home: &Path) -> PathBuf {
        let path = self.unit_dir().join(name);
        std::fs::write(
            &path,
            format!(
                "[Service]\nEnvironment=HERMES_HOME={}\nExecStart=/bin/sh -c \"exec sleep 600\" hermes gateway run --replace\n\n[Install]\nWantedBy=default.target\n",
                hermes_home.display()
            ),
        )
        .unwrap();
        assert!(self.systemctl(&["daemon-reload"]).status.success());
        assert!(self.systemctl(&["enable", "--now", name]).status.success());
        path
    }

    /// Send the gateway's stdout and stderr to a file in the profile's test dir.
    pub fn capture_logs(&self, unit: &str) -> PathBuf {
        let dir = self.unit_dir().join(format!("{unit}.d"));
        std::fs::create_dir_all(&dir).unwrap();
        let log = self.dir.path().join(format!("{unit}.log"));
        std::fs::write(
            dir.join("90-test-log.conf"),
            format!(
                "[Service]\nStandardOutput=append:{}\nStandardError=inherit\n",
                log.display()
            ),
        )
        .unwrap();
        log
    }
}

/// A D-Bus configuration document holding `body`.
fn busconfig(body: &str) -> String {
    format!(
        "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n \
         \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n\
         <busconfig>\n{body}\n</busconfig>\n"
    )
}

fn env_for(d: &Path) -> Vec<(String, String)> {
    let p = |s: &str| d.join(s).display().to_string();
    vec![
        ("XDG_RUNTIME_DIR".into(), p("xdg")),
        (
            "DBUS_SESSION_BUS_ADDRESS".into(),
            format!("unix:path={}", p("xdg/bus")),
        ),
        ("XDG_CONFIG_HOME".into(), p("config")),
        ("HOME".into(), p("home")),
    ]
}

impl Drop for Manager {
    fn drop(&mut self) {
        // Stop our units first so no gateway outlives its manager, then end the manager.
        let _ = self.systemctl(&["stop", "hermes-gateway*", "hermes.service"]);
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut exited = false;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                exited = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if !exited {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        for h in [
            "/sys/fs/cgroup/systemd",
            "/sys/fs/cgroup/unified",
            "/sys/fs/cgroup",
        ] {
            let dir = Path::new(h).join(&self.cgroup);
            if dir.exists() {
                remove_cgroup(&dir);
            }
        }
    }
}

/// Remove a cgroup tree, leaves first (cgroup directories can only be removed empty).
pub fn remove_cgroup(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Output helpers.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

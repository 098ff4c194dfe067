//! A real systemd system manager, with journald and a system bus, in a booted container on a
//! throwaway overlay of this machine's own root, for what the user manager (harness.rs)
//! lacks: the journal and the system scope.
//!
//! `systemd-nspawn -b` boots `/lib/systemd/systemd` as the container's PID 1, with
//! `systemd.unit=basic.target` so that the services this image happens to enable stay off.
//! The container shares the host's network namespace, so a mock platform on 127.0.0.1 in the
//! test process is reachable from it. Files go in through the overlay (`root()`), which
//! writes to its upper layer only, and commands run inside with `nsenter` into the PID 1's
//! namespaces. It is powered off from inside on drop: killing nspawn with a signal would leave
//! the container's systemd running, orphaned. When it cannot boot, the test fails.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::harness::{remove_cgroup, scratch_dir, stderr, stdout, wait_for, TempDir, BIN};

/// How long a boot may take; about 2 s on an idle machine, more beside a build.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the container finds the hermes-svc under test.
pub const CONTAINER_BIN: &str = "/usr/local/bin/hermes-svc";

/// The cgroup hierarchies a container's cgroup is made in, where they exist.
const CGROUP_ROOTS: [&str; 3] = [
    "/sys/fs/cgroup/systemd",
    "/sys/fs/cgroup/unified",
    "/sys/fs/cgroup",
];

pub struct SystemManager {
    /// Holds `up/`, `work/` and the overlay's mount point `root/`; removed after the unmount.
    dir: TempDir,
    nspawn: Child,
    /// The container's PID 1, as the host sees it.
    leader: u32,
    pub machine: String,
    /// The cgroup nspawn starts in (`hsv-MACHINE`, in every hierarchy), removed on drop.
    cgroup: String,
}

impl SystemManager {
    /// One container for the tests that run at the same time: the first caller boots it, and
    /// it powers off when the last one drops its handle.
    pub fn shared() -> Arc<SystemManager> {
        static SHARED: Mutex<Weak<SystemManager>> = Mutex::new(Weak::new());
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sm) = shared.upgrade() {
            return sm;
        }
        let sm = Arc::new(SystemManager::boot());
        *shared = Arc::downgrade(&sm);
        sm
    }

    /// Mount an overlay of `/`, boot it, and wait until the manager says `running`; the
    /// freshly built hermes-svc is then at [`CONTAINER_BIN`] inside.
    pub fn boot() -> SystemManager {
        static N: AtomicU32 = AtomicU32::new(0);
        let machine = format!(
            "hsv-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let dir = scratch_dir("sysmgr");
        let d = dir.path();
        for sub in ["up", "work", "root"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let status = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o"])
            .arg(format!(
                "lowerdir=/,upperdir={},workdir={}",
                d.join("up").display(),
                d.join("work").display()
            ))
            .arg(d.join("root"))
            .status()
            .expect("mount runs");
        assert!(status.success(), "mounting an overlay of / failed");
        let console = std::fs::File::create(d.join("console.log")).unwrap();
        // nspawn puts the container's cgroups (`payload/`, `supervisor/`) under its own, and
        // two containers in one cgroup would manage each other's units: so it starts in a
        // cgroup of its own, as each user manager does (harness.rs).
        let cgroup = format!("hsv-{machine}");
        let roots = CGROUP_ROOTS.join(" ");
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(format!(
                "for h in {roots}; do\n\
                   if [ -e \"$h/cgroup.procs\" ]; then mkdir -p \"$h/{cgroup}\" && echo $$ > \"$h/{cgroup}/cgroup.procs\" || exit 95; fi\n\
                 done\n\
                 exec systemd-nspawn \"$@\""
            ))
            .arg("sh")
            .arg("-D")
            .arg(d.join("root"))
            .args(["-b", "--register=no", "--keep-unit", "-q"])
            .arg(format!("--machine={machine}"))
            .arg("systemd.unit=basic.target")
            .stdin(Stdio::null())
            .stdout(console.try_clone().unwrap())
            .stderr(console);
        // SAFETY: setsid is async-signal-safe; the container gets a session of its own so
        // that a terminal's signals never reach it.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                Ok(())
            });
        }
        let nspawn = cmd
            .spawn()
            .expect("failed to spawn systemd-nspawn (is systemd-container installed?)");
        let mut sm = SystemManager {
            dir,
            nspawn,
            leader: 0,
            machine,
            cgroup,
        };
        let deadline = Instant::now() + BOOT_TIMEOUT;
        loop {
            if let Ok(Some(status)) = sm.nspawn.try_wait() {
                panic!(
                    "systemd-nspawn exited early ({status}); console:\n{}",
                    sm.console()
                );
            }
            if sm.leader == 0 {
                sm.leader = child_named(sm.nspawn.id(), "systemd").unwrap_or(0);
            }
            if sm.leader != 0 {
                let state = sm.run(&["systemctl", "is-system-running"]);
                if matches!(stdout(&state).trim(), "running" | "degraded") {
                    break;
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "the container did not boot within {BOOT_TIMEOUT:?}; console:\n{}",
                    sm.console()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Through the overlay: the copy lands in its upper layer, never in the host's /usr.
        let bin = sm.root().join(CONTAINER_BIN.trim_start_matches('/'));
        std::fs::copy(BIN, &bin).expect("copy hermes-svc into the container");
        sm
    }

    /// The container's `/`, seen from the host (writes go to the overlay's upper layer).
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// `program` inside the container, in all of its PID 1's namespaces.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &self.leader.to_string(), "-a", "--", program])
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            );
        cmd
    }

    /// Run `argv` inside the container and collect its output.
    pub fn run(&self, argv: &[&str]) -> Output {
        self.command(argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .output()
            .expect("nsenter runs")
    }

    /// As `run`, and fail the test unless it exits 0; returns its stdout.
    pub fn run_ok(&self, argv: &[&str]) -> String {
        let out = self.run(argv);
        assert!(
            out.status.success(),
            "{argv:?} in {} failed ({}):\nstdout: {}\nstderr: {}",
            self.machine,
            out.status,
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    }

    /// Write `contents` at `path` inside the container, owned by `user` with `mode`.
    pub fn write_file(&self, path: &str, contents: &str, user: &str, mode: u32) {
        let host = self.root().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(host.parent().unwrap()).unwrap();
        std::fs::write(&host, contents).unwrap();
        self.run_ok(&["chown", &format!("{user}:"), path]);
        self.run_ok(&["chmod", &format!("{mode:o}"), path]);
    }

    /// Wait until `unit` is active inside the container.
    pub fn wait_active(&self, unit: &str) {
        wait_for(
            Duration::from_secs(30),
            &format!("{unit} active in {}", self.machine),
            || {
                let out = self.run(&["systemctl", "is-active", unit]);
                (stdout(&out).trim() == "active").then_some(())
            },
        );
    }

    fn console(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("console.log")).unwrap_or_default()
    }
}

impl Drop for SystemManager {
    fn drop(&mut self) {
        if self.leader != 0 {
            let _ = self.run(&["systemctl", "poweroff", "--no-block"]);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut exited = false;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.nspawn.try_wait() {
                exited = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if !exited {
            // The last resort, when the poweroff never finished: the container's PID 1 first,
            // so that no systemd is left running without its nspawn.
            eprintln!(
                "{} did not power off within 30 s; killing it; console:\n{}",
                self.machine,
                self.console()
            );
            if self.leader != 0 {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(self.leader as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let _ = self.nspawn.kill();
            let _ = self.nspawn.wait();
        }
        let _ = Command::new("umount").arg(self.root()).status();
        for root in CGROUP_ROOTS {
            let dir = Path::new(root).join(&self.cgroup);
            if dir.exists() {
                remove_cgroup(&dir);
            }
        }
    }
}

/// The first child of `parent` whose command name is `name`, from /proc.
pub fn child_named(parent: u32, name: &str) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) =
            std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat"))
        else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read from the
        // last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if comm == name && ppid == Some(parent) {
            return Some(pid);
        }
    }
    None
}

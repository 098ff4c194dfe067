//! Files that are not what they claim to be never hang a command or blow up its memory: a 3 GB
//! sparse state file, a FIFO `gateway.toml`, a `gateway.toml` symlinked to `/dev/zero`, and
//! files that belong to someone else.
//!
//! Each command runs as a real child process under a generous time guard, which only turns a
//! hang into a failure (the assertions are on what the command says), and under an
//! address-space limit, so that the unfixed behaviour (reading gigabytes) fails the test
//! instead of the machine. Profile names start with `hf`.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::libc;

use crate::harness::{scratch_dir, Manager, TempDir, BIN};

/// Far more than any of these commands needs, far less than the files would cost if read.
const ADDRESS_SPACE: u64 = 2 * 1024 * 1024 * 1024;
/// Only a guard against a hang: a command that answers takes well under a second.
const GUARD: Duration = Duration::from_secs(30);

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// Peak resident set size of the program the child runs (`VmHWM` after its exec),
    /// sampled while it runs.
    max_rss_kib: i64,
}

/// Run `cmd` to completion with stdout and stderr captured; panic if it is still running
/// after [`GUARD`] (killing it first). Its peak memory is `VmHWM`, sampled every 2 ms while
/// it runs: `wait4`'s `ru_maxrss` counts the memory of this test process as it was at the
/// fork (Linux carries the old image's peak across `exec`), so a test process that had grown
/// past the limit failed every such check. What the sampling could miss, a spike in the last
/// 2 ms, the address-space limit below still catches.
// clippy cannot see that `wait4` below reaps the child it spawns.
#[allow(clippy::zombie_processes)]
fn run_guarded(mut cmd: Command) -> Ran {
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: ADDRESS_SPACE,
                rlim_max: ADDRESS_SPACE,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let started = Instant::now();
    let mut status = 0;
    let mut max_rss_kib = 0;
    // SAFETY: plain syscalls on our own child; `rusage` is written by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        max_rss_kib = max_rss_kib.max(peak_rss_kib(pid));
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert!(r == 0, "wait4: {}", std::io::Error::last_os_error());
        if started.elapsed() > GUARD {
            let _ = child.kill();
            unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            panic!(
                "{cmd:?} still running after {GUARD:?}: it hung\nstderr: {}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ran {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        max_rss_kib,
    }
}

/// `VmHWM` of a running process, in KiB; 0 once it has exited (or before its exec, when
/// it is still this process's copy: that `VmHWM` is ours, and is not counted).
fn peak_rss_kib(pid: libc::pid_t) -> i64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return 0;
    };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    if exe.as_deref() == std::env::current_exe().ok().as_deref() {
        return 0;
    }
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn doctor(m: &Manager) -> Ran {
    let mut cmd = m.command(BIN);
    cmd.args(["doctor", "--json"]).env(
        "DBUS_SYSTEM_BUS_ADDRESS",
        "unix:path=/nonexistent/hf-system-bus",
    );
    run_guarded(cmd)
}

fn gateway(m: &Manager, profile: &str, locks: &TempDir) -> Ran {
    let mut cmd = m.command(BIN);
    cmd.args(["gateway", "run", "--profile", profile])
        .env("HERMES_HOME", m.hermes_home())
        .env("HERMES_LOCK_DIR", locks.path());
    run_guarded(cmd)
}

/// Give `path` to `nobody` (uid 65534), as if another account had put it there.
fn chown_nobody(path: &std::path::Path) {
    std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
}

#[test]
fn status_refuses_a_3gb_sparse_state_file_at_once_and_names_it() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "hfsparse", "--no-start"]);
    let state = m.profile_home("hfsparse").join("state/gateway.json");
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    std::fs::File::create(&state)
        .unwrap()
        .set_len(3 * 1024 * 1024 * 1024)
        .unwrap();

    let mut cmd = m.command(BIN);
    cmd.args(["status", "--profile", "hfsparse"]);
    let text = run_guarded(cmd);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(
        text.stdout.contains("health: not shown: ")
            && text
                .stdout
                .contains("state/gateway.json is too large (3221225472 bytes"),
        "{}",
        text.stdout
    );
    // What it costs to say so is a command's usual footprint, not the file's size.
    assert!(
        text.max_rss_kib < 100 * 1024,
        "status peaked at {} KiB",
        text.max_rss_kib
    );

    let mut cmd = m.command(BIN);
    cmd.args(["status", "--profile", "hfsparse", "--json"]);
    let json = run_guarded(cmd);
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let unit = &report["units"][0];
    assert_eq!(unit["health"], serde_json::Value::Null, "{unit}");
    let why = unit["health_error"].as_str().unwrap();
    assert!(
        why.contains("too large") && why.contains("remove it"),
        "{why}"
    );
}

#[test]
fn status_refuses_a_state_file_that_belongs_to_someone_else() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "hfowner", "--no-start"]);
    let state = m.profile_home("hfowner").join("state/gateway.json");
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    std::fs::write(&state, r#"{"forged":true}"#).unwrap();
    chown_nobody(&state);
    let out = m.hermes_ok(&["status", "--profile", "hfowner"]);
    assert!(
        out.contains("state/gateway.json is owned by uid 65534, not by you (uid 0) or root"),
        "{out}"
    );
}

#[test]
fn a_fifo_or_a_dev_zero_symlink_as_gateway_toml_is_refused_by_doctor_and_the_gateway() {
    let m = Manager::boot();
    let locks = scratch_dir("hf-locks");
    let fifo_home = m.profile_home("hffifo");
    let zero_home = m.profile_home("hfzero");
    let owner_home = m.profile_home("hfnobody");
    for home in [&fifo_home, &zero_home, &owner_home] {
        std::fs::create_dir_all(home).unwrap();
    }
    nix::unistd::mkfifo(
        &fifo_home.join("gateway.toml"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero_home.join("gateway.toml")).unwrap();
    std::fs::write(owner_home.join("gateway.toml"), "").unwrap();
    chown_nobody(&owner_home.join("gateway.toml"));

    // doctor answers, with each broken config as an HSV015 that names the file and the fix.
    let out = doctor(&m);
    let report: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", out.stdout, out.stderr));
    let hsv015 = |profile: &str| -> String {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == "HSV015" && f["subject"].as_str().unwrap().contains(profile))
            .unwrap_or_else(|| panic!("no HSV015 for {profile}: {report:#}"))["message"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let fifo = hsv015("hffifo");
    assert!(
        fifo.contains("gateway.toml is a FIFO (named pipe), not a regular file"),
        "{fifo}"
    );
    let zero = hsv015("hfzero");
    assert!(zero.contains("gateway.toml is a symbolic link"), "{zero}");
    // Root looking at a profile whose directory is root's: only root's files are trusted.
    let nobody = hsv015("hfnobody");
    assert!(nobody.contains("owned by uid 65534"), "{nobody}");

    // The gateway exits 78 (configuration error, not restarted) and says why.
    for (profile, says) in [
        (
            "hffifo",
            "gateway.toml is a FIFO (named pipe), not a regular file",
        ),
        ("hfzero", "gateway.toml is a symbolic link"),
        ("hfnobody", "gateway.toml is owned by uid 65534"),
    ] {
        let out = gateway(&m, profile, &locks);
        assert_eq!(out.code, Some(78), "{profile}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{profile}: {}", out.stderr);
        assert!(
            out.max_rss_kib < 100 * 1024,
            "{profile}: the gateway peaked at {} KiB",
            out.max_rss_kib
        );
    }
}

#[test]
fn a_fifo_planted_in_the_inbox_does_not_hang_events() {
    let m = Manager::boot();
    let inbox = m.profile_home("hfinbox").join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    nix::unistd::mkfifo(
        &inbox.join("events.jsonl"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let mut cmd = m.command(BIN);
    cmd.args(["events", "--profile", "hfinbox"]);
    let out = run_guarded(cmd);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("not a regular file"), "{}", out.stderr);
}

/// `gateway run` for `profile` under `hermes_home`, in the foreground, with locks of its own.
fn foreground_gateway(hermes_home: &std::path::Path, profile: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["gateway", "run", "--profile", profile])
        .env("HERMES_HOME", hermes_home)
        .env("HERMES_LOCK_DIR", hermes_home.join("locks"))
        .env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .env_remove("HERMES_TEST_FAULT");
    cmd
}

fn private_dir(path: &std::path::Path) {
    std::fs::create_dir_all(path).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
}

#[test]
fn a_fifo_as_the_weixin_login_is_refused_at_once_instead_of_hanging_the_start() {
    let hermes_home = scratch_dir("hf-wxfifo");
    let home = hermes_home.path().join("profiles/hfwxfifo");
    private_dir(&home.join("weixin"));
    std::fs::write(
        home.join("gateway.toml"),
        "[[adapter]]\nname = \"wx\"\nkind = \"weixin\"\n",
    )
    .unwrap();
    let login = home.join("weixin/wx.json");
    nix::unistd::mkfifo(&login, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let out = run_guarded(foreground_gateway(hermes_home.path(), "hfwxfifo"));
    assert_eq!(out.code, Some(78), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{} is a FIFO (named pipe), not a regular file: check it, then remove it",
            login.display()
        )),
        "{}",
        out.stderr
    );
}

#[test]
fn a_link_or_a_fifo_as_the_spool_stops_the_start_with_the_file_and_the_fix_named() {
    let hermes_home = scratch_dir("hf-spoolkind");
    for (profile, says) in [
        (
            "hfspoollink",
            "is a symbolic link, which hermes-svc never follows inside a profile home: someone else may have put it there; check where it points, then remove it",
        ),
        (
            "hfspoolfifo",
            "is a FIFO (named pipe), not a regular file: check it, then remove it",
        ),
    ] {
        let inbox = hermes_home.path().join("profiles").join(profile).join("inbox");
        private_dir(&inbox);
        let spool = inbox.join("events.jsonl");
        if profile == "hfspoollink" {
            std::os::unix::fs::symlink("/etc/passwd", &spool).unwrap();
        } else {
            nix::unistd::mkfifo(&spool, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        }
        let out = run_guarded(foreground_gateway(hermes_home.path(), profile));
        assert_eq!(out.code, Some(78), "{profile}: {}", out.stderr);
        let named = format!("{} {says}", spool.display());
        assert!(out.stderr.contains(&named), "{profile}: {}", out.stderr);
    }
}

#[test]
fn a_fifo_as_the_weixin_cursor_is_named_in_a_warning_and_polling_starts_anyway() {
    use hermes_svc::config::Secret;
    use hermes_svc::mock_platform::weixin::WeixinConfig;
    use hermes_svc::mock_platform::MockConfig;
    use hermes_svc::platform::weixin::WeixinLogin;

    /// The gateway, killed when the test ends however it ends.
    struct Running(std::process::Child);
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    let config = MockConfig {
        weixin: WeixinConfig {
            longpolling_timeout_ms: 1000,
            ..WeixinConfig::default()
        },
        ..MockConfig::default()
    };
    let rig = crate::outbox_rig::Rig::with_mock("hfwxcursor", "", config);
    let toml = rig.profile_home().join("gateway.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str(&format!(
        "\n[[adapter]]\nname = \"wx\"\nkind = \"weixin\"\napi-base = \"{}\"\n\
         poll-timeout = \"1s\"\npoll-grace = \"1s\"\n",
        rig.mock.http_base()
    ));
    std::fs::write(&toml, text).unwrap();
    WeixinLogin::new(
        Secret::new(WeixinConfig::default().token),
        rig.mock.http_base(),
        "mockbot@im.bot".into(),
        "mockuser@im.wechat".into(),
    )
    .write(&rig.profile_home().join("weixin/wx.json"))
    .unwrap();
    let cursors = rig.profile_home().join("inbox/cursors");
    private_dir(&cursors);
    nix::unistd::mkfifo(
        &cursors.join("wx"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();

    let _gateway = Running(rig.gateway(""));
    crate::harness::wait_for(Duration::from_secs(20), "the adapter to poll", || {
        (rig.mock.weixin_stats().polls > 0).then_some(())
    });
    let log = rig.log();
    assert!(
        log.contains(&format!(
            "{} is a FIFO (named pipe), not a regular file",
            cursors.join("wx").display()
        )),
        "{log}"
    );
}

#[test]
fn a_fifo_or_dev_zero_as_the_clusters_ca_is_a_config_error_not_a_hang() {
    let hermes_home = scratch_dir("hf-clca");
    let fifo = hermes_home.path().join("ca-fifo.pem");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let zero = hermes_home.path().join("ca-zero.pem");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    for (profile, ca, says) in [
        (
            "hfclfifo",
            &fifo,
            "is a FIFO (named pipe), not a regular file",
        ),
        ("hfclzero", &zero, "symbolic link"),
    ] {
        let home = hermes_home.path().join("profiles").join(profile);
        private_dir(&home);
        std::fs::write(
            home.join("gateway.toml"),
            format!(
                "[cluster]\nendpoints = [\"https://127.0.0.1:1\"]\nca = \"{}\"\n",
                ca.display()
            ),
        )
        .unwrap();
        let out = run_guarded(foreground_gateway(hermes_home.path(), profile));
        assert_eq!(out.code, Some(78), "{profile}: {}", out.stderr);
        assert!(
            out.stderr
                .contains(&format!("[cluster] ca = {}", ca.display()))
                && out.stderr.contains(says),
            "{profile}: {}",
            out.stderr
        );
        assert!(
            out.max_rss_kib < 200 * 1024,
            "{profile}: {} KiB",
            out.max_rss_kib
        );
    }
}

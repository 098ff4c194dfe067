//! The sandboxed user unit under a real systemd user manager: the gateway still reaches READY,
//! its cron job still writes into the profile home, and the sandbox is really in force for the
//! job (no new privileges, a seccomp filter that answers EPERM, no namespaces, umask 0077).
//!
//! The harness's manager runs as root, so without the sandbox every probe below would succeed:
//! root may `unshare` and `mount`. Each probe therefore fails if its directive goes missing.
//! Profile names start with `sbx` so they never collide with other tests' units.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::harness::{unit, wait_for, Manager};

/// One cron job that probes the sandbox it runs in and records each answer in a file of the
/// profile home. It runs once: later ticks find `ran` and do nothing, so the test never reads
/// a file that a second run is rewriting. `ran` is renamed into place last, so its presence
/// means every other file is complete.
const PROBE_JOB: &str = r#"[ -e ran ] && exit 0
umask > umask.out
grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status > status.out
unshare --user true 2>/dev/null; echo $? > unshare.rc
mkdir -p mnt; mount -t tmpfs none mnt 2>/dev/null; echo $? > mount.rc
echo ok > ran.tmp && mv ran.tmp ran"#;

fn gateway_toml() -> String {
    format!(
        "[[cron]]\n\
         name = \"probe\"\n\
         schedule = \"* * * * * *\"\n\
         command = [\"/bin/sh\", \"-c\", {}]\n",
        toml_string(PROBE_JOB)
    )
}

/// A TOML basic string holding `s`.
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

fn read(home: &Path, name: &str) -> String {
    fs::read_to_string(home.join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .trim()
        .to_owned()
}

/// The lines of `/proc/PID/status` that show the kernel-side sandbox of a process.
fn proc_sandbox(pid: u32) -> Vec<String> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("NoNewPrivs:") || l.starts_with("Seccomp:"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn a_sandboxed_gateway_reaches_ready_and_its_cron_job_writes_into_the_profile_home() {
    let m = Manager::boot();
    let profile = "sbx1";
    let unit = unit(profile);
    let home = m.profile_home(profile);
    fs::create_dir_all(&home).unwrap();
    fs::write(home.join("gateway.toml"), gateway_toml()).unwrap();

    // install waits for the start job, which for Type=notify ends only at READY=1.
    m.hermes_ok(&["install", "--profile", profile]);
    let pid = m.wait_active(&unit);
    let props = m.show(&unit);
    assert_eq!(props["SubState"], "running");
    assert!(
        props["StatusText"].contains("cron ok"),
        "StatusText={}",
        props["StatusText"]
    );

    // The manager loaded the sandbox, and the kernel applies it to the gateway itself.
    for (key, want) in [
        ("NoNewPrivileges", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("UMask", "0077"),
        ("LockPersonality", "yes"),
        ("RestrictRealtime", "yes"),
        ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
        ("SystemCallArchitectures", "native"),
    ] {
        assert_eq!(props.get(key).map(String::as_str), Some(want), "{key}");
    }
    assert_eq!(proc_sandbox(pid), ["NoNewPrivs: 1", "Seccomp: 2"]);

    wait_for(
        Duration::from_secs(15),
        "the cron job to write `ran` into the profile home",
        || home.join("ran").exists().then_some(()),
    );
    assert_eq!(read(&home, "ran"), "ok");
    // The job inherits the sandbox: umask 0077 (so what it writes is private to the account),
    // no new privileges, and the seccomp filter.
    assert_eq!(read(&home, "umask.out"), "0077");
    let mode = fs::metadata(home.join("umask.out"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "mode of a file the job created");
    assert_eq!(read(&home, "status.out"), "NoNewPrivs:\t1\nSeccomp:\t2");
    // RestrictNamespaces=yes: even root may not make a user namespace (unshare exits 1 on
    // EPERM; 0 would mean it made one).
    assert_eq!(read(&home, "unshare.rc"), "1", "unshare --user");
    // SystemCallFilter=@system-service leaves out mount(2), and SystemCallErrorNumber=EPERM
    // makes that an error the job can handle: mount(8) exits 32 ("mount failure"). 0 would
    // mean no filter; 159 (128 + SIGSYS) a filter that kills instead.
    assert_eq!(read(&home, "mount.rc"), "32", "mount -t tmpfs");
    assert_eq!(m.main_pid(&unit), pid, "the gateway restarted");
}

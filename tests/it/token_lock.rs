//! Token locks against a hostile local user: the real `hermes-svc gateway run`, real flocks,
//! and a second, unprivileged user (`runuser -u nobody`), as root like the rest of the suite.
//!
//! Each test gets its own lock directory (`HERMES_LOCK_DIR`, or `XDG_RUNTIME_DIR` for the user
//! scope), so nothing here touches the host's `/run`. A started gateway is waited for until its
//! `READY=1`: by then it holds its token locks and handles SIGTERM.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use sha2::{Digest, Sha256};

use crate::harness::{scratch_dir, wait_for, Manager, BIN};

const TOKEN_VAR: &str = "TL_TOKEN";

/// A websocket adapter aimed at a port nothing listens on: it retries for ever, and holds
/// its token lock all the while.
fn adapter(name: &str) -> String {
    format!(
        "[[adapter]]\nname = \"{name}\"\nkind = \"websocket\"\nurl = \"ws://127.0.0.1:9/\"\n\
         token-env = \"{TOKEN_VAR}\"\n"
    )
}

/// The identity the gateway locks for [`adapter`] with `token` (see `AdapterSpec::identity`).
fn identity(token: &str) -> String {
    format!("websocket:ws://127.0.0.1:9/:{token}")
}

fn nobody() -> u32 {
    nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("a user named nobody")
        .uid
        .as_raw()
}

/// Write a profile's `gateway.toml` and `.env` (0600) under `hermes_home`; returns its home.
fn write_profile(hermes_home: &Path, profile: &str, toml: &str, token: &str) -> PathBuf {
    let home = hermes_home.join("profiles").join(profile);
    fs::create_dir_all(&home).unwrap();
    fs::write(home.join("gateway.toml"), toml).unwrap();
    let env = home.join(".env");
    fs::write(&env, format!("{TOKEN_VAR}={token}\n")).unwrap();
    fs::set_permissions(&env, fs::Permissions::from_mode(0o600)).unwrap();
    home
}

/// A gateway command; its stderr goes to `<home>/../<profile>.log` (a file, not a pipe, so a
/// long-running gateway can never block on a full pipe). `locks` is `HERMES_LOCK_DIR`.
struct Gw {
    cmd: Command,
    home: PathBuf,
    log: PathBuf,
}

fn gateway(hermes_home: &Path, profile: &str, locks: Option<&Path>) -> Gw {
    gateway_as(None, hermes_home, profile, locks)
}

/// The same, run as `user` through `runuser` when given.
fn gateway_as(user: Option<&str>, hermes_home: &Path, profile: &str, locks: Option<&Path>) -> Gw {
    let mut cmd = match user {
        Some(u) => {
            let mut c = Command::new("runuser");
            c.args(["-u", u, "--", BIN]);
            c
        }
        None => Command::new(BIN),
    };
    cmd.args(["gateway", "run", "--profile", profile])
        .env("HERMES_HOME", hermes_home)
        .env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .env_remove("WATCHDOG_PID")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove(TOKEN_VAR)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    match locks {
        Some(l) => cmd.env("HERMES_LOCK_DIR", l),
        None => cmd.env_remove("HERMES_LOCK_DIR"),
    };
    let home = hermes_home.join("profiles").join(profile);
    let log = hermes_home.join(format!("{profile}.log"));
    Gw { cmd, home, log }
}

impl Gw {
    fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Gw {
        self.cmd.env(k, v);
        self
    }

    fn spawn(&mut self) -> Child {
        let log = fs::File::create(&self.log).unwrap();
        // Readable by whichever user the gateway runs as.
        fs::set_permissions(&self.log, fs::Permissions::from_mode(0o666)).unwrap();
        self.cmd.stderr(log).spawn().unwrap()
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Start it and wait for its `READY=1` (it holds its token locks from before its pid file
    /// is written, and it handles SIGTERM from `READY=1` on).
    fn start(mut self) -> Running {
        let sock_path = self.log.with_extension("notify");
        let _ = fs::remove_file(&sock_path);
        let sock = UnixDatagram::bind(&sock_path).unwrap();
        fs::set_permissions(&sock_path, fs::Permissions::from_mode(0o666)).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        self.cmd.env("NOTIFY_SOCKET", &sock_path);
        let mut child = self.spawn();
        wait_for(Duration::from_secs(30), "the gateway's READY=1", || {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("the gateway exited ({status}):\n{}", self.log_text());
            }
            let mut buf = [0u8; 4096];
            let n = sock.recv(&mut buf).ok()?;
            String::from_utf8_lossy(&buf[..n])
                .contains("READY=1")
                .then_some(())
        });
        let pid_file = self.home.join("gateway.pid");
        let rec: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&pid_file).unwrap()).unwrap();
        Running {
            child,
            pid: rec["pid"].as_u64().unwrap() as u32,
            gw: self,
        }
    }

    /// Run it and require that it exits within 10 s (it must not start); returns how.
    fn exits(mut self) -> (ExitStatus, String) {
        let mut child = self.spawn();
        let status = wait_for(Duration::from_secs(10), "the gateway to exit", || {
            let s = child.try_wait().unwrap();
            if s.is_none() && self.home.join("gateway.pid").exists() {
                let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
                let _ = child.wait();
                panic!(
                    "the gateway started, and should have refused to:\n{}",
                    self.log_text()
                );
            }
            s
        });
        (status, self.log_text())
    }
}

/// A started gateway; stopped with SIGTERM on drop.
struct Running {
    child: Child,
    /// The gateway's own PID (not runuser's), from its pid file.
    pid: u32,
    gw: Gw,
}

impl Running {
    fn stop(mut self) {
        let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGTERM);
        let status = self.child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{}", self.gw.log_text());
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGTERM);
            let _ = self.child.wait();
        }
    }
}

/// The one `token-*.lock` file in `dir`.
fn only_lock_file(dir: &Path) -> PathBuf {
    let locks: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("token-")
        })
        .collect();
    assert_eq!(locks.len(), 1, "{locks:?}");
    locks.into_iter().next().unwrap()
}

fn as_nobody(args: &[&str]) -> Command {
    let mut c = Command::new("runuser");
    c.args(["-u", "nobody", "--"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// `flock -n -x FILE` holding the lock until killed, as `cmd` (plain `flock`, or through
/// runuser). Returns the child and whether it got the lock: it prints `locked` once it holds
/// it, and exits at once when it cannot open or lock the file.
fn hold_with_flock(mut cmd: Command, file: &Path) -> (Child, bool) {
    let mut child = cmd
        // -o: the command does not inherit the lock, so the lock goes with flock itself.
        .args(["flock", "-o", "-n", "-x"])
        .arg(file)
        .args(["-c", "echo locked; exec sleep 600"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line.trim() == "locked")
}

fn chown_nobody(path: &Path) {
    let uid = nix::unistd::Uid::from_raw(nobody());
    for entry in walk(path) {
        nix::unistd::chown(&entry, Some(uid), None).unwrap();
    }
}

fn walk(path: &Path) -> Vec<PathBuf> {
    let mut out = vec![path.to_owned()];
    if path.is_dir() {
        for e in fs::read_dir(path).unwrap() {
            out.extend(walk(&e.unwrap().path()));
        }
    }
    out
}

fn mkdir_mode(path: &Path, mode: u32) {
    fs::create_dir_all(path).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Another user can neither hold a token lock to keep a gateway down, nor create or remove
/// anything in the lock directory to make two gateways share a token.
#[test]
fn another_user_can_neither_block_nor_remove_a_token_lock() {
    let t = scratch_dir("tl-hostile");
    let hh = t.path().join("hermes");
    let locks = t.path().join("locks");
    write_profile(&hh, "tlhosta", &adapter("ws"), "tl-token-hostile");
    write_profile(&hh, "tlhostb", &adapter("ws"), "tl-token-hostile");
    // A first run leaves its lock file behind, as every gateway that ever ran does.
    gateway(&hh, "tlhosta", Some(&locks)).start().stop();
    let lock = only_lock_file(&locks);

    // `runuser -u nobody -- flock -n -x $LOCKDIR/token-<hash>.lock sleep 999`.
    let (mut squatter, got_it) = hold_with_flock(as_nobody(&[]), &lock);
    if got_it {
        let _ = squatter.kill();
        let _ = squatter.wait();
        panic!("nobody holds the token lock {}", lock.display());
    }
    assert!(!squatter.wait().unwrap().success());
    let planted = locks.join("token-000000000000.lock");
    for args in [
        vec!["ls", locks.to_str().unwrap()],
        vec!["touch", planted.to_str().unwrap()],
        vec!["rm", "-f", lock.to_str().unwrap()],
        vec!["ln", "-s", "/etc/shadow", planted.to_str().unwrap()],
    ] {
        let status = as_nobody(&args).status().unwrap();
        assert!(!status.success(), "nobody could run {args:?}");
    }
    assert!(lock.exists(), "nobody removed the lock file");
    assert!(!planted.exists() && planted.symlink_metadata().is_err());

    // So A starts; B, with the same token, is refused and names A.
    let a = gateway(&hh, "tlhosta", Some(&locks)).start();
    let (status, log) = gateway(&hh, "tlhostb", Some(&locks)).exits();
    assert_eq!(status.code(), Some(78), "{log}");
    let expected = format!(
        "token for adapter ws already held by profile tlhosta (PID {})",
        a.pid
    );
    assert!(log.contains(&expected), "{log}");
    assert!(!log.contains("tl-token-hostile"), "the token leaked: {log}");
    a.stop();
}

/// A lock directory someone else made first (anyone can, in `/run/lock` after a boot), one
/// that others can write, and one below a directory others can write are all refused.
#[test]
fn a_lock_directory_others_can_change_is_refused() {
    let t = scratch_dir("tl-foreign");
    let hh = t.path().join("hermes");
    let home = write_profile(&hh, "tlforeign", &adapter("ws"), "tl-token-foreign");
    // A sticky, world-writable parent like /run/lock, where nobody got there first.
    let shared = t.path().join("shared");
    mkdir_mode(&shared, 0o1777);
    let squatted = shared.join("hermes-svc");
    assert!(
        as_nobody(&["mkdir", "-m", "1777", squatted.to_str().unwrap()])
            .status()
            .unwrap()
            .success()
    );
    let (status, log) = gateway(&hh, "tlforeign", Some(&squatted)).exits();
    assert_eq!(status.code(), Some(1), "{log}");
    let expected = format!(
        "lock directory {} is owned by uid {}",
        squatted.display(),
        nobody()
    );
    assert!(log.contains(&expected), "{log}");
    assert!(log.contains("HERMES_LOCK_DIR"), "no fix named: {log}");
    assert_eq!(
        fs::read_dir(&squatted).unwrap().count(),
        0,
        "it wrote there"
    );
    assert!(!home.join("gateway.pid").exists());

    // Ours, but writable by others.
    let open = t.path().join("open");
    mkdir_mode(&open, 0o777);
    let (status, log) = gateway(&hh, "tlforeign", Some(&open)).exits();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains(&format!("lock directory {} is writable by", open.display())),
        "{log}"
    );
    assert_eq!(fs::read_dir(&open).unwrap().count(), 0, "it wrote there");

    // Ours, in a directory others could rename it out of and replace; and one that would be
    // made there, which is not.
    let loose = t.path().join("loose");
    mkdir_mode(&loose, 0o777);
    let inner = loose.join("locks");
    mkdir_mode(&inner, 0o700);
    let (status, log) = gateway(&hh, "tlforeign", Some(&inner)).exits();
    assert_eq!(status.code(), Some(1), "{log}");
    let expected = format!(
        "{} is writable by group or others (mode 0777), so someone else could replace the \
         lock directory {}",
        loose.display(),
        inner.display()
    );
    assert!(log.contains(&expected), "{log}");
    assert_eq!(fs::read_dir(&inner).unwrap().count(), 0, "it wrote there");
    let unmade = loose.join("new/locks");
    let (status, log) = gateway(&hh, "tlforeign", Some(&unmade)).exits();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(!loose.join("new").exists(), "it made a directory there");
}

/// With `fs.protected_symlinks=0`, a planted `token-<hash>.lock -> FILE` used to make a root
/// gateway truncate FILE and write into it. Lock files and the key are never followed.
#[test]
fn a_planted_symlink_is_not_followed() {
    let t = scratch_dir("tl-symlink");
    let hh = t.path().join("hermes");
    let locks = t.path().join("locks");
    let target = t.path().join("precious");
    fs::write(&target, "root's data\n").unwrap();
    write_profile(&hh, "tlsymlink", &adapter("ws"), "tl-token-symlink");
    gateway(&hh, "tlsymlink", Some(&locks)).start().stop();
    let lock = only_lock_file(&locks);
    fs::remove_file(&lock).unwrap();
    std::os::unix::fs::symlink(&target, &lock).unwrap();

    let (status, log) = gateway(&hh, "tlsymlink", Some(&locks)).exits();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains(&lock.display().to_string()) && log.contains("symbolic link"),
        "{log}"
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "root's data\n");

    // The key file is not followed either.
    let fresh = t.path().join("fresh");
    mkdir_mode(&fresh, 0o700);
    std::os::unix::fs::symlink(&target, fresh.join("key")).unwrap();
    let (status, log) = gateway(&hh, "tlsymlink", Some(&fresh)).exits();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains(&fresh.join("key").display().to_string()) && log.contains("symbolic link"),
        "{log}"
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "root's data\n");
}

/// The holder named is the process the kernel says holds the lock, never what the file says.
#[test]
fn the_holder_named_is_the_one_the_kernel_reports() {
    let t = scratch_dir("tl-holder");
    let hh = t.path().join("hermes");
    let locks = t.path().join("locks");
    write_profile(&hh, "tlholder", &adapter("ws"), "tl-token-holder");
    gateway(&hh, "tlholder", Some(&locks)).start().stop();
    let lock = only_lock_file(&locks);
    fs::write(&lock, "{\"pid\":1,\"profile\":\"admin-approved\"}\n").unwrap();

    let (mut holder, got_it) = hold_with_flock(Command::new("env"), &lock);
    assert!(got_it, "flock could not take {}", lock.display());
    let (status, log) = gateway(&hh, "tlholder", Some(&locks)).exits();
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(status.code(), Some(78), "{log}");
    let expected = format!(
        "token for adapter ws already held by PID {} (flock), which is not a hermes-svc gateway",
        holder.id()
    );
    assert!(log.contains(&expected), "{log}");
    assert!(
        !log.contains("admin-approved") && !log.contains("PID 1)"),
        "{log}"
    );

    // Once the holder is gone, the kernel has released its lock: the gateway starts at once.
    gateway(&hh, "tlholder", Some(&locks)).start().stop();
}

/// Two adapters of one profile with the same credential: a configuration error that names
/// both, not a lock "held" by the gateway itself.
#[test]
fn two_adapters_with_one_credential_in_a_profile_is_a_config_error() {
    let t = scratch_dir("tl-twice");
    let hh = t.path().join("hermes");
    let locks = t.path().join("locks");
    let toml = adapter("first") + &adapter("second");
    let home = write_profile(&hh, "tltwice", &toml, "tl-token-twice");
    let (status, log) = gateway(&hh, "tltwice", Some(&locks)).exits();
    assert_eq!(status.code(), Some(78), "{log}");
    assert!(
        log.contains("adapters first and second")
            && log.contains(&home.join("gateway.toml").display().to_string()),
        "{log}"
    );
    assert!(!log.contains("already held"), "{log}");
    assert!(!log.contains("tl-token-twice"), "the token leaked: {log}");
}

/// A lock directory the gateway cannot write is an I/O failure (exit 1) that says so, not a
/// conflict (78) and not "No such file or directory".
#[test]
fn an_unwritable_lock_directory_exits_1_and_says_why() {
    let t = scratch_dir("tl-readonly");
    let hh = t.path().join("hermes");
    write_profile(&hh, "tlreadonly", &adapter("ws"), "tl-token-readonly");
    let locks = t.path().join("locks");
    mkdir_mode(&locks, 0o500);
    chown_nobody(&hh);
    chown_nobody(&locks);
    let (status, log) = gateway_as(Some("nobody"), &hh, "tlreadonly", Some(&locks)).exits();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains(&locks.display().to_string()) && log.contains("Permission denied"),
        "{log}"
    );
    assert!(!log.contains("No such file or directory"), "{log}");
}

/// A user's gateway keeps its locks in `$XDG_RUNTIME_DIR/hermes-svc`: the directory 0700, the
/// key and the lock file 0600, all its own, and the lock named by a keyed hash that cannot be
/// tested offline against a guessed token.
#[test]
fn a_users_locks_live_in_its_runtime_dir_under_a_keyed_name() {
    let t = scratch_dir("tl-user");
    let hh = t.path().join("hermes");
    let token = "tl-token-user";
    write_profile(&hh, "tluser", &adapter("ws"), token);
    let xdg = t.path().join("xdg");
    mkdir_mode(&xdg, 0o700);
    chown_nobody(&hh);
    chown_nobody(&xdg);
    let gw = gateway_as(Some("nobody"), &hh, "tluser", None)
        .env("XDG_RUNTIME_DIR", &xdg)
        .start();
    let dir = xdg.join("hermes-svc");
    let stat = |p: &Path| {
        let m = fs::symlink_metadata(p).unwrap();
        (m.uid(), m.mode() & 0o7777, m.len())
    };
    let (uid, mode, _) = stat(&dir);
    assert_eq!((uid, mode), (nobody(), 0o700), "{}", dir.display());
    let key = stat(&dir.join("key"));
    assert_eq!(key, (nobody(), 0o600, 32), "the key");
    let lock = only_lock_file(&dir);
    let (lock_uid, lock_mode, _) = stat(&lock);
    assert_eq!(
        (lock_uid, lock_mode),
        (nobody(), 0o600),
        "{}",
        lock.display()
    );

    let name = lock.file_name().unwrap().to_string_lossy().into_owned();
    let hash = name
        .strip_prefix("token-")
        .and_then(|n| n.strip_suffix(".lock"))
        .unwrap();
    let unkeyed: String = Sha256::digest(identity(token).as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(
        !unkeyed.starts_with(&hash[..12]),
        "the name is the unkeyed hash of the token: {name}"
    );
    gw.stop();
}

/// doctor still finds one token in two profiles (HSV006), and the hash it shows is the one the
/// lock file is named after, when it runs as the same user with the same lock directory.
#[test]
fn doctor_names_a_shared_token_by_its_lock_files_hash() {
    let m = Manager::boot();
    let locks = scratch_dir("tl-doctor-locks");
    let lock_dir = locks.path().join("l");
    let token = "tl-token-doctor-5c4b3a";
    for p in ["tldoc1", "tldoc2"] {
        write_profile(&m.hermes_home(), p, &adapter("ws"), token);
    }
    gateway(&m.hermes_home(), "tldoc1", Some(&lock_dir))
        .start()
        .stop();
    let lock = only_lock_file(&lock_dir);
    let name = lock.file_name().unwrap().to_string_lossy().into_owned();
    let hash = name
        .strip_prefix("token-")
        .and_then(|n| n.strip_suffix(".lock"))
        .unwrap()
        .to_owned();

    let out = m
        .command(BIN)
        .args(["doctor", "--json"])
        .env("HERMES_LOCK_DIR", &lock_dir)
        .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/tl-bus")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!text.contains(token) && !text.contains("5c4b3a"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let shared: Vec<&serde_json::Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "HSV006")
        .collect();
    assert_eq!(shared.len(), 2, "{text}");
    for f in shared {
        let msg = f["message"].as_str().unwrap();
        assert!(msg.contains(&format!("hash {hash}")), "{msg} vs {name}");
    }
}

//! The gateway process under measurement: which binary it is (refusing one that would
//! measure the wrong program), and starting it against a scratch profile.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_hermes-svc");

pub(crate) struct Gateway(pub(crate) Child);
impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The gateway binary to measure. `cargo bench` builds `BIN` with the dev-dependency features
/// (tokio's test-util clock among them); `HSV_BENCH_BIN` points at a plain release build.
/// Two mistakes would measure the wrong program, and both are refused:
/// - `BIN` is target/release/hermes-svc itself, which `cargo bench` has just overwritten, so
///   pointing `HSV_BENCH_BIN` at that path measures the dev-featured build under a plain name;
/// - a copy older than the newest source file measures code that is no longer there.
///
/// Checked once, when the bench starts: a source edited during a long soak does not change
/// the binary already being measured.
pub(crate) fn gateway_bin() -> String {
    static BIN_CHECKED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN_CHECKED.get_or_init(check_gateway_bin).clone()
}

fn check_gateway_bin() -> String {
    let Ok(bin) = std::env::var("HSV_BENCH_BIN") else {
        return BIN.to_owned();
    };
    let how = "run `cargo build --release && cp target/release/hermes-svc /tmp/hsv-prod` and set \
               HSV_BENCH_BIN=/tmp/hsv-prod";
    // The same file by any name: a symbolic or a hard link to cargo's build is that build.
    let identity = |p: &str| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
    };
    let Ok(path) = std::fs::canonicalize(&bin) else {
        panic!("HSV_BENCH_BIN={bin} does not exist; {how}");
    };
    assert!(
        identity(&bin) != identity(BIN),
        "HSV_BENCH_BIN={bin} is the file `cargo bench` just rebuilt with dev-dependency \
         features; {how}"
    );
    let built = std::fs::metadata(&path).and_then(|m| m.modified()).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if let Some(newer) = newest_file(&src).filter(|(t, _)| *t > built) {
        panic!(
            "HSV_BENCH_BIN={bin} is older than {}, so it is not the code in this tree; {how}",
            newer.1.display()
        );
    }
    bin
}

/// The most recently modified file under `dir`, with its time.
fn newest_file(dir: &Path) -> Option<(std::time::SystemTime, PathBuf)> {
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if let Ok(t) = meta.modified() {
                if newest.as_ref().is_none_or(|(n, _)| t > *n) {
                    newest = Some((t, entry.path()));
                }
            }
        }
    }
    newest
}

pub(crate) fn spawn_gateway(home: &Path, profile: &str, notify: Option<&Path>) -> Gateway {
    spawn_gateway_with(home, profile, notify, &[])
}

/// [`spawn_gateway`] with more environment: `WATCHDOG_USEC`, say, as systemd would set it.
pub(crate) fn spawn_gateway_with(
    home: &Path,
    profile: &str,
    notify: Option<&Path>,
    env: &[(&str, &str)],
) -> Gateway {
    let mut cmd = Command::new(gateway_bin());
    cmd.args(["gateway", "run", "--profile", profile])
        .env("HERMES_HOME", home)
        .env("HERMES_LOCK_DIR", home.join("locks"))
        .env("HERMES_LOG", "warn")
        .env_remove("WATCHDOG_USEC")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // READY=1 and STATUS= tell the moment every adapter is ready, to the millisecond (the
    // state file is rewritten only every few seconds).
    match notify {
        Some(path) => cmd.env("NOTIFY_SOCKET", path),
        None => cmd.env_remove("NOTIFY_SOCKET"),
    };
    cmd.envs(env.iter().copied());
    Gateway(cmd.spawn().unwrap())
}

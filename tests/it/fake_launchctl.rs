//! A recording fake `launchctl`, shared by the runner's tests and doctor's: there is no launchd
//! here, so this stands in for it.
//!
//! It is a shell script that appends its argv as one line to `calls.log` and answers from files
//! in `answers/`, most specific first: `<sub>.<n>.*` for the n-th call of a subcommand only,
//! `@<argv>.*` for one exact call (its argv with spaces and slashes as `_`, so that `print
//! gui/501` and `print gui/501/<label>` answer apart), then `<sub>.*` for every call of it.
//! Each answer is `.rc`, `.out`, `.err` (and `.sleep`). A test reaches its fake by path, or
//! puts its directory first on a child's `PATH`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use crate::harness::{scratch_dir, TempDir};

/// launchctl's answer for a service the domain does not have (TOSS-Soft/toss-agent-runtime#40).
pub(crate) const NOT_FOUND_ERR: &str =
    "Bad request.\nCould not find service \"ai.hermes.gateway.coder\" in domain for user gui: 501\n";

const SCRIPT: &str = r#"#!/bin/sh
# A recording fake launchctl: logs its argv, answers from files beside the link to it.
[ "$1" = --probe ] && exit 0
dir=$(dirname "$0")
printf '%s\n' "$*" >> "$dir/calls.log"
sub=$1
n=$(( $(cat "$dir/count.$sub" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$dir/count.$sub"
a="$dir/answers/$sub.$n"
[ -e "$a.rc" ] || a="$dir/answers/@$(printf '%s' "$*" | tr ' /' '__')"
[ -e "$a.rc" ] || a="$dir/answers/$sub"
[ -e "$a.sleep" ] && sleep "$(cat "$a.sleep")"
[ -e "$a.out" ] && cat "$a.out"
[ -e "$a.err" ] && cat "$a.err" >&2
exit "$(cat "$a.rc" 2>/dev/null || echo 0)"
"#;

/// The script, written once and reused. Each test links to it from its own directory (a link
/// opens nothing for writing), so no test execs a file that another thread's fork may still
/// hold open for writing ("Text file busy"). It lives in cargo's scratch directory for
/// integration tests, replaced by rename when its text changes.
fn script() -> &'static Path {
    static SCRIPT_PATH: OnceLock<PathBuf> = OnceLock::new();
    SCRIPT_PATH.get_or_init(|| {
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-launchctl");
        if std::fs::read_to_string(&path).ok().as_deref() != Some(SCRIPT) {
            let tmp = path.with_extension(std::process::id().to_string());
            std::fs::write(&tmp, SCRIPT).unwrap();
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
        // Exec it once: a fork elsewhere in this process that inherited the write fd holds it
        // only until that child execs, so this settles within moments.
        for _ in 0..100 {
            match std::process::Command::new(&path).arg("--probe").output() {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => panic!("cannot run {}: {e}", path.display()),
            }
        }
        path
    })
}

pub(crate) struct Fake {
    pub(crate) dir: TempDir,
}

impl Fake {
    /// A fake whose every call succeeds silently, except `print`, which answers "not loaded".
    pub(crate) fn new() -> Fake {
        let dir = scratch_dir("launchctl");
        std::fs::create_dir(dir.path().join("answers")).unwrap();
        std::os::unix::fs::symlink(script(), dir.path().join("launchctl")).unwrap();
        let fake = Fake { dir };
        fake.answer("print", 113, "", NOT_FOUND_ERR);
        fake
    }

    /// The fake, by path; its directory holds nothing else that runs.
    pub(crate) fn program(&self) -> PathBuf {
        self.dir.path().join("launchctl")
    }

    /// How every call of `sub` answers.
    pub(crate) fn answer(&self, sub: &str, rc: i32, out: &str, err: &str) {
        self.write(sub, rc, out, err);
    }

    /// How the `n`-th call of `sub` answers (counting from 1).
    pub(crate) fn answer_nth(&self, sub: &str, n: u32, rc: i32, out: &str, err: &str) {
        self.write(&format!("{sub}.{n}"), rc, out, err);
    }

    /// How the one call with exactly `argv` (space-separated, as logged) answers.
    pub(crate) fn answer_call(&self, argv: &str, rc: i32, out: &str, err: &str) {
        self.write(&format!("@{}", argv.replace([' ', '/'], "_")), rc, out, err);
    }

    fn write(&self, name: &str, rc: i32, out: &str, err: &str) {
        let answers = self.dir.path().join("answers");
        for (ext, text) in [
            ("rc", rc.to_string()),
            ("out", out.into()),
            ("err", err.into()),
        ] {
            std::fs::write(answers.join(format!("{name}.{ext}")), text).unwrap();
        }
    }

    /// Every call so far, one argv a line.
    pub(crate) fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

//! The completion scripts in the real shells (bash, zsh and fish, from Debian): each loads
//! with no error and, asked as the shell asks at a TAB, completes subcommands and `--profile`
//! values from the profiles on disk. And `man DIR` writes a page per command that `man` reads.

use std::path::Path;
use std::process::Command;

use crate::harness::{scratch_dir, BIN};

/// Run `script` in `shell` with this binary first on PATH and a HERMES_HOME holding the
/// profiles `alpha` and `beta` (and the default profile's gateway.toml); stdout, or a panic
/// with stderr.
fn run(shell: &str, args: &[&str], script: &str) -> String {
    let home = scratch_dir("completions");
    for p in ["alpha", "beta"] {
        std::fs::create_dir_all(home.path().join("profiles").join(p)).unwrap();
    }
    std::fs::write(home.path().join("gateway.toml"), "").unwrap();
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let out = Command::new(shell)
        .args(args)
        .arg(script)
        .env("PATH", path)
        .env("HERMES_HOME", home.path())
        .env_remove("HERMES_SVC_COMPLETE")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {shell} (is it installed?): {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{shell}: {}\n{stderr}", out.status);
    assert!(stderr.trim().is_empty(), "{shell} said: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn words(out: &str) -> Vec<&str> {
    let mut w: Vec<&str> = out
        .lines()
        .map(|l| l.split(['\t', ':']).next().unwrap_or("").trim())
        .filter(|w| !w.is_empty())
        .collect();
    w.sort();
    w
}

#[test]
fn bash_completes_subcommands_and_profiles() {
    let ask = |line: &[&str], cword: usize| {
        let words = line
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" ");
        let current = line[cword];
        format!(
            "set -e\nsource <(hermes-svc completions bash)\ncomplete -p hermes-svc >/dev/null\n\
             COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_TYPE=9\n\
             _clap_complete_hermes_svc hermes-svc '{current}' '{}'\n\
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            line[cword - 1]
        )
    };
    let out = run("bash", &["-c"], &ask(&["hermes-svc", "sta"], 1));
    assert_eq!(words(&out), ["start", "status"], "{out}");
    let out = run(
        "bash",
        &["-c"],
        &ask(&["hermes-svc", "restart", "--profile", ""], 3),
    );
    assert_eq!(words(&out), ["alpha", "beta", "default"], "{out}");
    let out = run(
        "bash",
        &["-c"],
        &ask(&["hermes-svc", "status", "-p", "a"], 3),
    );
    assert_eq!(words(&out), ["alpha"], "{out}");
}

#[test]
fn zsh_loads_the_script_and_completes_subcommands_and_profiles() {
    // _describe is compsys's; here it prints what it was given, as the menu would show it.
    let ask = |line: &str, current: usize| {
        format!(
            "autoload -U compinit && compinit -u -D\nsource <(hermes-svc completions zsh)\n\
             [[ $_comps[hermes-svc] == _clap_dynamic_completer_hermes_svc ]] || exit 3\n\
             _describe() {{ print -l -- ${{(P)3}} }}\n\
             words=({line}); CURRENT={current}\n_clap_dynamic_completer_hermes_svc"
        )
    };
    let out = run("zsh", &["-f", "-c"], &ask("hermes-svc sta", 2));
    assert_eq!(words(&out), ["start", "status"], "{out}");
    let out = run(
        "zsh",
        &["-f", "-c"],
        &ask("hermes-svc doctor --profile ''", 4),
    );
    assert_eq!(words(&out), ["alpha", "beta", "default"], "{out}");
}

#[test]
fn zsh_completes_at_the_first_tab_from_the_script_autoloaded_from_fpath() {
    // As Debian's package installs it: `_hermes-svc` in a directory on $fpath, which compinit
    // registers by its #compdef line and runs as a function at the first TAB.
    let script = "d=$(mktemp -d)\nhermes-svc completions zsh > $d/_hermes-svc\nfpath=($d $fpath)\n\
                  autoload -U compinit && compinit -u -D\n\
                  [[ $_comps[hermes-svc] == _hermes-svc ]] || exit 3\n\
                  _describe() { print -l -- ${(P)3} }\n\
                  words=(hermes-svc sta); CURRENT=2\n_hermes-svc\nrm -r $d";
    let out = run("zsh", &["-f", "-c"], script);
    assert_eq!(words(&out), ["start", "status"], "{out}");
}

#[test]
fn fish_completes_subcommands_and_profiles() {
    let ask = |line: &str| {
        format!("hermes-svc completions fish | source\ncomplete --do-complete '{line}'")
    };
    let out = run("fish", &["--no-config", "-c"], &ask("hermes-svc sta"));
    assert_eq!(words(&out), ["start", "status"], "{out}");
    let out = run(
        "fish",
        &["--no-config", "-c"],
        &ask("hermes-svc events --profile b"),
    );
    assert_eq!(words(&out), ["beta"], "{out}");
}

#[test]
fn man_writes_a_page_per_command_that_man_renders() {
    let dir = scratch_dir("man");
    let out = Command::new(BIN)
        .args(["man"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for page in [
        "hermes-svc.1",
        "hermes-svc-install.1",
        "hermes-svc-doctor.1",
        "hermes-svc-reload.1",
        "hermes-svc-login-weixin.1",
        "hermes-svc-gateway-run.1",
    ] {
        assert!(dir.path().join(page).is_file(), "{page} missing");
    }
    let rendered = Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(dir.path().join("hermes-svc-install.1"))
        .env("MANWIDTH", "100")
        .output()
        .expect("man (man-db) is installed");
    let text = String::from_utf8_lossy(&rendered.stdout);
    assert!(rendered.status.success(), "{rendered:?}");
    assert!(
        text.contains("--profile") && text.contains("HERMES_HOME"),
        "{text}"
    );
}

//! Property test: generated values against the real parser that matters most, systemd's.
//!
//! Any environment value, `ExecStart` argument, executable path and `HERMES_HOME` is rendered by
//! the project's own renderer (`UnitSpec::render`, `DropIn::render`, `escape::exec_line`) and
//! parsed back by a real systemd user manager: the properties it reports over D-Bus, and the
//! argv a started unit really gets, equal the input. Or the value is refused: with an
//! `EscapeError` by the renderer, and with exit 2 by `install`. Cases are checked in batches
//! (write every unit and drop-in, one `daemon-reload`, one `start` for all), so 64 cases cost
//! two reloads. (`gateway.toml` has its property test in `property_toml.rs`.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use hermes_svc::profile::{Profile, ProfileName};
use hermes_svc::systemd::dropin::{self, DropIn};
use hermes_svc::systemd::escape::{self, EscapeError};
use hermes_svc::systemd::scope::Scope;
use hermes_svc::systemd::unit_file::{RenderError, UnitSpec};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use crate::harness::{scratch_dir, stderr, Manager};
use crate::odd_text::{text, unrepresentable, weighted_char};

/// Batches of cases through the manager, and cases per batch: 64 cases, two reloads.
const BATCHES: u32 = 2;
const BATCH_SIZE: usize = 32;

/// An absolute path: one to three components, some of them `.`, `..` or empty (`//`); the
/// last one names a file, so it is never empty. Fewer syntax characters than in values: four
/// of them make an executable's path unusable, and a case is more useful when it runs.
fn abs_path() -> impl Strategy<Value = String> {
    let component = || {
        prop_oneof![
            12 => proptest::collection::vec(weighted_char(120).prop_filter("no /", |c| *c != '/'), 1..=8)
                .prop_map(|v| v.into_iter().collect::<String>()),
            1 => Just(".".to_owned()),
            1 => Just("..".to_owned()),
            1 => Just(String::new()),
        ]
    };
    (proptest::collection::vec(component(), 0..=2), component())
        .prop_filter("the last component names a file", |(_, last)| {
            !last.is_empty() && last != "." && last != ".."
        })
        .prop_map(|(dirs, last)| {
            let mut p = String::new();
            for d in dirs.iter().chain([&last]) {
                p.push('/');
                p.push_str(d);
            }
            p
        })
}

fn env_name() -> impl Strategy<Value = String> {
    let head = prop_oneof![
        proptest::char::range('A', 'Z'),
        proptest::char::range('a', 'z'),
        Just('_'),
    ];
    let tail = prop_oneof![
        proptest::char::range('A', 'Z'),
        proptest::char::range('0', '9'),
        Just('_'),
    ];
    (head, proptest::collection::vec(tail, 0..=10))
        .prop_map(|(h, t)| std::iter::once(h).chain(t).collect::<String>())
        .prop_filter("not a name the manager or the unit owns", |n| {
            dropin::reserved_env(n).is_none()
        })
}

#[derive(Clone, Debug)]
struct Case {
    exec: String,
    hermes_home: String,
    env: BTreeMap<String, String>,
    args: Vec<String>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        abs_path(),
        abs_path(),
        proptest::collection::btree_map(env_name(), text(12), 0..=4),
        proptest::collection::vec(text(10), 0..=5),
    )
        .prop_map(|(exec, hermes_home, env, args)| Case {
            exec,
            hermes_home,
            env,
            args,
        })
}

/// What the renderer must refuse, and why, for each part of a case.
struct Expect {
    unit_refused: bool,
    dropin_refused: bool,
    args_refused: bool,
    /// `install` refuses the home and env values with exit 2.
    install_refused: bool,
}

impl Case {
    fn expect(&self) -> Expect {
        let bad = |s: &str| s.chars().any(unrepresentable);
        let home_bad = bad(&self.hermes_home);
        // systemd drops an `EnvironmentFile=` path that is not normalized.
        let dot_dot = Path::new(&self.hermes_home)
            .components()
            .any(|c| c == std::path::Component::ParentDir);
        let dropin_refused = self.env.values().any(|v| bad(v));
        let glob = self
            .hermes_home
            .chars()
            .any(|c| matches!(c, '*' | '?' | '[' | ']' | '\\'));
        Expect {
            unit_refused: home_bad
                || dot_dot
                || bad(&self.exec)
                || self
                    .exec
                    .chars()
                    .any(|c| matches!(c, '$' | '"' | '\'' | '\\')),
            dropin_refused,
            args_refused: self.args.iter().any(|a| bad(a)),
            install_refused: home_bad || dot_dot || glob || dropin_refused,
        }
    }
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A case rendered and written, waiting for the manager to read it back.
struct Written {
    case: Case,
    profile: Option<Profile>,
    unit: Option<String>,
    /// Whether our drop-in with the case's environment went with the unit.
    with_dropin: bool,
    recorder_unit: Option<String>,
    argv_file: PathBuf,
}

fn fail(case: &Case, what: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(format!("{what}\n  case: {case:#?}"))
}

fn is_refusal(e: &RenderError) -> bool {
    matches!(
        e,
        RenderError::ParentDirInPath(_)
            | RenderError::Escape(
                EscapeError::ControlCharacter { .. }
                    | EscapeError::Noncharacter { .. }
                    | EscapeError::UnsafeExecPath { .. }
            )
    )
}

/// `hermes-svc install --dry-run` with this case's home and env values: exit 0 or exit 2.
fn check_install_refusal(m: &Manager, case: &Case, expect: &Expect) -> Result<(), TestCaseError> {
    let name = format!("cli{}", NEXT.fetch_add(1, Ordering::SeqCst));
    let mut cmd = m.command(crate::harness::BIN);
    cmd.env("HERMES_HOME", &case.hermes_home).args([
        "install",
        "--profile",
        &name,
        "--dry-run",
        "--no-start",
    ]);
    for (k, v) in &case.env {
        cmd.arg("--env").arg(format!("{k}={v}"));
    }
    let out = cmd.output().unwrap();
    let want = if expect.install_refused { 2 } else { 0 };
    if out.status.code() != Some(want) {
        return Err(fail(
            case,
            format!(
                "install --dry-run exited {:?}, expected {want}: {}",
                out.status.code(),
                stderr(&out)
            ),
        ));
    }
    Ok(())
}

fn write_case(
    m: &Manager,
    recorder: &Path,
    out_dir: &Path,
    case: Case,
) -> Result<Written, TestCaseError> {
    let expect = case.expect();
    check_install_refusal(m, &case, &expect)?;
    let n = NEXT.fetch_add(1, Ordering::SeqCst);

    // The profile's unit and our drop-in, exactly as install renders them.
    let profile = Profile::new(
        ProfileName::parse(&format!("prop{n}")).unwrap(),
        PathBuf::from(&case.hermes_home),
    )
    .unwrap();
    let spec = UnitSpec {
        profile: profile.clone(),
        scope: Scope::User,
        exec: PathBuf::from(&case.exec),
        run_as: None,
        role: hermes_svc::service::role::Role::Gateway,
    };
    let dropin = DropIn {
        env: case.env.clone(),
        ..DropIn::default()
    };
    let (unit_r, dropin_r) = (spec.render(), dropin.render());
    let unit_as_expected = match &unit_r {
        Ok(_) => !expect.unit_refused,
        Err(e) => expect.unit_refused && is_refusal(e),
    };
    let dropin_as_expected = match &dropin_r {
        Ok(_) => !expect.dropin_refused,
        Err(dropin::DropInError::Escape { source, .. }) => {
            expect.dropin_refused
                && matches!(
                    source,
                    EscapeError::ControlCharacter { .. } | EscapeError::Noncharacter { .. }
                )
        }
        Err(_) => false,
    };
    if !(unit_as_expected && dropin_as_expected) {
        return Err(fail(
            &case,
            format!("render: unit {unit_r:?}, drop-in {dropin_r:?}"),
        ));
    }
    let unit = unit_r.ok().map(|text| {
        let name = profile.unit_name();
        std::fs::write(m.unit_dir().join(&name), text).unwrap();
        name
    });
    // The drop-in goes with its unit; on its own, there is nothing to read it back from.
    let with_dropin = match (&unit, dropin_r) {
        (Some(name), Ok(text)) => {
            let dir = m.unit_dir().join(format!("{name}.d"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(dropin::DROPIN_NAME), text).unwrap();
            true
        }
        _ => false,
    };

    // A oneshot unit whose command line is the recorder and the case's arguments.
    let argv_file = out_dir.join(format!("argv-{n}"));
    let mut argv = vec![recorder.display().to_string()];
    argv.extend(case.args.iter().cloned());
    let recorder_unit = match escape::exec_line(&argv) {
        Ok(line) if !expect.args_refused => {
            let name = format!("hsvprop-{n}.service");
            std::fs::write(
                m.unit_dir().join(&name),
                format!(
                    "[Service]\nType=oneshot\nStandardOutput=truncate:{}\nExecStart={line}\n",
                    argv_file.display()
                ),
            )
            .unwrap();
            Some(name)
        }
        Err(EscapeError::ControlCharacter { .. } | EscapeError::Noncharacter { .. })
            if expect.args_refused =>
        {
            None
        }
        r => return Err(fail(&case, format!("exec_line: {r:?}"))),
    };
    Ok(Written {
        case,
        profile: unit.as_ref().map(|_| profile),
        unit,
        with_dropin,
        recorder_unit,
        argv_file,
    })
}

/// Properties of a unit's `Service` interface, one JSON value per name, as busctl prints them.
fn service_props(m: &Manager, unit: &str, names: &[&str]) -> Vec<serde_json::Value> {
    let path = hermes_svc::systemd::unit_object_path(unit);
    let out = m
        .command("busctl")
        .args(["--user", "--json=short", "get-property"])
        .args(["org.freedesktop.systemd1", path.as_str()])
        .arg("org.freedesktop.systemd1.Service")
        .args(names)
        .output()
        .unwrap();
    assert!(out.status.success(), "busctl: {}", stderr(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["data"].clone())
        .collect()
}

/// `LoadState` of every unit, in one call.
fn load_states(m: &Manager, units: &[&str]) -> BTreeMap<String, String> {
    let out = m
        .command("systemctl")
        .args(["--user", "show", "-p", "Id", "-p", "LoadState"])
        .args(units)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.split("\n\n")
        .filter_map(|block| {
            let get = |k: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
                    .map(str::to_owned)
            };
            Some((get("Id")?, get("LoadState")?))
        })
        .collect()
}

fn check_unit(
    m: &Manager,
    w: &Written,
    unit: &str,
    load: &BTreeMap<String, String>,
) -> Result<(), TestCaseError> {
    let case = &w.case;
    let profile = w.profile.as_ref().unwrap();
    if load.get(unit).map(String::as_str) != Some("loaded") {
        return Err(fail(
            case,
            format!("{unit}: LoadState {:?}", load.get(unit)),
        ));
    }
    let props = service_props(m, unit, &["ExecStart", "Environment", "EnvironmentFiles"]);
    let (exec, env, env_files) = (&props[0], &props[1], &props[2]);

    // systemd simplifies the program's path (`//` and `/./`, as Path's comparison does) and
    // keeps argv[0] as written.
    let path = exec[0][0].as_str().unwrap_or_default();
    let argv: Vec<String> = serde_json::from_value(exec[0][1].clone()).unwrap_or_default();
    let want_argv = [
        &case.exec,
        "gateway",
        "run",
        "--profile",
        profile.name().as_str(),
    ];
    if exec.as_array().map(Vec::len) != Some(1)
        || Path::new(path) != Path::new(&case.exec)
        || argv != want_argv
    {
        return Err(fail(case, format!("{unit}: ExecStart {exec}")));
    }

    let env: Vec<String> = serde_json::from_value(env.clone()).unwrap();
    let mut want_env = vec![format!("HERMES_HOME={}", case.hermes_home)];
    if w.with_dropin {
        want_env.extend(case.env.iter().map(|(k, v)| format!("{k}={v}")));
    }
    if env != want_env {
        return Err(fail(
            case,
            format!("{unit}: Environment {env:?}, expected {want_env:?}"),
        ));
    }

    let files: Vec<(String, bool)> = serde_json::from_value(env_files.clone()).unwrap();
    let want_file = profile.env_file();
    if files.len() != 1 || Path::new(&files[0].0) != want_file || !files[0].1 {
        return Err(fail(
            case,
            format!("{unit}: EnvironmentFiles {files:?}, expected [({want_file:?}, true)]"),
        ));
    }
    Ok(())
}

fn check_recorder(m: &Manager, w: &Written, unit: &str) -> Result<(), TestCaseError> {
    let case = &w.case;
    // Over D-Bus, the command line is as the manager parsed it: `$` is still `$$`, which
    // only the spawn undoes.
    let exec = &service_props(m, unit, &["ExecStart"])[0];
    let argv: Vec<String> = serde_json::from_value(exec[0][1].clone()).unwrap_or_default();
    let parsed: Vec<String> = case.args.iter().map(|a| a.replace('$', "$$")).collect();
    if argv.get(1..) != Some(&parsed[..]) {
        return Err(fail(case, format!("{unit}: ExecStart {exec}")));
    }
    // What the program really got.
    let raw = std::fs::read(&w.argv_file)
        .map_err(|e| fail(case, format!("{unit} left no argv ({e})")))?;
    // One NUL-terminated word per argument.
    let got: Vec<String> = match raw.strip_suffix(b"\0") {
        None => vec![String::from_utf8_lossy(&raw).into_owned()],
        Some(words) => words
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    };
    let got = if raw.is_empty() { vec![] } else { got };
    if got != case.args {
        return Err(fail(case, format!("{unit} ran with argv {got:?}")));
    }
    Ok(())
}

/// Removes a batch's unit files when the batch is done, so that every reload reads only the
/// batch at hand.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p).or_else(|_| std::fs::remove_dir_all(p));
        }
    }
}

fn run_batch(
    m: &Manager,
    recorder: &Path,
    out_dir: &Path,
    cases: Vec<Case>,
) -> Result<(), TestCaseError> {
    let started = Instant::now();
    let total = cases.len();
    let mut cleanup = Cleanup(vec![]);
    let mut written = vec![];
    // Every failing case of the batch is reported, not only the first.
    let mut failures: Vec<String> = vec![];
    for c in cases {
        match write_case(m, recorder, out_dir, c) {
            Ok(w) => {
                for unit in w.unit.iter().chain(&w.recorder_unit) {
                    cleanup.0.push(m.unit_dir().join(unit));
                    cleanup.0.push(m.unit_dir().join(format!("{unit}.d")));
                }
                cleanup.0.push(w.argv_file.clone());
                written.push(w);
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    let reload = m.systemctl(&["daemon-reload"]);
    assert!(
        reload.status.success(),
        "daemon-reload: {}",
        stderr(&reload)
    );

    let units: Vec<&str> = written.iter().filter_map(|w| w.unit.as_deref()).collect();
    let dropins = written.iter().filter(|w| w.with_dropin).count();
    let load = load_states(m, &units);
    for w in &written {
        if let Some(unit) = &w.unit {
            failures.extend(check_unit(m, w, unit, &load).err().map(|e| e.to_string()));
        }
    }
    let recorders: Vec<&str> = written
        .iter()
        .filter_map(|w| w.recorder_unit.as_deref())
        .collect();
    if !recorders.is_empty() {
        // One start for all; a recorder that did not run shows up as a missing argv below.
        let start = m.systemctl(&[&["start"], &recorders[..]].concat());
        if !start.status.success() {
            failures.push(format!("start: {}", stderr(&start)));
        }
    }
    for w in &written {
        if let Some(unit) = &w.recorder_unit {
            failures.extend(check_recorder(m, w, unit).err().map(|e| e.to_string()));
        }
    }
    eprintln!(
        "batch of {total}: {} units ({dropins} with a drop-in) and {} command lines round-tripped, {} failures, in {:?}",
        units.len(),
        recorders.len(),
        failures.len(),
        started.elapsed()
    );
    if failures.is_empty() {
        Ok(())
    } else {
        Err(TestCaseError::fail(format!(
            "{} of {total} cases failed:\n{}",
            failures.len(),
            failures.join("\n")
        )))
    }
}

#[test]
fn rendered_values_come_back_exactly_from_the_manager_or_are_refused() {
    let m = Manager::boot();
    let dir = scratch_dir("prop");
    let recorder = dir.path().join("argv-recorder");
    std::fs::write(
        &recorder,
        "#!/bin/sh\nfor a do printf '%s\\0' \"$a\"; done\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &recorder,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut runner = TestRunner::new(Config {
        cases: BATCHES,
        // Every shrink step is a batch through the manager; the failure names its case anyway.
        max_shrink_iters: 16,
        failure_persistence: None,
        ..Config::default()
    });
    let started = Instant::now();
    let result = runner.run(&proptest::collection::vec(case(), BATCH_SIZE), |cases| {
        run_batch(&m, &recorder, dir.path(), cases)
    });
    eprintln!(
        "{} cases through the manager in {:?}",
        BATCHES as usize * BATCH_SIZE,
        started.elapsed()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

use std::os::unix::fs::symlink;

use super::*;

/// A search path of two directories, as a user manager has (`~/.config/systemd/user` before
/// the vendor one), in a temp dir.
struct Tree {
    _tmp: tempfile::TempDir,
    config: PathBuf,
    vendor: PathBuf,
}

impl Tree {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("config");
        let vendor = tmp.path().join("vendor");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::create_dir_all(&vendor).unwrap();
        Self {
            _tmp: tmp,
            config,
            vendor,
        }
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.config.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn search(&self) -> SearchPath {
        SearchPath::read(vec![
            self.config.to_string_lossy().into_owned(),
            self.vendor.to_string_lossy().into_owned(),
            "/nonexistent/dir".into(),
        ])
    }
}

fn specifiers() -> Vec<(char, String)> {
    vec![('h', "/home/al".into()), ('u', "al".into())]
}

fn argv(p: &UnitProperties) -> Vec<Vec<String>> {
    p.exec_argv()
}

#[test]
fn a_plain_unit_reads_as_the_manager_would_report_it() {
    let t = Tree::new();
    t.write(
        "hermes.service",
        "[Unit]\nDescription=x\n[Service]\nType=notify\nExecStart=/usr/bin/env \"a b\" %h/.hermes 100%% $$HOME \\\n  gateway run --replace\nEnvironment=HERMES_HOME=%h/.h \"X=1 2\"\nEnvironment=X=3\nWatchdogSec=1min 30s\nRestart=on-failure\n[Install]\nWantedBy=default.target\n",
    );
    let p = read(&t.search(), &specifiers(), "hermes.service").unwrap();
    assert_eq!(p.id.as_deref(), Some("hermes.service"));
    assert_eq!(
        argv(&p),
        vec![vec![
            "/usr/bin/env",
            "a b",
            "/home/al/.hermes",
            "100%",
            "$$HOME",
            "gateway",
            "run",
            "--replace"
        ]]
    );
    assert_eq!(
        p.environment.as_deref().unwrap(),
        ["HERMES_HOME=/home/al/.h", "X=3"]
    );
    assert_eq!(p.watchdog_usec, Some(90_000_000));
    assert_eq!(p.restart.as_deref(), Some("on-failure"));
    assert_eq!(p.service_type.as_deref(), Some("notify"));
    assert_eq!(p.unit_file_state.as_deref(), Some("disabled"));
    assert_eq!(p.active_state.as_deref(), Some("inactive"));
    assert_eq!(p.main_pid, Some(0));
    assert_eq!(p.need_daemon_reload, Some(false));
}

#[test]
fn drop_ins_apply_in_file_name_order_and_reset_lists() {
    let t = Tree::new();
    t.write(
        "hermes-gateway-a.service",
        "[Service]\nExecStart=/bin/true old\nEnvironment=A=1 B=2\nWatchdogSec=30\n",
    );
    t.write(
        "hermes-gateway-a.service.d/50-hermes-svc.conf",
        "[Service]\nWatchdogSec=60\nEnvironment=\"C=3\"\n",
    );
    t.write(
        "hermes-gateway-a.service.d/override.conf",
        "[Service]\nExecStart=\nExecStart=-/bin/true new\nEnvironment=\nEnvironment=D=4\n",
    );
    // A prefix drop-in applies to every hermes-gateway-*.service, a vendor one under the same
    // file name as ours is shadowed, and a file that is not .conf is no drop-in.
    t.write(
        "hermes-gateway-.service.d/10-all.conf",
        "[Service]\nRestart=always\n",
    );
    std::fs::create_dir_all(t.vendor.join("hermes-gateway-a.service.d")).unwrap();
    std::fs::write(
        t.vendor.join("hermes-gateway-a.service.d/override.conf"),
        "[Service]\nRestart=no\n",
    )
    .unwrap();
    t.write(
        "hermes-gateway-a.service.d/notes.txt",
        "[Service]\nType=exec\n",
    );
    let p = read(&t.search(), &specifiers(), "hermes-gateway-a.service").unwrap();
    assert_eq!(argv(&p), vec![vec!["/bin/true", "new"]]);
    assert!(
        p.exec_start.as_ref().unwrap()[0].2,
        "- means ignore failure"
    );
    assert_eq!(p.environment.as_deref().unwrap(), ["D=4"]);
    assert_eq!(p.watchdog_usec, Some(60_000_000));
    assert_eq!(p.restart.as_deref(), Some("always"));
    assert_eq!(p.service_type.as_deref(), Some("simple"));
    let names: Vec<String> = p
        .drop_in_paths
        .unwrap()
        .iter()
        .map(|d| d.rsplit('/').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        ["10-all.conf", "50-hermes-svc.conf", "override.conf"]
    );
}

#[test]
fn enablement_aliases_and_masks() {
    let t = Tree::new();
    t.write(
        "hermes-gateway-b.service",
        "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=default.target\n",
    );
    std::fs::create_dir_all(t.config.join("default.target.wants")).unwrap();
    symlink(
        t.config.join("hermes-gateway-b.service"),
        t.config
            .join("default.target.wants/hermes-gateway-b.service"),
    )
    .unwrap();
    symlink("hermes-gateway-b.service", t.config.join("hermes.service")).unwrap();
    symlink("/dev/null", t.config.join("hermes-gateway-m.service")).unwrap();
    // `systemctl link`: the file lives elsewhere under the same name.
    let elsewhere = t.vendor.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let outside = elsewhere.join("hermes-gateway-l.service");
    std::fs::write(&outside, "[Service]\nExecStart=/bin/true\n").unwrap();
    symlink(&outside, t.config.join("hermes-gateway-l.service")).unwrap();
    t.write(
        "hermes-gateway-s.service",
        "[Service]\nExecStart=/bin/true\n",
    );

    let s = t.search();
    assert_eq!(
        s.unit_names(&["hermes-gateway*.service", "hermes.service"]),
        [
            "hermes-gateway-b.service",
            "hermes-gateway-l.service",
            "hermes-gateway-m.service",
            "hermes-gateway-s.service",
            "hermes.service"
        ]
    );
    let b = read(&s, &specifiers(), "hermes-gateway-b.service").unwrap();
    assert_eq!(b.unit_file_state.as_deref(), Some("enabled"));
    let alias = read(&s, &specifiers(), "hermes.service").unwrap();
    assert_eq!(alias.id.as_deref(), Some("hermes-gateway-b.service"));
    assert_eq!(alias.fragment_path, b.fragment_path);
    let m = read(&s, &specifiers(), "hermes-gateway-m.service").unwrap();
    assert_eq!(m.load_state.as_deref(), Some("masked"));
    assert!(m.exec_start.is_none());
    assert!(read(&s, &specifiers(), "hermes-gateway-l.service").is_err());
    let st = read(&s, &specifiers(), "hermes-gateway-s.service").unwrap();
    assert_eq!(st.unit_file_state.as_deref(), Some("static"));
}

#[test]
fn what_this_reader_cannot_reproduce_is_left_to_the_manager() {
    let t = Tree::new();
    for (name, text) in [
        ("q1.service", "[Service]\nExecStart=/bin/echo %a\n"),
        ("q2.service", "[Service]\nExecStart=/bin/echo \"open\n"),
        (
            "q3.service",
            "[Service]\nExecStart=/bin/echo a ; /bin/echo \";\"\n",
        ),
        ("q4.service", "[Service]\nExecStart=/bin/q\"uote\n"),
        (
            "q5.service",
            "[Service]\nExecStart=no-such-program-anywhere\n",
        ),
        ("q6.service", "[Service]\nWatchdogSec=soon\n"),
    ] {
        t.write(name, text);
    }
    let s = t.search();
    for name in ["q1", "q2", "q3", "q4", "q5", "q6"] {
        let r = read(&s, &specifiers(), &format!("{name}.service"));
        assert!(r.is_err(), "{name}: {r:?}");
    }
    assert!(read(&s, &specifiers(), "x@y.service").is_err());
    assert!(read(&s, &specifiers(), "absent.service").is_err());
}

#[test]
fn commands_split_on_a_bare_semicolon_and_take_argv0_from_at() {
    let t = Tree::new();
    t.write(
        "c.service",
        "[Service]\nType=oneshot\nExecStart=@/bin/sh name -c 'exit 0' ; -true arg\n",
    );
    let p = read(&t.search(), &specifiers(), "c.service").unwrap();
    let cmds = p.exec_start.unwrap();
    assert_eq!(cmds[0].0, "/bin/sh");
    assert_eq!(cmds[0].1, ["name", "-c", "exit 0"]);
    assert!(cmds[1].0.ends_with("/true"), "{:?}", cmds[1]);
    assert_eq!(cmds[1].1[1], "arg");
}

#[test]
fn time_spans() {
    assert_eq!(time_span_usec("30").unwrap(), 30_000_000);
    assert_eq!(time_span_usec("1.5").unwrap(), 1_500_000);
    assert_eq!(time_span_usec("500ms").unwrap(), 500_000);
    assert_eq!(time_span_usec("2min 3s").unwrap(), 123_000_000);
    assert_eq!(time_span_usec("infinity").unwrap(), u64::MAX);
    assert_eq!(time_span_usec("").unwrap(), u64::MAX);
    assert_eq!(time_span_usec("0").unwrap(), 0);
    assert!(time_span_usec("-1").is_err());
}

#[test]
fn globs_match_like_unit_patterns() {
    let p = "hermes-gateway*.service";
    assert!(glob_matches(p, "hermes-gateway.service"));
    assert!(glob_matches(p, "hermes-gateway-coder.service"));
    assert!(!glob_matches(p, "hermes-gateway-coder.service.d"));
    assert!(!glob_matches(p, "hermes.service"));
    assert!(glob_matches("hermes.service", "hermes.service"));
    assert!(glob_matches("*", ""));
    assert!(glob_matches("a*b*c", "aXbYbc"));
    assert!(!glob_matches("a*b*c", "aXbY"));
}

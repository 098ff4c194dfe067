//! `status` as a person reads it: an aligned table, coloured on a real terminal (a pty from
//! script(1)), plain through a pipe and under `NO_COLOR`.

use crate::harness::{stdout, BIN};
use crate::profile_builder::ProfileTest;

#[test]
fn status_is_a_table_coloured_only_on_a_terminal() {
    let t = ProfileTest::new("sttable").config("").run();
    let m = &t.m;
    let piped = stdout(&m.hermes(&["status"]));
    let header = piped.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("PROFILE") && header.contains("RESTARTS"),
        "{piped}"
    );
    assert!(piped.contains("active/running"), "{piped}");
    assert!(!piped.contains('\x1b'), "{piped:?}");
    let on_tty = |no_color: Option<&str>| {
        let mut cmd = m.command("script");
        cmd.args(["-qec", &format!("{BIN} status"), "/dev/null"])
            .env_remove("NO_COLOR");
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        stdout(&cmd.output().unwrap())
    };
    let tty = on_tty(None);
    assert!(tty.contains("\x1b[1mPROFILE"), "{tty:?}");
    assert!(tty.contains("\x1b[32mactive/running"), "{tty:?}");
    let tty = on_tty(Some("1"));
    assert!(
        tty.contains("active/running") && !tty.contains('\x1b'),
        "{tty:?}"
    );
}

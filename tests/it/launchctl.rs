//! The launchctl runner against a recording fake `launchctl`: each operation's exact argv, the
//! retry of a refused `bootstrap`, the headless domain, and status read from realistic output.
//!
//! There is no launchd here, so the recording fake of [`crate::fake_launchctl`] stands in for
//! it. The stderr texts are launchctl's real ones, quoted in the issue threads named beside
//! them. Each test has its own fake, reached by path, so tests run in parallel without touching
//! `PATH`.

use std::path::PathBuf;
use std::time::Duration;

use hermes_svc::launchd::launchctl::{
    Domain, JobState, LastExit, Launchctl, LaunchctlError, Service, Unloaded,
};

use crate::fake_launchctl::{Fake, NOT_FOUND_ERR};
use crate::harness::scratch_dir;

const LABEL: &str = "ai.hermes.gateway.coder";
const UID: u32 = 501;

/// Homebrew/homebrew-services#528.
const EIO_ERR: &str =
    "Bootstrap failed: 5: Input/output error\nTry re-running the command as root for richer errors.\n";

const RUNNING_GUI: &str =
    include_str!("../../src/launchd/launchctl/print/fixtures/running_gui.txt");
const NOT_RUNNING_GUI: &str =
    include_str!("../../src/launchd/launchctl/print/fixtures/not_running_gui.txt");

/// This file's own uses of the shared fake: a plist path beside it and a runner for it.
impl Fake {
    fn plist(&self) -> PathBuf {
        self.dir.path().join(format!("{LABEL}.plist"))
    }

    fn runner(&self, domain: Domain) -> Launchctl {
        Launchctl::new(self.program(), domain)
            .with_bootout_wait(Duration::from_secs(5), Duration::from_millis(10))
    }
}

fn gui() -> Domain {
    Domain::Gui(UID)
}

fn t() -> String {
    format!("gui/{UID}/{LABEL}")
}

#[tokio::test]
async fn install_is_bootstrap_enable_kickstart() {
    let fake = Fake::new();
    fake.runner(gui())
        .install(LABEL, &fake.plist())
        .await
        .unwrap();
    let p = fake.plist().display().to_string();
    assert_eq!(
        fake.calls(),
        [
            format!("bootstrap gui/501 {p}"),
            format!("enable {}", t()),
            format!("kickstart {}", t()),
        ]
    );
}

#[tokio::test]
async fn reinstall_unchanged_only_asks_whether_the_job_is_loaded() {
    let fake = Fake::new();
    let running = RUNNING_GUI.replace("com.dev.weekly-cache-cleanup = {", &format!("{LABEL} = {{"));
    fake.answer("print", 0, &running, "");
    assert!(fake.runner(gui()).is_loaded(LABEL).await.unwrap());
    assert_eq!(fake.calls(), [format!("print {}", t())]);
}

#[tokio::test]
async fn reinstall_changed_boots_out_waits_then_installs() {
    let fake = Fake::new();
    // launchd still has the job on the first look after bootout, and lets go by the second.
    fake.answer_nth(
        "print",
        1,
        0,
        &format!("{} = {{\n\tstate = running\n\tpid = 4242\n}}\n", t()),
        "",
    );
    fake.runner(gui())
        .reinstall(LABEL, &fake.plist())
        .await
        .unwrap();
    let p = fake.plist().display().to_string();
    assert_eq!(
        fake.calls(),
        [
            format!("bootout {}", t()),
            format!("print {}", t()),
            format!("print {}", t()),
            format!("bootstrap gui/501 {p}"),
            format!("enable {}", t()),
            format!("kickstart {}", t()),
        ]
    );
}

#[tokio::test]
async fn restart_is_kickstart_k() {
    let fake = Fake::new();
    fake.runner(gui()).restart(LABEL).await.unwrap();
    assert_eq!(fake.calls(), [format!("kickstart -k {}", t())]);
}

#[tokio::test]
async fn restart_of_a_job_that_is_not_loaded_fails_with_113() {
    let fake = Fake::new();
    fake.answer("kickstart", 113, "", NOT_FOUND_ERR);
    let err = fake.runner(gui()).restart(LABEL).await.unwrap_err();
    assert_eq!(err.exit_code(), Some(113));
    assert!(
        err.to_string().contains("is it loaded in user/501"),
        "{err}"
    );
}

#[tokio::test]
async fn stop_is_bootout_so_keepalive_cannot_respawn_it() {
    let fake = Fake::new();
    let stopped = fake.runner(gui()).stop(LABEL).await.unwrap();
    assert_eq!(stopped, Unloaded::WasLoaded);
    assert_eq!(
        fake.calls(),
        [format!("bootout {}", t()), format!("print {}", t())]
    );
    assert!(
        !fake
            .calls()
            .iter()
            .any(|c| c.starts_with("stop ") || c.starts_with("kill ")),
        "launchctl stop/kill under KeepAlive only respawns the job"
    );
}

#[tokio::test]
async fn stop_of_a_job_that_is_not_loaded_is_not_an_error() {
    let fake = Fake::new();
    // nix-community/home-manager#9585.
    fake.answer("bootout", 3, "", "Boot-out failed: 3: No such process\n");
    let stopped = fake.runner(gui()).stop(LABEL).await.unwrap();
    assert_eq!(stopped, Unloaded::WasNotLoaded);
}

#[tokio::test]
async fn start_after_stop_is_bootstrap_then_kickstart() {
    let fake = Fake::new();
    fake.runner(gui())
        .start(LABEL, &fake.plist())
        .await
        .unwrap();
    let p = fake.plist().display().to_string();
    assert_eq!(
        fake.calls(),
        [
            format!("print {}", t()),
            format!("bootstrap gui/501 {p}"),
            format!("kickstart {}", t()),
        ]
    );
}

#[tokio::test]
async fn start_of_a_loaded_job_does_not_boot_it_out() {
    let fake = Fake::new();
    fake.answer(
        "print",
        0,
        &format!("{} = {{\n\tstate = not running\n}}\n", t()),
        "",
    );
    fake.runner(gui())
        .start(LABEL, &fake.plist())
        .await
        .unwrap();
    assert_eq!(
        fake.calls(),
        [format!("print {}", t()), format!("kickstart {}", t())]
    );
}

#[tokio::test]
async fn uninstall_is_bootout() {
    let fake = Fake::new();
    fake.runner(gui()).uninstall(LABEL).await.unwrap();
    assert_eq!(
        fake.calls(),
        [format!("bootout {}", t()), format!("print {}", t())]
    );
}

#[tokio::test]
async fn a_bootstrap_refused_with_5_is_booted_out_and_retried_once() {
    let fake = Fake::new();
    fake.answer_nth("bootstrap", 1, 5, "", EIO_ERR);
    fake.runner(gui())
        .install(LABEL, &fake.plist())
        .await
        .unwrap();
    let p = fake.plist().display().to_string();
    assert_eq!(
        fake.calls(),
        [
            format!("bootstrap gui/501 {p}"),
            format!("bootout {}", t()),
            format!("print {}", t()),
            format!("bootstrap gui/501 {p}"),
            format!("enable {}", t()),
            format!("kickstart {}", t()),
        ]
    );
}

#[tokio::test]
async fn a_bootstrap_refused_with_37_is_retried_the_same_way() {
    let fake = Fake::new();
    // Homebrew/homebrew-core#132781.
    fake.answer_nth(
        "bootstrap",
        1,
        37,
        "",
        "Bootstrap failed: 37: Operation already in progress\n",
    );
    fake.runner(gui())
        .install(LABEL, &fake.plist())
        .await
        .unwrap();
    assert_eq!(fake.calls().len(), 6, "{:?}", fake.calls());
}

#[tokio::test]
async fn a_bootstrap_that_keeps_failing_is_reported_and_nothing_else_runs() {
    let fake = Fake::new();
    fake.answer("bootstrap", 5, "", EIO_ERR);
    let err = fake
        .runner(gui())
        .install(LABEL, &fake.plist())
        .await
        .unwrap_err();
    let p = fake.plist().display().to_string();
    assert_eq!(
        fake.calls(),
        [
            format!("bootstrap gui/501 {p}"),
            format!("bootout {}", t()),
            format!("print {}", t()),
            format!("bootstrap gui/501 {p}"),
        ],
        "one retry, then no enable or kickstart, and no other way of starting the gateway"
    );
    assert_eq!(err.exit_code(), Some(5));
    assert!(err.stderr().unwrap().contains("Input/output error"));
    let msg = err.to_string();
    for needle in [
        format!("bootstrap gui/501 {p}").as_str(),
        "exit status 5",
        "Bootstrap failed: 5: Input/output error",
        "hint: launchd refused it again",
        "plutil -lint",
        "user/501",
    ] {
        assert!(msg.contains(needle), "{needle:?} not in {msg}");
    }
}

#[tokio::test]
async fn a_gui_domain_that_refuses_the_job_points_at_the_user_domain_and_is_not_retried() {
    let fake = Fake::new();
    // duh17/oppi#31: a headless Mac.
    fake.answer(
        "bootstrap",
        125,
        "",
        "Bootstrap failed: 125: Domain does not support specified action\n",
    );
    let err = fake
        .runner(gui())
        .install(LABEL, &fake.plist())
        .await
        .unwrap_err();
    assert_eq!(fake.calls().len(), 1, "{:?}", fake.calls());
    assert_eq!(err.exit_code(), Some(125));
    assert!(err.to_string().contains("use the user/501 domain"), "{err}");
}

#[tokio::test]
async fn a_headless_session_is_detected_and_uses_the_user_domain() {
    let fake = Fake::new();
    // The probe: Wamphyre/macOS_Silverback-Debloater#2, exit status per duh17/oppi#38.
    fake.answer_nth(
        "print",
        1,
        112,
        "",
        "Could not find domain for user gui: 501\n",
    );
    let runner = Launchctl::detect(fake.program(), UID).await.unwrap();
    assert_eq!(runner.domain(), Domain::User(UID));
    runner.install(LABEL, &fake.plist()).await.unwrap();
    let p = fake.plist().display().to_string();
    assert_eq!(
        fake.calls(),
        [
            "print gui/501".to_owned(),
            format!("bootstrap user/501 {p}"),
            format!("enable user/501/{LABEL}"),
            format!("kickstart user/501/{LABEL}"),
        ]
    );
}

#[tokio::test]
async fn a_headless_mac_answering_125_to_the_probe_also_uses_the_user_domain() {
    let fake = Fake::new();
    fake.answer_nth(
        "print",
        1,
        125,
        "",
        "Domain does not support specified action\n",
    );
    let runner = Launchctl::detect(fake.program(), UID).await.unwrap();
    assert_eq!(runner.domain(), Domain::User(UID));
}

#[tokio::test]
async fn a_gui_login_is_detected() {
    let fake = Fake::new();
    fake.answer_nth("print", 1, 0, "gui/501 = {\n}\n", "");
    let runner = Launchctl::detect(fake.program(), UID).await.unwrap();
    assert_eq!(runner.domain(), Domain::Gui(UID));
}

#[tokio::test]
async fn a_probe_that_fails_otherwise_is_an_error_not_a_guess() {
    let fake = Fake::new();
    fake.answer_nth("print", 1, 1, "", "Operation not permitted\n");
    let err = Launchctl::detect(fake.program(), UID).await.unwrap_err();
    assert_eq!(err.exit_code(), Some(1));
    assert!(err.to_string().contains("name the domain"), "{err}");
}

#[tokio::test]
async fn status_reads_a_running_job() {
    let fake = Fake::new();
    fake.answer("print", 0, RUNNING_GUI, "");
    let label = "com.dev.weekly-cache-cleanup";
    let Service::Loaded(status) = fake.runner(gui()).status(label).await.unwrap() else {
        panic!("not loaded");
    };
    assert_eq!(status.state, JobState::Running);
    assert_eq!(status.pid, Some(16090));
    assert_eq!(status.runs, Some(2));
    assert_eq!(fake.calls(), [format!("print gui/501/{label}")]);
}

#[tokio::test]
async fn status_reads_a_job_that_is_not_running_with_its_last_exit_status() {
    let fake = Fake::new();
    let label = "org.sessiometer.agent";
    let runner = fake.runner(Domain::Gui(502));
    fake.answer("print", 0, NOT_RUNNING_GUI, "");
    let Service::Loaded(status) = runner.status(label).await.unwrap() else {
        panic!("not loaded");
    };
    assert_eq!(status.state, JobState::NotRunning);
    assert_eq!(status.pid, None);
    assert_eq!(status.last_exit, LastExit::Code(0));

    let failed = NOT_RUNNING_GUI.replace("last exit code = 0", "last exit code = 78: EX_CONFIG");
    fake.answer("print", 0, &failed, "");
    let Service::Loaded(status) = runner.status(label).await.unwrap() else {
        panic!("not loaded");
    };
    assert_eq!(status.state, JobState::NotRunning);
    assert_eq!(status.last_exit, LastExit::Code(78));
    assert_eq!(status.last_exit.to_string(), "exit status 78");
}

#[tokio::test]
async fn status_of_garbage_is_unknown_never_a_state() {
    let fake = Fake::new();
    fake.answer(
        "print",
        0,
        "launchd is having a bad day\n\tstate = not running\n",
        "",
    );
    let Service::Loaded(status) = fake.runner(gui()).status(LABEL).await.unwrap() else {
        panic!("exit 0 is loaded");
    };
    assert_eq!(status.state, JobState::Unknown);
    assert_eq!(status.pid, None);
    assert_eq!(status.last_exit, LastExit::Unknown);
    assert_eq!(status.runs, None);
}

#[tokio::test]
async fn status_of_a_job_launchd_does_not_have_is_not_loaded() {
    let fake = Fake::new();
    assert_eq!(
        fake.runner(gui()).status(LABEL).await.unwrap(),
        Service::NotLoaded
    );
}

#[tokio::test]
async fn status_that_launchctl_cannot_give_is_an_error() {
    let fake = Fake::new();
    fake.answer("print", 1, "", "Operation not permitted\n");
    let err = fake.runner(gui()).status(LABEL).await.unwrap_err();
    assert_eq!(err.exit_code(), Some(1));
}

#[tokio::test]
async fn a_job_launchd_will_not_let_go_of_is_reported() {
    let fake = Fake::new();
    fake.answer(
        "print",
        0,
        &format!("{} = {{\n\tstate = running\n}}\n", t()),
        "",
    );
    let err = Launchctl::new(fake.program(), gui())
        .with_bootout_wait(Duration::from_millis(100), Duration::from_millis(20))
        .stop(LABEL)
        .await
        .unwrap_err();
    assert!(matches!(err, LaunchctlError::StillLoaded { .. }), "{err}");
    assert!(err.to_string().contains(&t()), "{err}");
}

#[tokio::test]
async fn a_launchctl_that_hangs_is_stopped() {
    let fake = Fake::new();
    std::fs::write(fake.dir.path().join("answers/kickstart.sleep"), "3").unwrap();
    let err = fake
        .runner(gui())
        .with_call_timeout(Duration::from_millis(200))
        .restart(LABEL)
        .await
        .unwrap_err();
    assert!(matches!(err, LaunchctlError::TimedOut { .. }), "{err}");
    assert!(err.to_string().contains("kickstart -k"), "{err}");
}

#[tokio::test]
async fn no_launchctl_is_a_clear_error() {
    let dir = scratch_dir("no-launchctl");
    let err = Launchctl::new(dir.path().join("launchctl"), gui())
        .restart(LABEL)
        .await
        .unwrap_err();
    assert!(matches!(err, LaunchctlError::Spawn { .. }), "{err}");
    assert!(err.to_string().contains("only on macOS"), "{err}");
}

#[test]
fn domains_read_and_print_as_launchctl_names_them() {
    assert_eq!(Domain::parse("gui/501"), Some(Domain::Gui(501)));
    assert_eq!(Domain::parse("user/0"), Some(Domain::User(0)));
    for bad in [
        "gui/",
        "gui/-1",
        "system",
        "login/100008",
        "gui/501/x",
        "user/5a",
    ] {
        assert_eq!(Domain::parse(bad), None, "{bad}");
    }
    assert_eq!(Domain::Gui(501).target(LABEL), t());
    assert_eq!(Domain::Gui(501).other(), Domain::User(501));
    assert_eq!(Domain::User(501).to_string(), "user/501");
}

#[tokio::test]
async fn a_plist_path_that_is_not_utf8_is_refused_before_launchctl_runs() {
    use std::os::unix::ffi::OsStrExt;
    let fake = Fake::new();
    let plist = fake
        .dir
        .path()
        .join(std::ffi::OsStr::from_bytes(b"bad-\xff.plist"));
    let err = fake.runner(gui()).install(LABEL, &plist).await.unwrap_err();
    assert!(matches!(err, LaunchctlError::PathNotUtf8 { .. }), "{err}");
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
}

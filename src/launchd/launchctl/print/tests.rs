//! The parser against real `launchctl print` output, and against output it must not trust.
//!
//! Fixtures (in `fixtures/`, verbatim apart from trimming noted here):
//! - `running_gui.txt`: `launchctl print gui/501/com.dev.weekly-cache-cleanup` on macOS 26,
//!   2026-06-14, from an agent session transcript published in a public repository (found
//!   through the code index). A running LaunchAgent whose previous run ended with SIGTERM.
//! - `not_running_gui.txt`: `launchctl print gui/502/org.sessiometer.agent`, captured
//!   2026-07-28 and published as a test fixture (MIT) by the sessiometer project: a loaded agent
//!   that exited 0 and is not running, with a nested `state = active` decoy.
//! - `running_system_10_10.txt`: `launchctl print system/dev.mysql` on OS X 10.10, from
//!   boxen/puppet-boxen#104 (the tail of empty blocks trimmed): the old header form `label = {`
//!   and four-space indentation.

use super::*;

const RUNNING_GUI: &str = include_str!("fixtures/running_gui.txt");
const NOT_RUNNING_GUI: &str = include_str!("fixtures/not_running_gui.txt");
const RUNNING_SYSTEM_10_10: &str = include_str!("fixtures/running_system_10_10.txt");

fn weekly(out: &str) -> JobStatus {
    parse(
        out,
        "gui/501/com.dev.weekly-cache-cleanup",
        "com.dev.weekly-cache-cleanup",
    )
}

fn sessiometer(out: &str) -> JobStatus {
    parse(
        out,
        "gui/502/org.sessiometer.agent",
        "org.sessiometer.agent",
    )
}

#[test]
fn a_running_agent_reads_running_with_its_pid_runs_and_the_signal_that_ended_the_last_run() {
    assert_eq!(
        weekly(RUNNING_GUI),
        JobStatus {
            state: JobState::Running,
            raw_state: Some("running".into()),
            pid: Some(16090),
            last_exit: LastExit::Signal {
                number: 15,
                name: "Terminated".into()
            },
            runs: Some(2),
        }
    );
}

#[test]
fn a_loaded_agent_that_exited_reads_not_running_whatever_the_nested_blocks_say() {
    let status = sessiometer(NOT_RUNNING_GUI);
    assert_eq!(status.state, JobState::NotRunning);
    assert_eq!(status.pid, None);
    assert_eq!(status.last_exit, LastExit::Code(0));
    assert_eq!(status.runs, Some(2));
}

#[test]
fn a_sysexits_code_with_its_name_reads_as_that_code() {
    // The `78: EX_CONFIG` form, which launchd prints for a job whose program is missing.
    let out = NOT_RUNNING_GUI.replace("last exit code = 0", "last exit code = 78: EX_CONFIG");
    let status = sessiometer(&out);
    assert_eq!(status.state, JobState::NotRunning);
    assert_eq!(status.last_exit, LastExit::Code(78));
}

#[test]
fn a_job_that_never_exited_says_so() {
    let out = NOT_RUNNING_GUI.replace("last exit code = 0", "last exit code = (never exited)");
    assert_eq!(sessiometer(&out).last_exit, LastExit::NeverExited);
}

#[test]
fn the_old_header_form_with_space_indentation_reads_too() {
    let status = parse(RUNNING_SYSTEM_10_10, "system/dev.mysql", "dev.mysql");
    assert_eq!(status.state, JobState::Running);
    assert_eq!(status.pid, Some(24784));
    assert_eq!(status.last_exit, LastExit::Code(1));
    assert_eq!(status.runs, Some(2));
}

#[test]
fn garbage_is_unknown_in_every_field() {
    for out in [
        "",
        "\n\n",
        "hello world\n",
        "state = running\npid = 12\n",
        "Bad request.\nCould not find service \"x\" in domain for user gui: 501\n",
        "{\n}\n",
        "\u{1b}[2J\tstate = running\n",
    ] {
        assert_eq!(weekly(out), JobStatus::unknown(), "{out:?}");
    }
}

#[test]
fn another_jobs_output_is_not_read_as_this_ones() {
    assert_eq!(
        parse(
            RUNNING_GUI,
            "gui/501/ai.hermes.gateway.coder",
            "ai.hermes.gateway.coder"
        ),
        JobStatus::unknown()
    );
}

#[test]
fn output_cut_off_before_the_closing_brace_is_unknown() {
    // Cut after the state line: a reader that took what it had would see no pid.
    let cut = &RUNNING_GUI[..RUNNING_GUI.find("program =").unwrap()];
    assert_eq!(weekly(cut), JobStatus::unknown());
}

#[test]
fn the_job_state_key_and_nested_state_lines_are_not_the_state() {
    let out = "gui/501/L = {\n\tjob state = exited\n\tendpoints = {\n\t\t\"L\" = {\n\t\t\tstate = running\n\t\t\tpid = 9\n\t\t}\n\t}\n}\n";
    let status = parse(out, "gui/501/L", "L");
    assert_eq!(status.state, JobState::Unknown);
    assert_eq!(status.pid, None);
}

#[test]
fn not_running_with_a_pid_is_a_contradiction_and_unknown() {
    let out = "gui/501/L = {\n\tstate = not running\n\tpid = 77\n}\n";
    assert_eq!(parse(out, "gui/501/L", "L").state, JobState::Unknown);
}

#[test]
fn a_state_launchd_prints_while_spawning_is_unknown_but_kept_for_the_person() {
    let out = "gui/501/L = {\n\tstate = xpcproxy\n\truns = 778\n}\n";
    let status = parse(out, "gui/501/L", "L");
    assert_eq!(status.state, JobState::Unknown);
    assert_eq!(status.raw_state.as_deref(), Some("xpcproxy"));
    assert_eq!(status.runs, Some(778));
}

#[test]
fn a_key_printed_twice_differently_is_unknown() {
    let out = "gui/501/L = {\n\tstate = running\n\tpid = 5\n\tstate = not running\n}\n";
    let status = parse(out, "gui/501/L", "L");
    assert_eq!(status.state, JobState::Unknown);
    assert_eq!(status.pid, Some(5));
}

#[test]
fn an_unreadable_signal_line_is_unknown_rather_than_the_exit_code() {
    let out = "gui/501/L = {\n\tstate = not running\n\tlast exit code = 0\n\tlast terminating signal = ???\n}\n";
    assert_eq!(parse(out, "gui/501/L", "L").last_exit, LastExit::Unknown);
}

#[test]
fn unreadable_numbers_are_unknown() {
    let out = "gui/501/L = {\n\tstate = running\n\tpid = 0\n\truns = many\n\tlast exit code = 1: oops\n}\n";
    let status = parse(out, "gui/501/L", "L");
    assert_eq!(status.state, JobState::Running);
    assert_eq!(status.pid, None);
    assert_eq!(status.runs, None);
    assert_eq!(status.last_exit, LastExit::Unknown);
}

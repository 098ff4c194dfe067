//! The cron ticker on synthetic wall times, and real jobs run to their end, timeout or shutdown.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;

use super::job::{run_job_inner, Outcome};
use super::schedule::{Poll, Schedule, MISSED_COUNT_CAP};
use super::ticker::{Ticker, BEAT};
use super::CronSpec;
use super::*;
use crate::config::CronSchedule;
use crate::gateway::health::{ComponentKind, Registry, State};

fn spec(name: &str, schedule: &str, command: &[&str], timeout: Duration) -> CronSpec {
    CronSpec {
        name: name.to_owned(),
        schedule: CronSchedule::parse(schedule).unwrap(),
        command: command.iter().map(|s| s.to_string()).collect(),
        timeout,
        deliver: None,
        deliver_failures: false,
        attach_from: vec![],
    }
}

/// A job timeout for tests whose jobs end at once.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Tests evaluate schedules in UTC, so results do not depend on the machine's zone.
type Utc = chrono::DateTime<chrono::Utc>;

fn t(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Utc {
    use chrono::TimeZone;
    chrono::Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn plus(at: Utc, secs: i64) -> Utc {
    at + chrono::Duration::seconds(secs)
}

fn schedule(pattern: &str, now: Utc) -> Schedule<Utc> {
    Schedule::new(CronSchedule::parse(pattern).unwrap().cron().clone(), now)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hsv-cron-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn context(dir: &Path, name: &str) -> CronContext {
    CronContext {
        name: name.to_owned(),
        ..CronContext::new(dir.to_owned(), dir.join("logs/cron.log"))
    }
}

/// Poll `cond` every 20 ms until it holds or `limit` passes.
async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn weekday_and_month_patterns_resolve_in_utc() {
    // Mondays at 09:00; 2024-02-29 is a Thursday, so next is 2024-03-04.
    let s = schedule("0 9 * * MON", t(2024, 2, 29, 10, 0, 0));
    assert_eq!(s.next_due(), Some(&t(2024, 3, 4, 9, 0, 0)));
    let s = schedule("0 0 29 2 *", t(2024, 3, 1, 0, 0, 0));
    assert_eq!(s.next_due(), Some(&t(2028, 2, 29, 0, 0, 0)));
}

#[test]
fn a_seconds_schedule_runs_n_times_over_2n_seconds() {
    let start = t(2024, 1, 1, 0, 0, 0);
    let mut ticker = Ticker::new(
        vec![spec("every2", "*/2 * * * * *", &["true"], TIMEOUT)],
        start,
    );
    let mut runs = 0;
    for k in 1..=20 {
        for idx in ticker.due(plus(start, k)) {
            runs += 1;
            ticker.finished(idx);
        }
    }
    assert_eq!(runs, 10);
}

#[test]
fn the_ticker_sleeps_until_the_next_job_and_never_past_a_beat() {
    let start = t(2024, 1, 1, 0, 0, 0);
    let hourly = Ticker::new(vec![spec("hourly", "0 * * * *", &["true"], TIMEOUT)], start);
    assert_eq!(hourly.sleep_for(&start), BEAT, "nothing due soon: one beat");
    let soon = Ticker::new(
        vec![
            spec("hourly", "0 * * * *", &["true"], TIMEOUT),
            spec("every2", "*/2 * * * * *", &["true"], TIMEOUT),
        ],
        start,
    );
    let d = soon.sleep_for(&start);
    assert!(
        d > Duration::from_secs(2) && d < Duration::from_millis(2100),
        "{d:?}"
    );
    assert_eq!(Ticker::<Utc>::new(vec![], start).sleep_for(&start), BEAT);
    // Already past due (the clock stepped): at once.
    assert!(soon.sleep_for(&plus(start, 3)) < Duration::from_millis(10));
}

#[test]
fn a_three_hour_jump_runs_once_and_counts_the_misses() {
    let mut s = schedule("0 * * * *", t(2024, 5, 1, 9, 30, 0));
    assert_eq!(s.next_due(), Some(&t(2024, 5, 1, 10, 0, 0)));
    assert_eq!(s.poll(t(2024, 5, 1, 9, 59, 59)), Poll::Wait);
    // Asleep from 09:59:59 to 13:00:30: 10:00 is run, 11:00, 12:00 and 13:00 are skipped.
    assert_eq!(
        s.poll(t(2024, 5, 1, 13, 0, 30)),
        Poll::Run {
            due: t(2024, 5, 1, 10, 0, 0),
            missed: 3
        }
    );
    assert_eq!(s.next_due(), Some(&t(2024, 5, 1, 14, 0, 0)));
    assert_eq!(s.poll(t(2024, 5, 1, 13, 0, 31)), Poll::Wait);
    assert_eq!(s.poll(t(2024, 5, 1, 13, 59, 59)), Poll::Wait);
    assert_eq!(
        s.poll(t(2024, 5, 1, 14, 0, 0)),
        Poll::Run {
            due: t(2024, 5, 1, 14, 0, 0),
            missed: 0
        }
    );
}

#[test]
fn missed_runs_are_counted_up_to_the_cap() {
    let start = t(2024, 1, 1, 0, 0, 0);
    let mut s = schedule("* * * * * *", start);
    let Poll::Run { missed, .. } = s.poll(plus(start, 86_400)) else {
        panic!("due after a day");
    };
    assert_eq!(missed, MISSED_COUNT_CAP);
}

#[test]
fn a_clock_stepping_back_neither_reruns_nor_stalls() {
    let mut s = schedule("0 * * * *", t(2024, 5, 1, 9, 59, 0));
    assert!(matches!(s.poll(t(2024, 5, 1, 10, 0, 0)), Poll::Run { .. }));
    // A small correction back does not run 10:00 again.
    assert_eq!(s.poll(t(2024, 5, 1, 9, 59, 30)), Poll::Wait);
    assert_eq!(s.poll(t(2024, 5, 1, 10, 0, 0)), Poll::Wait);
    assert_eq!(s.next_due(), Some(&t(2024, 5, 1, 11, 0, 0)));

    // A clock that booted years ahead and was then fixed does not wait for that date.
    let mut s = schedule("0 * * * *", t(2030, 1, 1, 0, 30, 0));
    assert_eq!(s.poll(t(2024, 5, 1, 12, 10, 0)), Poll::Wait);
    assert_eq!(s.next_due(), Some(&t(2024, 5, 1, 13, 0, 0)));
}

#[test]
fn a_job_still_running_is_skipped_not_queued() {
    let start = t(2024, 1, 1, 0, 0, 0);
    let mut ticker = Ticker::new(
        vec![
            spec("slow", "* * * * * *", &["true"], TIMEOUT),
            spec("fast", "* * * * * *", &["true"], TIMEOUT),
        ],
        start,
    );
    assert_eq!(ticker.due(plus(start, 1)), [0, 1]);
    ticker.finished(1);
    assert!(ticker.any_running());
    assert_eq!(ticker.due(plus(start, 2)), [1]);
    ticker.finished(1);
    assert_eq!(ticker.due(plus(start, 3)), [1]);
    ticker.finished(0);
    ticker.finished(1);
    assert!(!ticker.any_running());
    assert_eq!(ticker.due(plus(start, 4)), [0, 1]);
}

/// A reload's new list: an unchanged job keeps its schedule and its run in progress, a changed
/// one keeps its run in progress (not started twice at once), a removed one is gone, and a
/// new one is scheduled from the reload.
#[test]
fn a_new_job_list_keeps_what_did_not_change() {
    let start = t(2024, 1, 1, 0, 0, 0);
    let mut ticker = Ticker::new(
        vec![
            spec("same", "* * * * * *", &["true"], TIMEOUT),
            spec("changed", "* * * * * *", &["true"], TIMEOUT),
            spec("gone", "* * * * * *", &["true"], TIMEOUT),
        ],
        start,
    );
    assert_eq!(ticker.due(plus(start, 1)), [0, 1, 2]);
    let moved = ticker.replace(
        vec![
            spec("new", "* * * * * *", &["true"], TIMEOUT),
            spec("changed", "* * * * * *", &["false"], TIMEOUT),
            spec("same", "* * * * * *", &["true"], TIMEOUT),
        ],
        plus(start, 1),
    );
    assert_eq!(moved, [Some(2), Some(1), None]);
    // `same` and `changed` still run: only `new` starts.
    assert_eq!(ticker.due(plus(start, 2)), [0]);
    ticker.finished(1);
    ticker.finished(2);
    assert_eq!(ticker.due(plus(start, 3)), [1, 2]);
}

/// A schedule that does not parse cannot reach the ticker: the config loader parses it and
/// rejects it with its line (`config::tests`), and `CronSpec` holds only a parsed schedule. One
/// that parses but never occurs is kept, and never due.
#[test]
fn bad_schedules_are_disabled_not_fatal() {
    assert!(CronSchedule::parse("not a schedule").is_err());
    let start = t(2024, 1, 1, 0, 0, 0);
    let mut ticker = Ticker::new(vec![spec("never", "0 0 30 2 *", &["true"], TIMEOUT)], start);
    assert_eq!(ticker.jobs.len(), 1);
    assert!(ticker.jobs[0].schedule.next_due().is_none());
    assert!(ticker.due(plus(start, 400 * 86_400)).is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_heartbeat_stays_fresh_across_ticks() {
    let registry = Registry::new();
    let hb = registry.register("cron-fresh-test", ComponentKind::Cron, DEADLINE);
    let dir = temp_dir("fresh");
    let (stop, shutdown) = watch::channel(false);
    let task = tokio::spawn(run(
        watch::channel(vec![]).1,
        hb,
        context(&dir, "cron-fresh-test"),
        shutdown,
    ));
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let s = registry.snapshot();
        assert!(s.all_fresh(), "{}", s.summary());
        assert_eq!(s.components[0].state, State::Idle);
        assert!(s.components[0].last_beat_age <= BEAT);
    }
    assert_eq!(
        registry.snapshot().summary(),
        "no adapters configured; cron ok"
    );
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .unwrap()
        .unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// The only test that sets `HERMES_TEST_FAULT`; it wedges a component name no other test
/// uses, so tests running concurrently cannot be wedged by it.
#[cfg(debug_assertions)]
#[tokio::test(start_paused = true)]
async fn a_wedged_ticker_goes_stale() {
    const NAME: &str = "cron-wedge-test";
    std::env::set_var("HERMES_TEST_FAULT", format!("wedge:{NAME}"));
    let registry = Registry::new();
    let hb = registry.register(NAME, ComponentKind::Cron, DEADLINE);
    let dir = temp_dir("wedge");
    let (_stop, shutdown) = watch::channel(false);
    let task = tokio::spawn(run(
        watch::channel(vec![]).1,
        hb,
        context(&dir, NAME),
        shutdown,
    ));

    // Wedged at its first wake: fresh until the deadline, stale after it.
    tokio::time::sleep(DEADLINE - Duration::from_secs(1)).await;
    assert!(registry.snapshot().all_fresh());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = registry.snapshot();
    assert!(!s.all_fresh());
    assert_eq!(
        s.stale().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        [NAME]
    );
    assert!(
        s.summary()
            .contains("cron-wedge-test: stale in idle for 6s"),
        "{}",
        s.summary()
    );

    std::env::remove_var("HERMES_TEST_FAULT");
    task.abort();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_job_runs_in_the_workdir_without_systemd_variables() {
    let dir = temp_dir("echo");
    let registry = Registry::new();
    let hb = registry.register("cron-echo-test", ComponentKind::Cron, DEADLINE);
    let mut ctx = context(&dir, "cron-echo-test");
    ctx.env_remove.push("HOME".into());
    let log = ctx.log_file.clone();
    let (stop, shutdown) = watch::channel(false);
    let job = spec(
        "echo",
        "* * * * * *",
        &["/bin/sh", "-c", "echo hi; echo \"home=${HOME-unset}\"; pwd"],
        Duration::from_secs(10),
    );
    let task = tokio::spawn(run(watch::channel(vec![job]).1, hb, ctx, shutdown));

    assert!(
        eventually(Duration::from_secs(5), || read(&log).contains("finished")).await,
        "log: {}",
        read(&log)
    );
    let text = read(&log);
    assert!(text.contains("\nhi\n"), "{text}");
    assert!(text.contains("home=unset"), "{text}");
    assert!(text.contains(&format!("\n{}\n", dir.display())), "{text}");
    assert!(
        text.contains("cron echo: started: /bin/sh -c echo hi"),
        "{text}"
    );
    assert!(registry.snapshot().components[0].last_error.is_none());

    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

fn gone(pid: &str) -> bool {
    // A zombie has exited; it only waits for whoever adopted it to reap it.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(") ").next().is_some_and(|s| s.starts_with('Z'))
    })
}

#[tokio::test]
async fn a_job_past_its_timeout_is_killed_with_its_children() {
    let dir = temp_dir("timeout");
    let registry = Registry::new();
    let hb = registry.register("cron-timeout-test", ComponentKind::Cron, DEADLINE);
    let ctx = context(&dir, "cron-timeout-test");
    let job = spec(
        "slow",
        "* * * * *",
        &["/bin/sh", "-c", "sleep 30 & echo $! > child.pid; wait"],
        Duration::from_millis(300),
    );
    let (_stop, shutdown) = watch::channel(false);
    let started = std::time::Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(5),
        run_job_inner(&job, &ctx, &hb, shutdown),
    )
    .await
    .expect("killed within the deadline")
    .outcome;
    assert!(matches!(outcome, Outcome::TimedOut), "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let child = read(&dir.join("child.pid")).trim().to_owned();
    assert!(!child.is_empty());
    assert!(eventually(Duration::from_secs(3), || gone(&child)).await);
    assert!(read(&ctx.log_file).contains("cron slow: timed out after 300ms; killed"));
    let err = registry.snapshot().components[0].last_error.clone();
    assert_eq!(err.as_deref(), Some("cron job slow: timed out after 300ms"));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_missing_program_is_an_error_not_a_crash() {
    let dir = temp_dir("missing");
    let registry = Registry::new();
    let hb = registry.register("cron-missing-test", ComponentKind::Cron, DEADLINE);
    let ctx = context(&dir, "cron-missing-test");
    let job = spec("ghost", "* * * * *", &["/nonexistent/hermes-job"], TIMEOUT);
    let (_stop, shutdown) = watch::channel(false);
    let outcome = run_job_inner(&job, &ctx, &hb, shutdown).await.outcome;
    assert!(matches!(outcome, Outcome::Failed), "{outcome:?}");
    let err = registry.snapshot().components[0]
        .last_error
        .clone()
        .unwrap();
    assert!(
        err.starts_with("cron job ghost: cannot start /nonexistent/hermes-job"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn shutdown_stops_running_jobs_and_returns() {
    let dir = temp_dir("shutdown");
    let registry = Registry::new();
    let hb = registry.register("cron-shutdown-test", ComponentKind::Cron, DEADLINE);
    let ctx = context(&dir, "cron-shutdown-test");
    let log = ctx.log_file.clone();
    let job = spec(
        "long",
        "* * * * * *",
        &["/bin/sh", "-c", "sleep 30"],
        Duration::from_secs(60),
    );
    let (stop, shutdown) = watch::channel(false);
    let task = tokio::spawn(run(watch::channel(vec![job]).1, hb, ctx, shutdown));
    assert!(eventually(Duration::from_secs(5), || read(&log).contains("started")).await);
    assert!(
        eventually(Duration::from_secs(2), || {
            registry.snapshot().components[0].state == State::Running
        })
        .await
    );

    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("ticker returns promptly")
        .unwrap();
    let text = read(&log);
    assert!(text.contains("cron long: stopped at shutdown"), "{text}");
    assert_eq!(text.matches("started").count(), 1, "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

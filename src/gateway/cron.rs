//! The cron ticker: runs `[[cron]]` jobs on their own task, beating its own heartbeat.
//!
//! Two clocks are involved on purpose. Ticks run on the monotonic clock, so a wall-clock step
//! can never stall or flood the heartbeat. Due times are wall-clock times, because a schedule
//! like "0 9 * * *" means nine o'clock on the calendar, not "some multiple of 24 h since start".
//! The due-time logic ([`Schedule`], `Ticker`) takes the wall clock as an argument, so it is
//! tested with synthetic times rather than by waiting for real minutes to pass.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use croner::{Cron, CronDateTime};
use nix::sys::signal::{killpg, Signal};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::task::{Id, JoinSet};
use tokio::time::{Instant, MissedTickBehavior};
use tracing::{debug, error, info, warn};

use crate::config::CronSpec;
use crate::gateway::health::{Heartbeat, State};
use crate::test_hook;

/// How often the ticker wakes, beats and checks for due jobs.
pub const TICK: Duration = Duration::from_secs(1);
/// The deadline the runtime registers the cron component with (a few ticks of slack).
pub const DEADLINE: Duration = Duration::from_secs(5);

/// A job that outlives its timeout (or is running at shutdown) gets SIGTERM, and this long to
/// clean up before SIGKILL, so a Python job can still flush its own files.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// Counting missed occurrences is only for the log line; after a year asleep a per-second job
/// would otherwise make one tick search through millions of them.
const MISSED_COUNT_CAP: u32 = 10_000;

/// A wall clock that moves back by less than this (an NTP correction, the end of daylight
/// saving time in a zone-less clock) keeps the pending due time, so a job that already ran is
/// not run again. A bigger step back (a clock that booted wrong and was fixed) recomputes the
/// due time, or the job would wait until the wrong date came round again. Same rule as Vixie
/// cron.
const BACKWARD_RESET_SECS: i64 = 3 * 3600;

/// Variables a job must not inherit: with them, a job could talk to systemd as if it were the
/// gateway (a stray `READY=1` or `WATCHDOG=1` from a job would lie about the gateway's health).
pub const DEFAULT_ENV_REMOVE: [&str; 6] = [
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
];

/// Where and how jobs run.
#[derive(Clone, Debug)]
pub struct CronContext {
    /// Working directory of every job (the profile home).
    pub workdir: PathBuf,
    /// Jobs' stdout and stderr are appended here, after a header line naming the job.
    pub log_file: PathBuf,
    /// Names removed from the jobs' environment.
    pub env_remove: Vec<String>,
    /// The component name: used in logs and by the test fault hook (`wedge:NAME`). The runtime
    /// passes the name it registered the heartbeat under ("cron"). It is a field, not a
    /// constant, because the fault hook reads a process-global variable: tests wedge a name
    /// of their own, so they cannot wedge each other.
    pub name: String,
}

impl CronContext {
    /// The runtime's context: component "cron", with [`DEFAULT_ENV_REMOVE`].
    pub fn new(workdir: PathBuf, log_file: PathBuf) -> Self {
        Self {
            workdir,
            log_file,
            env_remove: DEFAULT_ENV_REMOVE.iter().map(|s| s.to_string()).collect(),
            name: "cron".to_owned(),
        }
    }
}

/// Parse a 5-field (or 6-field, with leading seconds) cron expression.
pub fn parse_schedule(schedule: &str) -> Result<croner::Cron, croner::errors::CronError> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .build()
        .parse(schedule)
}

// ---- wall clock ----

/// Schedules are evaluated in local time, like cron(8) and systemd timers: "0 9 * * *" is
/// nine in the morning where the machine is.
pub type Wall = chrono::DateTime<chrono::Local>;

/// The current wall-clock time, read once per tick.
pub fn wall_now() -> Wall {
    chrono::Local::now()
}

// ---- due times ----

/// What a schedule says at one wall-clock instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Poll<T> {
    /// Not due yet (or never again).
    Wait,
    /// Due: run once now. `missed` more occurrences fell between `due` and now (the machine
    /// slept, the process was stopped, the clock jumped); they are skipped, not caught up.
    /// Counted up to 10,000.
    Run { due: T, missed: u32 },
}

/// One job's due time, advanced by polling it with the wall clock.
#[derive(Clone, Debug)]
pub struct Schedule<T> {
    cron: Cron,
    next_due: Option<T>,
    last_now: T,
}

impl<T: CronDateTime> Schedule<T> {
    /// The first run is the first occurrence strictly after `now`: starting the gateway does
    /// not count as having missed the previous one.
    pub fn new(cron: Cron, now: T) -> Self {
        let next_due = cron.find_next_occurrence(&now, false).ok();
        Self {
            cron,
            next_due,
            last_now: now,
        }
    }

    /// `None` when the pattern has no future occurrence (e.g. "0 0 30 2 *").
    pub fn next_due(&self) -> Option<&T> {
        self.next_due.as_ref()
    }

    /// Due once `now` reaches the due time. The next due time is then the first occurrence
    /// strictly after `now`, not after the old due time, so however long the gap, it yields
    /// exactly one run.
    pub fn poll(&mut self, now: T) -> Poll<T> {
        let stepped_back = now
            .checked_add_seconds(BACKWARD_RESET_SECS)
            .is_some_and(|t| t.cmp_instant(&self.last_now) == Ordering::Less);
        self.last_now = now.clone();
        if stepped_back {
            self.next_due = self.cron.find_next_occurrence(&now, false).ok();
            return Poll::Wait;
        }
        let due = match &self.next_due {
            Some(due) if due.cmp_instant(&now) != Ordering::Greater => due.clone(),
            _ => return Poll::Wait,
        };
        let mut missed = 0;
        let mut cursor = due.clone();
        while missed < MISSED_COUNT_CAP {
            match self.cron.find_next_occurrence(&cursor, false) {
                Ok(t) if t.cmp_instant(&now) != Ordering::Greater => {
                    missed += 1;
                    cursor = t;
                }
                _ => break,
            }
        }
        self.next_due = self.cron.find_next_occurrence(&now, false).ok();
        Poll::Run { due, missed }
    }
}

struct Job<T> {
    spec: Arc<CronSpec>,
    schedule: Schedule<T>,
    running: bool,
}

/// Every job's schedule plus whether its previous run is still going: the part of the ticker
/// that decides, without spawning anything, so it is tested with synthetic times.
struct Ticker<T> {
    jobs: Vec<Job<T>>,
}

impl<T: CronDateTime + fmt::Display> Ticker<T> {
    /// Jobs whose schedule does not parse are left out, logged and recorded as the
    /// component's last error; the config loader rejects them first, so this is a backstop.
    fn new(specs: Vec<CronSpec>, now: T, heartbeat: &Heartbeat) -> Self {
        let mut jobs = Vec::with_capacity(specs.len());
        for spec in specs {
            match parse_schedule(&spec.schedule) {
                Ok(cron) => {
                    let schedule = Schedule::new(cron, now.clone());
                    match schedule.next_due() {
                        Some(due) => info!(job = %spec.name, next = %due, "cron job scheduled"),
                        None => warn!(job = %spec.name, schedule = %spec.schedule,
                            "cron schedule has no future occurrence; the job will never run"),
                    }
                    jobs.push(Job {
                        spec: Arc::new(spec),
                        schedule,
                        running: false,
                    });
                }
                Err(e) => {
                    error!(job = %spec.name, schedule = %spec.schedule, error = %e,
                        "invalid cron schedule; job disabled");
                    heartbeat.error(format_args!(
                        "cron job {}: invalid schedule {:?}: {e}",
                        spec.name, spec.schedule
                    ));
                }
            }
        }
        Self { jobs }
    }

    /// The jobs to start now, each marked running until [`Ticker::finished`].
    fn due(&mut self, now: T) -> Vec<usize> {
        let mut start = Vec::new();
        for (idx, job) in self.jobs.iter_mut().enumerate() {
            let Poll::Run { due, missed } = job.schedule.poll(now.clone()) else {
                continue;
            };
            let name = &job.spec.name;
            if missed > 0 {
                warn!(job = %name, due = %due, now = %now, missed,
                    "cron job missed runs (asleep or stopped); running it once now");
            } else if due
                .checked_add_seconds(60)
                .is_some_and(|late| late.cmp_instant(&now) == Ordering::Less)
            {
                info!(job = %name, due = %due, now = %now, "cron job is running late");
            }
            if job.running {
                warn!(job = %name, due = %due, "previous run of cron job still running; skipping this run");
            } else {
                job.running = true;
                start.push(idx);
            }
            if job.schedule.next_due().is_none() {
                warn!(job = %name, "cron schedule has no further occurrence");
            }
        }
        start
    }

    fn finished(&mut self, idx: usize) {
        if let Some(job) = self.jobs.get_mut(idx) {
            job.running = false;
        }
    }

    fn any_running(&self) -> bool {
        self.jobs.iter().any(|j| j.running)
    }
}

// ---- the ticker task ----

/// Run the ticker until `shutdown` becomes true (or its sender is dropped), then stop the jobs
/// still running and return.
///
/// Jobs run on tasks of their own, so a job that takes an hour never delays a tick: the
/// heartbeat measures the ticker, and only a wedged ticker goes stale.
pub async fn run(
    jobs: Vec<CronSpec>,
    heartbeat: Heartbeat,
    ctx: CronContext,
    mut shutdown: watch::Receiver<bool>,
) {
    let ctx = Arc::new(ctx);
    heartbeat.enter(State::Idle);
    let mut ticker = Ticker::new(jobs, wall_now(), &heartbeat);
    info!(component = %ctx.name, jobs = ticker.jobs.len(), "cron ticker started");

    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut tasks: JoinSet<()> = JoinSet::new();
    let mut task_jobs: HashMap<Id, usize> = HashMap::new();

    loop {
        if *shutdown.borrow_and_update() {
            break;
        }
        tokio::select! {
            biased;
            changed = shutdown.changed() => {
                if changed.is_err() {
                    break;
                }
                continue;
            }
            Some(joined) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                let id = match joined {
                    Ok((id, ())) => id,
                    Err(e) => {
                        error!(component = %ctx.name, error = %e, "cron job task failed");
                        e.id()
                    }
                };
                if let Some(idx) = task_jobs.remove(&id) {
                    ticker.finished(idx);
                }
                if !ticker.any_running() {
                    heartbeat.enter(State::Idle);
                }
                continue;
            }
            _ = interval.tick() => {}
        }

        test_hook::hang_if_wedged(&ctx.name).await;
        heartbeat.beat();

        let due = ticker.due(wall_now());
        if due.is_empty() {
            continue;
        }
        for idx in due {
            let spec = ticker.jobs[idx].spec.clone();
            let handle = tasks.spawn(run_job(
                spec,
                ctx.clone(),
                heartbeat.clone(),
                shutdown.clone(),
            ));
            task_jobs.insert(handle.id(), idx);
        }
        heartbeat.enter(State::Running);
    }

    if !tasks.is_empty() {
        info!(component = %ctx.name, running = tasks.len(), "stopping running cron jobs");
    }
    // Each job task sees the same shutdown signal, stops its process group and reaps it.
    while let Some(joined) = tasks.join_next().await {
        if let Err(e) = joined {
            error!(component = %ctx.name, error = %e, "cron job task failed");
        }
    }
    info!(component = %ctx.name, "cron ticker stopped");
}

/// How one run ended.
#[derive(Debug)]
enum Outcome {
    Exited(ExitStatus),
    TimedOut,
    /// Stopped because the gateway is shutting down.
    Stopped,
    /// Never started (log file, program or working directory unusable), or lost track of it.
    Failed,
}

/// Run one job to completion, its timeout, or shutdown. Every failure is logged and recorded
/// as the component's last error; none of them reach the ticker.
async fn run_job(
    spec: Arc<CronSpec>,
    ctx: Arc<CronContext>,
    heartbeat: Heartbeat,
    shutdown: watch::Receiver<bool>,
) {
    let _ = run_job_inner(&spec, &ctx, &heartbeat, shutdown).await;
}

async fn run_job_inner(
    spec: &CronSpec,
    ctx: &CronContext,
    heartbeat: &Heartbeat,
    mut shutdown: watch::Receiver<bool>,
) -> Outcome {
    let name = spec.name.as_str();
    let fail = |what: String| {
        error!(job = %name, error = %what, "cron job failed to start");
        heartbeat.error(format_args!("cron job {name}: {what}"));
        Outcome::Failed
    };
    let Some((program, args)) = spec.command.split_first() else {
        return fail("empty command".to_owned());
    };
    let log = match open_log(&ctx.log_file) {
        Ok(f) => f,
        Err(e) => return fail(format!("open log {}: {e}", ctx.log_file.display())),
    };
    log_line(&log, name, &format!("started: {}", spec.command.join(" ")));
    let streams = log.try_clone().and_then(|out| Ok((out, log.try_clone()?)));
    let (stdout, stderr) = match streams {
        Ok((out, err)) => (Stdio::from(out), Stdio::from(err)),
        Err(e) => return fail(format!("open log {}: {e}", ctx.log_file.display())),
    };

    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&ctx.workdir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        // Its own process group, so a timeout stops what `sh -c` started too.
        .process_group(0)
        // A backstop: if this task is ever dropped, the job dies with it.
        .kill_on_drop(true);
    for var in &ctx.env_remove {
        cmd.env_remove(var);
    }
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            log_line(&log, name, &format!("cannot start: {e}"));
            return fail(format!(
                "cannot start {program} in {}: {e}",
                ctx.workdir.display()
            ));
        }
    };
    let pid = child.id();
    debug!(job = %name, pid, "cron job started");

    enum Ended {
        Exited(std::io::Result<ExitStatus>),
        TimedOut,
        Stopped,
    }
    let ended = tokio::select! {
        status = child.wait() => Ended::Exited(status),
        _ = tokio::time::sleep(spec.timeout) => Ended::TimedOut,
        _ = shutdown.wait_for(|&stop| stop) => Ended::Stopped,
    };
    let elapsed = started.elapsed();
    let outcome = match ended {
        Ended::Exited(Ok(status)) => Outcome::Exited(status),
        Ended::Exited(Err(e)) => {
            error!(job = %name, error = %e, "cron job: cannot wait for it");
            heartbeat.error(format_args!("cron job {name}: wait: {e}"));
            stop(&mut child, pid).await;
            Outcome::Failed
        }
        Ended::TimedOut => {
            stop(&mut child, pid).await;
            Outcome::TimedOut
        }
        Ended::Stopped => {
            stop(&mut child, pid).await;
            Outcome::Stopped
        }
    };
    let took = humantime::format_duration(Duration::from_millis(elapsed.as_millis() as u64));
    match &outcome {
        Outcome::Exited(status) if status.success() => {
            info!(job = %name, status = ?status.code(), elapsed = %took, "cron job finished");
            log_line(&log, name, &format!("finished: {status} after {took}"));
        }
        Outcome::Exited(status) => {
            warn!(job = %name, status = ?status.code(), elapsed = %took, "cron job failed");
            heartbeat.error(format_args!("cron job {name}: {status}"));
            log_line(&log, name, &format!("failed: {status} after {took}"));
        }
        Outcome::TimedOut => {
            let limit = humantime::format_duration(spec.timeout);
            warn!(job = %name, timeout = %limit, "cron job timed out; killed");
            heartbeat.error(format_args!("cron job {name}: timed out after {limit}"));
            log_line(&log, name, &format!("timed out after {limit}; killed"));
        }
        Outcome::Stopped => {
            info!(job = %name, elapsed = %took, "cron job stopped at shutdown");
            log_line(&log, name, &format!("stopped at shutdown after {took}"));
        }
        Outcome::Failed => {}
    }
    outcome
}

/// Stop a job's whole process group: SIGTERM, then SIGKILL after [`KILL_GRACE`]. Signals go
/// before the leader is reaped, so its pid (the group id) cannot have been reused.
async fn stop(child: &mut Child, pid: Option<u32>) {
    let group = pid
        .and_then(|p| i32::try_from(p).ok())
        .map(nix::unistd::Pid::from_raw);
    let termed = group.is_some_and(|g| killpg(g, Signal::SIGTERM).is_ok());
    if !termed {
        let _ = child.start_kill();
    }
    if tokio::time::timeout(KILL_GRACE, child.wait()).await.is_ok() {
        return;
    }
    if let Some(g) = group {
        let _ = killpg(g, Signal::SIGKILL);
    }
    let _ = child.start_kill();
    if let Err(e) = child.wait().await {
        warn!(pid, error = %e, "cron job: cannot reap killed job");
    }
}

fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}

/// A line of our own in the job log, so interleaved output can be told apart.
fn log_line(mut file: &std::fs::File, job: &str, msg: &str) {
    let now = humantime::format_rfc3339_seconds(SystemTime::now());
    if let Err(e) = writeln!(file, "[{now}] cron {job}: {msg}") {
        debug!(job = %job, error = %e, "cannot write to cron log");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::health::{ComponentKind, Registry};

    fn spec(name: &str, schedule: &str, command: &[&str], timeout: Duration) -> CronSpec {
        CronSpec {
            name: name.to_owned(),
            schedule: schedule.to_owned(),
            command: command.iter().map(|s| s.to_string()).collect(),
            timeout,
        }
    }

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
        Schedule::new(parse_schedule(pattern).unwrap(), now)
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
        let hb = Registry::new().register("cron-test", ComponentKind::Cron, DEADLINE);
        let mut ticker = Ticker::new(
            vec![spec("every2", "*/2 * * * * *", &["true"], TICK)],
            start,
            &hb,
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
        let hb = Registry::new().register("cron-test", ComponentKind::Cron, DEADLINE);
        let mut ticker = Ticker::new(
            vec![
                spec("slow", "* * * * * *", &["true"], TICK),
                spec("fast", "* * * * * *", &["true"], TICK),
            ],
            start,
            &hb,
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

    #[test]
    fn bad_schedules_are_disabled_not_fatal() {
        let start = t(2024, 1, 1, 0, 0, 0);
        let registry = Registry::new();
        let hb = registry.register("cron-test", ComponentKind::Cron, DEADLINE);
        let mut ticker = Ticker::new(
            vec![
                spec("bad", "not a schedule", &["true"], TICK),
                spec("never", "0 0 30 2 *", &["true"], TICK),
            ],
            start,
            &hb,
        );
        assert_eq!(ticker.jobs.len(), 1);
        assert!(ticker.jobs[0].schedule.next_due().is_none());
        assert!(ticker.due(plus(start, 400 * 86_400)).is_empty());
        let err = registry.snapshot().components[0].last_error.clone();
        assert!(err.unwrap().contains("cron job bad: invalid schedule"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_heartbeat_stays_fresh_across_ticks() {
        let registry = Registry::new();
        let hb = registry.register("cron-fresh-test", ComponentKind::Cron, DEADLINE);
        let dir = temp_dir("fresh");
        let (stop, shutdown) = watch::channel(false);
        let task = tokio::spawn(run(vec![], hb, context(&dir, "cron-fresh-test"), shutdown));
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_millis(700)).await;
            let s = registry.snapshot();
            assert!(s.all_fresh(), "{}", s.summary());
            assert_eq!(s.components[0].state, State::Idle);
            assert!(s.components[0].last_beat_age <= TICK);
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
        let task = tokio::spawn(run(vec![], hb, context(&dir, NAME), shutdown));

        tokio::time::sleep(DEADLINE - TICK).await;
        assert!(registry.snapshot().all_fresh());
        tokio::time::sleep(2 * TICK).await;
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
        let task = tokio::spawn(run(vec![job], hb, ctx, shutdown));

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
        .expect("killed within the deadline");
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
        let job = spec("ghost", "* * * * *", &["/nonexistent/hermes-job"], TICK);
        let (_stop, shutdown) = watch::channel(false);
        let outcome = run_job_inner(&job, &ctx, &hb, shutdown).await;
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
        let task = tokio::spawn(run(vec![job], hb, ctx, shutdown));
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
}

//! The ticker: one task that wakes when the next job is due, and at least every [`BEAT`] to
//! beat the cron heartbeat, and starts the jobs that are due, each on a task of its own, so a
//! long job never delays a beat.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use croner::CronDateTime;
use tokio::sync::watch;
use tokio::task::{Id, JoinSet};
use tracing::{error, info, warn, Instrument};

use super::job::{run_job, CronContext};
use super::schedule::{wall_now, Poll, Schedule};
use super::CronSpec;
use crate::gateway::health::{Heartbeat, State};
use crate::test_hook;

/// The longest the ticker sleeps: it beats at least this often, and a wall clock that stepped
/// while it slept is read again within it.
pub(crate) const BEAT: Duration = Duration::from_millis(2500);
/// The deadline the runtime registers the cron component with (two beats).
pub(crate) const DEADLINE: Duration = Duration::from_secs(5);
/// Past a due time, so that a timer that fires on the millisecond finds the job due.
const PAST_DUE: Duration = Duration::from_millis(5);

pub(super) struct Job<T> {
    spec: Arc<CronSpec>,
    pub(super) schedule: Schedule<T>,
    running: bool,
    /// The scheduled time of the run started last: its identity, for delivery.
    last_due: Option<T>,
}

impl<T: CronDateTime + fmt::Display> Job<T> {
    /// Every schedule was parsed by the config loader, so every job is kept, even one whose
    /// pattern has no future occurrence: it is logged, and never due.
    fn new(spec: CronSpec, now: T) -> Self {
        let schedule = Schedule::new(spec.schedule.cron().clone(), now);
        match schedule.next_due() {
            Some(due) => info!(job = %spec.name, next = %due, "cron job scheduled"),
            None => warn!(job = %spec.name, schedule = %spec.schedule,
                "cron schedule has no future occurrence; the job will never run"),
        }
        Job {
            spec: Arc::new(spec),
            schedule,
            running: false,
            last_due: None,
        }
    }
}

/// Every job's schedule plus whether its previous run is still going: the part of the ticker
/// that decides, without spawning anything, so it is tested with synthetic times.
pub(super) struct Ticker<T> {
    pub(super) jobs: Vec<Job<T>>,
}

impl<T: CronDateTime + fmt::Display> Ticker<T> {
    pub(super) fn new(specs: Vec<CronSpec>, now: T) -> Self {
        let jobs = specs
            .into_iter()
            .map(|s| Job::new(s, now.clone()))
            .collect();
        Self { jobs }
    }

    /// Take `specs` as the job list from now on (a reload): a job whose spec is unchanged
    /// keeps its schedule, so a due time is neither lost nor doubled; a new or changed one is
    /// scheduled from `now`; a run in progress goes on to its end, and a changed job is not
    /// started again until it has. For each old index, its new one, if the job is still there.
    pub(super) fn replace(&mut self, specs: Vec<CronSpec>, now: T) -> Vec<Option<usize>> {
        let mut old: Vec<Option<Job<T>>> = std::mem::take(&mut self.jobs)
            .into_iter()
            .map(Some)
            .collect();
        let mut moved = vec![None; old.len()];
        for spec in specs {
            let at = self.jobs.len();
            let same = old
                .iter()
                .position(|j| j.as_ref().is_some_and(|j| *j.spec == spec));
            if let Some(job) = same.and_then(|i| old[i].take()) {
                moved[same.unwrap_or_default()] = Some(at);
                self.jobs.push(job);
                continue;
            }
            let mut job = Job::new(spec, now.clone());
            let renamed = old
                .iter()
                .position(|j| j.as_ref().is_some_and(|j| j.spec.name == job.spec.name));
            if let Some(was) = renamed.and_then(|i| old[i].take()) {
                moved[renamed.unwrap_or_default()] = Some(at);
                job.running = was.running;
                job.last_due = was.last_due;
            }
            self.jobs.push(job);
        }
        moved
    }

    /// The jobs to start now, each marked running until [`Ticker::finished`].
    pub(super) fn due(&mut self, now: T) -> Vec<usize> {
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
                job.last_due = Some(due);
                start.push(idx);
            }
            if job.schedule.next_due().is_none() {
                warn!(job = %name, "cron schedule has no further occurrence");
            }
        }
        start
    }

    pub(super) fn finished(&mut self, idx: usize) {
        if let Some(job) = self.jobs.get_mut(idx) {
            job.running = false;
        }
    }

    /// How long the ticker may sleep after `now`: until the next job is due, and never past a
    /// [`BEAT`], so a ticker with nothing due wakes a few times a minute, not every second.
    pub(super) fn sleep_for(&self, now: &T) -> Duration
    where
        T: std::ops::Sub<T, Output = chrono::TimeDelta>,
    {
        self.jobs
            .iter()
            .filter_map(|j| j.schedule.next_due())
            .map(|due| {
                (due.clone() - now.clone())
                    .to_std()
                    .map_or(Duration::ZERO, |d| d + PAST_DUE)
            })
            .fold(BEAT, Duration::min)
    }

    pub(super) fn any_running(&self) -> bool {
        self.jobs.iter().any(|j| j.running)
    }
}

// ---- the ticker task ----

/// Run the ticker until `shutdown` becomes true (or its sender is dropped), then stop the jobs
/// still running and return.
///
/// Jobs run on tasks of their own, so a job that takes an hour never delays a tick: the
/// heartbeat measures the ticker, and only a wedged ticker goes stale.
pub(crate) async fn run(
    mut jobs: watch::Receiver<Vec<CronSpec>>,
    heartbeat: Heartbeat,
    ctx: CronContext,
    mut shutdown: watch::Receiver<bool>,
) {
    let ctx = Arc::new(ctx);
    heartbeat.enter(State::Idle);
    let mut ticker = Ticker::new(jobs.borrow_and_update().clone(), wall_now());
    // Until the reloads' sender is gone (the run is ending).
    let mut reloadable = true;
    info!(jobs = ticker.jobs.len(), "cron ticker started");

    let mut wake = tokio::time::Instant::now();
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
            changed = jobs.changed(), if reloadable => {
                match changed {
                    Ok(()) => {
                        let specs = jobs.borrow_and_update().clone();
                        let moved = ticker.replace(specs, wall_now());
                        task_jobs.retain(|_, idx| match moved.get(*idx).copied().flatten() {
                            Some(new) => { *idx = new; true }
                            None => false,
                        });
                        info!(jobs = ticker.jobs.len(), "cron jobs reloaded");
                        wake = tokio::time::Instant::now();
                    }
                    Err(_) => reloadable = false,
                }
                continue;
            }
            Some(joined) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                let id = match joined {
                    Ok((id, ())) => id,
                    Err(e) => {
                        error!(error = %e, "cron job task failed");
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
            () = tokio::time::sleep_until(wake) => {}
        }

        test_hook::hang_if_wedged(&ctx.name).await;
        heartbeat.beat();

        let now = wall_now();
        let due = ticker.due(now);
        wake = tokio::time::Instant::now() + ticker.sleep_for(&now);
        if due.is_empty() {
            continue;
        }
        for idx in due {
            let job = &ticker.jobs[idx];
            let due = job
                .last_due
                .as_ref()
                .map(|d| d.to_rfc3339())
                .unwrap_or_default();
            let handle = tasks.spawn(
                run_job(
                    job.spec.clone(),
                    ctx.clone(),
                    heartbeat.clone(),
                    shutdown.clone(),
                    due,
                )
                .in_current_span(),
            );
            task_jobs.insert(handle.id(), idx);
        }
        heartbeat.enter(State::Running);
    }

    if !tasks.is_empty() {
        info!(running = tasks.len(), "stopping running cron jobs");
    }
    // Each job task sees the same shutdown signal, stops its process group and reaps it.
    while let Some(joined) = tasks.join_next().await {
        if let Err(e) = joined {
            error!(error = %e, "cron job task failed");
        }
    }
    info!("cron ticker stopped");
}

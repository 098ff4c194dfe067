//! One cron job run to its end: its own process group in the profile home, without the
//! gateway's systemd variables, stopped as a group at its timeout or at shutdown.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, error, info, warn};

use super::log::{log_line, open_log};
use crate::config::CronSpec;
use crate::gateway::health::Heartbeat;

/// A job that outlives its timeout (or is running at shutdown) gets SIGTERM, and this long to
/// clean up before SIGKILL, so a Python job can still flush its own files.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// Variables a job must not inherit: with them, a job could talk to systemd as if it were the
/// gateway (a stray `READY=1` or `WATCHDOG=1` from a job would lie about the gateway's health).
pub(crate) const DEFAULT_ENV_REMOVE: [&str; 6] = [
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
];

/// Where and how jobs run.
#[derive(Clone, Debug)]
pub(crate) struct CronContext {
    /// Working directory of every job (the profile home).
    pub(crate) workdir: PathBuf,
    /// Jobs' stdout and stderr are appended here, after a header line naming the job.
    pub(crate) log_file: PathBuf,
    /// Names removed from the jobs' environment.
    pub(crate) env_remove: Vec<String>,
    /// The component name: used in logs and by the test fault hook (`wedge:NAME`). The runtime
    /// passes the name it registered the heartbeat under ("cron"). It is a field, not a
    /// constant, because the fault hook reads a process-global variable: tests wedge a name
    /// of their own, so they cannot wedge each other.
    pub(crate) name: String,
}

impl CronContext {
    /// The runtime's context: component "cron", with [`DEFAULT_ENV_REMOVE`].
    pub(crate) fn new(workdir: PathBuf, log_file: PathBuf) -> Self {
        Self {
            workdir,
            log_file,
            env_remove: DEFAULT_ENV_REMOVE.iter().map(|s| s.to_string()).collect(),
            name: "cron".to_owned(),
        }
    }
}

/// How one run ended.
#[derive(Debug)]
pub(super) enum Outcome {
    Exited(ExitStatus),
    TimedOut,
    /// Stopped because the gateway is shutting down.
    Stopped,
    /// Never started (log file, program or working directory unusable), or lost track of it.
    Failed,
}

/// Run one job to completion, its timeout, or shutdown. Every failure is logged and recorded
/// as the component's last error; none of them reach the ticker.
pub(super) async fn run_job(
    spec: Arc<CronSpec>,
    ctx: Arc<CronContext>,
    heartbeat: Heartbeat,
    shutdown: watch::Receiver<bool>,
) {
    let _ = run_job_inner(&spec, &ctx, &heartbeat, shutdown).await;
}

pub(super) async fn run_job_inner(
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

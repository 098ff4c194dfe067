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

use super::deliver::{self, Captured};
use super::log::{log_line, open_log};
use super::CronSpec;
use crate::gateway::health::Heartbeat;
use crate::gateway::outbox::Outbox;

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
    /// Where jobs with `deliver` send their output; without it they are only logged.
    pub(crate) outbox: Option<Arc<Outbox>>,
}

impl CronContext {
    /// The runtime's context: component "cron", with [`DEFAULT_ENV_REMOVE`].
    pub(crate) fn new(workdir: PathBuf, log_file: PathBuf) -> Self {
        Self {
            workdir,
            log_file,
            env_remove: DEFAULT_ENV_REMOVE.iter().map(|s| s.to_string()).collect(),
            name: "cron".to_owned(),
            outbox: None,
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

/// How a run ended, and the start of its stdout when the job delivers it.
#[derive(Debug)]
pub(super) struct Run {
    pub(super) outcome: Outcome,
    pub(super) stdout: Captured,
}

/// Run one job to completion, its timeout, or shutdown, then deliver its result if it has
/// `deliver`. Every failure is logged and recorded as the component's last error; none of
/// them reach the ticker. `due` is the scheduled time of this run.
pub(super) async fn run_job(
    spec: Arc<CronSpec>,
    ctx: Arc<CronContext>,
    heartbeat: Heartbeat,
    shutdown: watch::Receiver<bool>,
    due: String,
) {
    let run = run_job_inner(&spec, &ctx, &heartbeat, shutdown).await;
    let Some(deliver) = &spec.deliver else {
        return;
    };
    let Some(outbox) = &ctx.outbox else {
        tracing::error!(job = %spec.name, "the job's output is not delivered: the outbox is unavailable (see status)");
        return;
    };
    let max = outbox
        .max_text(&deliver.adapter)
        .unwrap_or((2000, crate::gateway::send::TextUnit::Chars));
    let Some(output) = deliver::output(&spec, &ctx.workdir, &run.outcome, &run.stdout, max) else {
        return;
    };
    let files = output.files.len();
    let name = spec.name.as_str();
    let line = match deliver::submit(outbox, &spec, &due, output).await {
        Ok(id) => {
            let id = id.as_deref().unwrap_or("-");
            info!(job = %name, message_id = %id, files, "cron job output queued for delivery");
            match files {
                0 => format!("output queued for delivery as message {id}"),
                n => format!("output queued for delivery as message {id} and {n} file(s)"),
            }
        }
        Err(e) => {
            let e = crate::error_chain::one_line(&e);
            error!(job = %name, error = %e, "cron job output cannot be delivered");
            heartbeat.error(format_args!("cron job {name}: delivery: {e}"));
            format!("output cannot be delivered: {e}")
        }
    };
    if let Ok(log) = open_log(&ctx.log_file) {
        log_line(&log, name, &line);
    }
}

pub(super) async fn run_job_inner(
    spec: &CronSpec,
    ctx: &CronContext,
    heartbeat: &Heartbeat,
    shutdown: watch::Receiver<bool>,
) -> Run {
    let mut stdout = Captured::default();
    let outcome = run_process(spec, ctx, heartbeat, shutdown, &mut stdout).await;
    Run { outcome, stdout }
}

/// Run the job's process to its end and log how it ended. A job that cannot be started is
/// reported here, once, so the steps below only say what went wrong.
async fn run_process(
    spec: &CronSpec,
    ctx: &CronContext,
    heartbeat: &Heartbeat,
    shutdown: watch::Receiver<bool>,
    captured: &mut Captured,
) -> Outcome {
    let name = spec.name.as_str();
    let mut job = match Started::spawn(spec, ctx) {
        Ok(job) => job,
        Err(what) => {
            error!(job = %name, error = %what, "cron job failed to start");
            heartbeat.error(format_args!("cron job {name}: {what}"));
            return Outcome::Failed;
        }
    };
    let (outcome, elapsed) = job.wait(spec, heartbeat, shutdown).await;
    if let Some(c) = job.captured(name).await {
        *captured = c;
    }
    log_outcome(&job.log, spec, heartbeat, &outcome, elapsed);
    outcome
}

/// A job's process once started, with what outlives it: the log its end is written to, and
/// the task reading its stdout when it delivers.
struct Started {
    child: Child,
    pid: Option<u32>,
    log: std::fs::File,
    reader: Option<tokio::task::JoinHandle<Captured>>,
    at: Instant,
}

/// How the wait for a job ended, before the job is stopped.
enum Ended {
    Exited(std::io::Result<ExitStatus>),
    TimedOut,
    Stopped,
}

impl Started {
    /// Start the job with its output in the log: its own process group in the profile home,
    /// without the variables in `env_remove`. The error says what could not be done.
    fn spawn(spec: &CronSpec, ctx: &CronContext) -> Result<Self, String> {
        let name = spec.name.as_str();
        let Some((program, args)) = spec.command.split_first() else {
            return Err("empty command".to_owned());
        };
        let log = open_log(&ctx.log_file)
            .map_err(|e| format!("open log {}: {e}", ctx.log_file.display()))?;
        log_line(&log, name, &format!("started: {}", spec.command.join(" ")));
        let streams = log.try_clone().and_then(|out| Ok((out, log.try_clone()?)));
        let (out_log, stderr) = match streams {
            Ok((out, err)) => (out, Stdio::from(err)),
            Err(e) => return Err(format!("open log {}: {e}", ctx.log_file.display())),
        };
        // A job that delivers its output has its stdout read here (and copied to the log);
        // any other writes straight to the log.
        let (stdout, tee_to) = match spec.deliver {
            Some(_) => (Stdio::piped(), Some(out_log)),
            None => (Stdio::from(out_log), None),
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
        let at = Instant::now();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                log_line(&log, name, &format!("cannot start: {e}"));
                return Err(format!(
                    "cannot start {program} in {}: {e}",
                    ctx.workdir.display()
                ));
            }
        };
        let pid = child.id();
        debug!(job = %name, pid, "cron job started");
        let reader = match (child.stdout.take(), tee_to) {
            (Some(pipe), Some(log)) => Some(tokio::spawn(capture(pipe, log))),
            _ => None,
        };
        Ok(Self {
            child,
            pid,
            log,
            reader,
            at,
        })
    }

    /// Wait for the job to exit, time out, or be stopped by shutdown; a job still running is
    /// stopped as a group. The time it took is taken when the wait ends, so it does not count
    /// the kill grace.
    async fn wait(
        &mut self,
        spec: &CronSpec,
        heartbeat: &Heartbeat,
        mut shutdown: watch::Receiver<bool>,
    ) -> (Outcome, Duration) {
        let name = spec.name.as_str();
        let ended = tokio::select! {
            status = self.child.wait() => Ended::Exited(status),
            _ = tokio::time::sleep(spec.timeout) => Ended::TimedOut,
            _ = shutdown.wait_for(|&stop| stop) => Ended::Stopped,
        };
        let elapsed = self.at.elapsed();
        let outcome = match ended {
            Ended::Exited(Ok(status)) => Outcome::Exited(status),
            Ended::Exited(Err(e)) => {
                error!(job = %name, error = %e, "cron job: cannot wait for it");
                heartbeat.error(format_args!("cron job {name}: wait: {e}"));
                stop(&mut self.child, self.pid).await;
                Outcome::Failed
            }
            Ended::TimedOut => {
                stop(&mut self.child, self.pid).await;
                Outcome::TimedOut
            }
            Ended::Stopped => {
                stop(&mut self.child, self.pid).await;
                Outcome::Stopped
            }
        };
        (outcome, elapsed)
    }

    /// What was read of the job's stdout, if it delivers. The pipe ends when the group is
    /// gone; a grandchild that left the group and kept stdout open must not hold the delivery
    /// forever, so after [`KILL_GRACE`] it is `None` and the run delivers what it has.
    async fn captured(&mut self, name: &str) -> Option<Captured> {
        let reader = self.reader.take()?;
        match tokio::time::timeout(KILL_GRACE, reader).await {
            Ok(Ok(c)) => Some(c),
            _ => {
                warn!(job = %name, "cron job: its stdout stayed open after it ended; delivering what was read");
                None
            }
        }
    }
}

/// Say how a run ended, in the gateway's log and the jobs' log; a failure or a timeout is
/// also the component's last error, so status shows it.
fn log_outcome(
    log: &std::fs::File,
    spec: &CronSpec,
    heartbeat: &Heartbeat,
    outcome: &Outcome,
    elapsed: Duration,
) {
    let name = spec.name.as_str();
    let took = humantime::format_duration(Duration::from_millis(elapsed.as_millis() as u64));
    match outcome {
        Outcome::Exited(status) if status.success() => {
            info!(job = %name, status = ?status.code(), elapsed = %took, "cron job finished");
            log_line(log, name, &format!("finished: {status} after {took}"));
        }
        Outcome::Exited(status) => {
            warn!(job = %name, status = ?status.code(), elapsed = %took, "cron job failed");
            heartbeat.error(format_args!("cron job {name}: {status}"));
            log_line(log, name, &format!("failed: {status} after {took}"));
        }
        Outcome::TimedOut => {
            let limit = humantime::format_duration(spec.timeout);
            warn!(job = %name, timeout = %limit, "cron job timed out; killed");
            heartbeat.error(format_args!("cron job {name}: timed out after {limit}"));
            log_line(log, name, &format!("timed out after {limit}; killed"));
        }
        Outcome::Stopped => {
            info!(job = %name, elapsed = %took, "cron job stopped at shutdown");
            log_line(log, name, &format!("stopped at shutdown after {took}"));
        }
        Outcome::Failed => {}
    }
}

/// Read a job's stdout to its end: all of it into the log, the start of it kept for delivery.
async fn capture(mut pipe: tokio::process::ChildStdout, log: std::fs::File) -> Captured {
    use std::io::Write;
    use tokio::io::AsyncReadExt;
    let mut captured = Captured::default();
    let mut log = log;
    let mut buf = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let _ = log.write_all(&buf[..n]);
                captured.push(&buf[..n]);
            }
        }
    }
    captured
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

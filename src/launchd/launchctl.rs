//! `launchctl`, run with exact arguments in the right domain, and its `print` output read defensively.
//!
//! Every operation the launchd backend needs is one method here with a fixed sequence of
//! calls (launchctl(1) for each subcommand):
//!
//! | operation            | calls                                                             |
//! |----------------------|-------------------------------------------------------------------|
//! | install              | `bootstrap <domain> <plist>`, `enable <target>`, `kickstart <target>` |
//! | reinstall, changed   | `bootout <target>` (then wait), then as install                   |
//! | reinstall, unchanged | nothing: the caller asks [`Launchctl::is_loaded`] and decides     |
//! | restart              | `kickstart -k <target>`                                           |
//! | stop, uninstall      | `bootout <target>` (then wait); uninstall's caller removes the file |
//! | start                | `print <target>`; if not loaded `bootstrap`; then `kickstart`     |
//! | start, seen unloaded | `bootstrap`, `kickstart`                                          |
//! | status               | `print <target>`                                                  |
//!
//! where `<target>` is `<domain>/<label>`. Why these and not others:
//!
//! - stop is `bootout`, not `stop` or `kill`: the job has `KeepAlive`, and launchd answers a
//!   process that ends by starting it again. Only unloading the job keeps it stopped.
//! - the legacy `load`/`unload` never appear: they pick a domain from the caller's session
//!   rather than the one named, and report failures less precisely.
//! - `bootout` returns before launchd has finished with the job (it sends SIGTERM and waits up
//!   to the job's ExitTimeOut), and a `bootstrap` in that window fails with 5, "Input/output
//!   error", or 37, "Operation already in progress" (openclaw/openclaw#136453,
//!   Layr-Labs/d-inference#1102). So every `bootout` is followed by `print` until launchd
//!   answers 113, "Could not find service", for a bounded time.
//! - a `bootstrap` that fails with 5 or 37 is most often a job still (or already) loaded: it
//!   is booted out and bootstrapped once more. If it fails again the error says so, with the
//!   domain and what to check; nothing falls back to running the gateway outside launchd.
//! - 125, "Domain does not support specified action", is not retried: it is the wrong domain
//!   (a `gui/<uid>` with no one logged in at the screen), and the hint says which to use.
//!
//! The runner takes the program to run, so tests point it at a recording fake without
//! touching the process-wide `PATH`.

mod domain;
mod error;
mod print;
mod run;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use domain::{detect as detect_domain, Domain};
pub use error::{Failure, LaunchctlError};
pub use print::{parse as parse_print, JobState, JobStatus, LastExit, Service};

use run::{Output, Stdout};

/// launchctl's exit status for a service the domain does not have (`print`, `kickstart`,
/// `bootout` on current macOS): "Could not find service ... in domain for user gui: 501"
/// (TOSS-Soft/toss-agent-runtime#40).
const NOT_FOUND: i32 = 113;
/// `bootout` of a job that is not loaded, on releases that answer ESRCH: "Boot-out failed: 3:
/// No such process" (nix-community/home-manager#9585).
const NO_SUCH_PROCESS: i32 = 3;
/// `bootout` that has started but not finished unloading: "Boot-out failed: 36: Operation now
/// in progress" (osquery/osquery#5698). The job does go; the wait after it sees to that.
const IN_PROGRESS: i32 = 36;
/// `bootstrap` of a job launchd still has: 5, EIO, "Bootstrap failed: 5: Input/output error"
/// (Homebrew/homebrew-services#528), and 37, EALREADY, "Bootstrap failed: 37: Operation
/// already in progress" (Homebrew/homebrew-core#132781).
const STILL_LOADED: [i32; 2] = [5, 37];
/// `bootstrap` into a domain that does not take the job: "Bootstrap failed: 125: Domain does
/// not support specified action" (duh17/oppi#31).
const WRONG_DOMAIN: i32 = 125;

/// Runs launchctl for one user's domain.
#[derive(Clone, Debug)]
pub struct Launchctl {
    program: PathBuf,
    domain: Domain,
    call_timeout: Duration,
    bootout_wait: Duration,
    poll_every: Duration,
}

/// Whether a `bootout` found the job loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unloaded {
    /// It was loaded, and launchd no longer has it.
    WasLoaded,
    /// launchd did not have it: nothing to stop.
    WasNotLoaded,
}

impl Launchctl {
    /// `launchctl` as found on `PATH`.
    pub const DEFAULT_PROGRAM: &'static str = "launchctl";
    /// How long one call may take. launchctl answers in well under a second; a call still
    /// running after this is stuck.
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
    /// How long launchd may take to let go of a job after `bootout`: its ExitTimeOut (SIGTERM,
    /// then SIGKILL) plus the few seconds of cleanup launchd schedules after it.
    pub const DEFAULT_BOOTOUT_WAIT: Duration = Duration::from_secs(30);

    /// A runner for `domain`, calling `program` (a bare name is looked up on `PATH`).
    pub fn new(program: impl Into<PathBuf>, domain: Domain) -> Launchctl {
        Launchctl {
            program: program.into(),
            domain,
            call_timeout: Self::DEFAULT_CALL_TIMEOUT,
            bootout_wait: Self::DEFAULT_BOOTOUT_WAIT,
            poll_every: Duration::from_millis(200),
        }
    }

    /// A runner for `uid` in the domain [`detect_domain`] picks.
    pub async fn detect(
        program: impl Into<PathBuf>,
        uid: u32,
    ) -> Result<Launchctl, LaunchctlError> {
        let program = program.into();
        let domain = detect_domain(&program, uid, Self::DEFAULT_CALL_TIMEOUT).await?;
        Ok(Launchctl::new(program, domain))
    }

    pub fn with_call_timeout(mut self, timeout: Duration) -> Launchctl {
        self.call_timeout = timeout;
        self
    }

    /// How long to wait, after `bootout`, for launchd to let go of the job, and how often to
    /// ask.
    pub fn with_bootout_wait(mut self, wait: Duration, poll_every: Duration) -> Launchctl {
        self.bootout_wait = wait;
        self.poll_every = poll_every;
        self
    }

    pub fn domain(&self) -> Domain {
        self.domain
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Loads a newly written plist and starts the job: `bootstrap`, `enable`, `kickstart`.
    ///
    /// `enable` clears a `launchctl disable` left from before, so the job also loads at the next
    /// login; `kickstart` starts it now even if the plist had no `RunAtLoad` (and does nothing
    /// to a job `RunAtLoad` already started).
    pub async fn install(&self, label: &str, plist: &Path) -> Result<(), LaunchctlError> {
        self.bootstrap(label, plist).await?;
        self.enable(label).await?;
        self.kickstart(label, false).await
    }

    /// Replaces a loaded job with a changed plist: `bootout`, then as [`Launchctl::install`].
    /// launchd reads a plist only when it is bootstrapped, so a changed file needs both.
    pub async fn reinstall(&self, label: &str, plist: &Path) -> Result<(), LaunchctlError> {
        self.bootout(label).await?;
        self.install(label, plist).await
    }

    /// Stops the running process and starts a new one: `kickstart -k`. Fails with exit
    /// status 113 when the job is not loaded; [`Launchctl::start`] loads it.
    pub async fn restart(&self, label: &str) -> Result<(), LaunchctlError> {
        self.kickstart(label, true).await
    }

    /// Stops the job so that it stays stopped: `bootout`. The plist stays, so it loads again
    /// at the next login; [`Launchctl::start`] brings it back now.
    pub async fn stop(&self, label: &str) -> Result<Unloaded, LaunchctlError> {
        self.bootout(label).await
    }

    /// Starts a job whether or not it is loaded: `bootstrap` it if launchd does not have it,
    /// then `kickstart`. A loaded job is not booted out, so a running one keeps running.
    pub async fn start(&self, label: &str, plist: &Path) -> Result<(), LaunchctlError> {
        if !self.is_loaded(label).await? {
            self.bootstrap(label, plist).await?;
        }
        self.kickstart(label, false).await
    }

    /// Starts a job the caller has just seen unloaded: `bootstrap`, then `kickstart`, with no
    /// `print` first. Should launchd have loaded it meanwhile (a login), `bootstrap` answers 5
    /// or 37 and the usual bootout-and-retry takes over.
    pub async fn load_and_start(&self, label: &str, plist: &Path) -> Result<(), LaunchctlError> {
        self.bootstrap(label, plist).await?;
        self.kickstart(label, false).await
    }

    /// Unloads the job before its plist is removed: `bootout`. Removing the file is the
    /// caller's, once this has succeeded; a plist removed first would leave a loaded job with
    /// nothing on disk to say where it came from.
    pub async fn uninstall(&self, label: &str) -> Result<Unloaded, LaunchctlError> {
        self.bootout(label).await
    }

    /// What launchd says of the job, from `launchctl print <target>`.
    pub async fn status(&self, label: &str) -> Result<Service, LaunchctlError> {
        let target = self.domain.target(label);
        let argv = vec!["print".to_owned(), target.clone()];
        let out = self.call(&argv).await?;
        match out.code {
            Some(0) => Ok(Service::Loaded(print::parse(&out.stdout, &target, label))),
            Some(NOT_FOUND) => Ok(Service::NotLoaded),
            _ => Err(out.failure(&self.program, &argv, None)),
        }
    }

    /// Whether launchd has the job in this domain (loaded, running or not).
    pub async fn is_loaded(&self, label: &str) -> Result<bool, LaunchctlError> {
        Ok(matches!(self.status(label).await?, Service::Loaded(_)))
    }

    async fn call(&self, argv: &[String]) -> Result<Output, LaunchctlError> {
        run::call(&self.program, argv, self.call_timeout, Stdout::Keep).await
    }

    /// Runs a call that must succeed, with `hint` for when it does not.
    async fn must(&self, argv: Vec<String>, hint: Option<String>) -> Result<(), LaunchctlError> {
        let out = self.call(&argv).await?;
        if out.success() {
            return Ok(());
        }
        let hint = hint.or_else(|| self.not_loaded_hint(out.code));
        Err(out.failure(&self.program, &argv, hint))
    }

    fn not_loaded_hint(&self, code: Option<i32>) -> Option<String> {
        (code == Some(NOT_FOUND)).then(|| {
            format!(
                "launchd has no such job in {}; it is not loaded there (is it loaded in {}?)",
                self.domain,
                self.domain.other()
            )
        })
    }

    /// `enable <target>`: clears a `launchctl disable`, so the job loads at the next login.
    pub async fn enable(&self, label: &str) -> Result<(), LaunchctlError> {
        self.must(vec!["enable".into(), self.domain.target(label)], None)
            .await
    }

    async fn kickstart(&self, label: &str, kill: bool) -> Result<(), LaunchctlError> {
        let mut argv = vec!["kickstart".to_owned()];
        if kill {
            argv.push("-k".into());
        }
        argv.push(self.domain.target(label));
        self.must(argv, None).await
    }

    /// `bootstrap <domain> <plist>`; on 5 or 37, `bootout` and one more `bootstrap`.
    async fn bootstrap(&self, label: &str, plist: &Path) -> Result<(), LaunchctlError> {
        let path = plist.to_str().ok_or_else(|| LaunchctlError::PathNotUtf8 {
            path: plist.to_owned(),
        })?;
        let argv = vec![
            "bootstrap".to_owned(),
            self.domain.to_string(),
            path.to_owned(),
        ];
        let first = self.call(&argv).await?;
        if first.success() {
            return Ok(());
        }
        let retry = first.code.is_some_and(|c| STILL_LOADED.contains(&c));
        if !retry {
            return Err(first.failure(
                &self.program,
                &argv,
                self.bootstrap_hint(first.code, label, plist),
            ));
        }
        tracing::info!(
            code = ?first.code,
            target = %self.domain.target(label),
            "bootstrap refused, booting out and retrying once"
        );
        self.bootout(label).await?;
        let second = self.call(&argv).await?;
        if second.success() {
            return Ok(());
        }
        let hint = match second.code {
            Some(code) if STILL_LOADED.contains(&code) => Some(format!(
                "launchd refused it again after `launchctl bootout {target}` and a retry. \
                 Check that the plist parses (`plutil -lint {plist}`) and that its Label is \
                 {label}, that the job is not disabled (`launchctl print-disabled {domain}`), \
                 and that it is not loaded in {other}; `sudo launchctl bootstrap {domain} \
                 {plist}` prints launchd's own reason",
                target = self.domain.target(label),
                plist = plist.display(),
                domain = self.domain,
                other = self.domain.other(),
            )),
            code => self.bootstrap_hint(code, label, plist),
        };
        Err(second.failure(&self.program, &argv, hint))
    }

    fn bootstrap_hint(&self, code: Option<i32>, label: &str, plist: &Path) -> Option<String> {
        match (code?, self.domain) {
            (WRONG_DOMAIN, Domain::Gui(uid)) => Some(format!(
                "the gui/{uid} domain does not take the job: with no one logged in at the \
                 screen (a headless or ssh-only Mac) use the user/{uid} domain instead"
            )),
            (WRONG_DOMAIN, Domain::User(uid)) => Some(format!(
                "the user/{uid} domain does not take the job: its LimitLoadToSessionType must \
                 include Background ({})",
                plist.display()
            )),
            (code, _) if STILL_LOADED.contains(&code) => None,
            _ => Some(format!(
                "check that {} parses (`plutil -lint`) and that its Label is {label}",
                plist.display()
            )),
        }
    }

    /// `bootout <target>`, then `print <target>` until launchd no longer has the job.
    async fn bootout(&self, label: &str) -> Result<Unloaded, LaunchctlError> {
        let target = self.domain.target(label);
        let argv = vec!["bootout".to_owned(), target.clone()];
        let out = self.call(&argv).await?;
        let unloaded = match out.code {
            Some(0) | Some(IN_PROGRESS) => Unloaded::WasLoaded,
            Some(NOT_FOUND) | Some(NO_SUCH_PROCESS) => Unloaded::WasNotLoaded,
            _ => return Err(out.failure(&self.program, &argv, None)),
        };
        self.wait_unloaded(label, &target).await?;
        Ok(unloaded)
    }

    async fn wait_unloaded(&self, label: &str, target: &str) -> Result<(), LaunchctlError> {
        let started = tokio::time::Instant::now();
        loop {
            if !self.is_loaded(label).await? {
                return Ok(());
            }
            let waited = started.elapsed();
            if waited >= self.bootout_wait {
                return Err(LaunchctlError::StillLoaded {
                    target: target.to_owned(),
                    waited,
                });
            }
            tokio::time::sleep(self.poll_every).await;
        }
    }
}

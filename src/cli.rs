//! The command line: parse, validate into a request, plan, apply, report.
//!
//! Validation happens before anything is touched, and a validation failure exits 2 with one
//! line that names the flag and the fix. Everything else that fails exits 1, printing the
//! error's cause chain.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use crate::dropin::{self, Directive};
use crate::edit_lock::{self, EditLock};
use crate::effects;
use crate::escape;
use crate::exit_code;
use crate::gateway::runtime;
use crate::install::{self, InstallRequest, Settings};
use crate::linger::Linger;
use crate::observed::{self, Siblings};
use crate::plan::{Plan, Step};
use crate::profile::{Profile, ProfileName};
use crate::safe_text;
use crate::scope::Scope;
use crate::status;
use crate::systemd::Systemd;
use crate::unit_file::UnitSpec;

#[derive(Parser, Debug)]
#[command(
    name = "hermes-svc",
    version,
    about = "Run a messaging-bot gateway as a native service, one unit per profile"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Render, write, reload, enable and start a profile's unit (idempotent).
    Install(InstallArgs),
    /// Stop, disable and remove a profile's unit and our drop-in; profile data is kept.
    Uninstall(UninstallArgs),
    /// Set environment variables or directives (WatchdogSec, RestartSec) in our drop-in.
    Set(SetArgs),
    /// Remove environment variables or directives from our drop-in.
    Unset(UnsetArgs),
    /// Start a profile's unit.
    Start(UnitArgs),
    /// Stop a profile's unit.
    Stop(UnitArgs),
    /// Restart a profile's unit.
    Restart(UnitArgs),
    /// Show every installed profile: unit state, restarts, edits.
    Status(StatusArgs),
    /// Print the unit and drop-in that install would write, with no side effects.
    Render(RenderArgs),
    /// Print the inbound events a profile's gateway has spooled.
    Events(EventsArgs),
    /// Look for known ways a setup goes wrong (duplicate units, --replace, shared tokens,
    /// stale pid files, ...) and print the exact fix for each.
    Doctor(DoctorArgs),
    /// Run a gateway against a built-in mock platform, inject a half-open fault, and show
    /// that it is detected and resumed with no event lost. Needs no credentials or network.
    Demo(DemoArgs),
    /// The gateway process itself (what the unit runs).
    #[command(subcommand)]
    Gateway(GatewayCommand),
}

#[derive(Subcommand, Debug)]
enum GatewayCommand {
    /// Run the gateway for one profile in the foreground.
    Run {
        #[arg(long)]
        profile: String,
    },
}

#[derive(Args, Debug, Clone)]
struct ScopeArgs {
    /// Use the per-user manager (the default).
    #[arg(long, conflicts_with = "system")]
    user: bool,
    /// Use the system manager (/etc/systemd/system; needs root and --run-as).
    #[arg(long)]
    system: bool,
}

impl ScopeArgs {
    fn scope(&self) -> Scope {
        if self.system {
            Scope::System
        } else {
            Scope::User
        }
    }
}

#[derive(Args, Debug)]
struct UnitSource {
    #[arg(long)]
    profile: String,
    #[command(flatten)]
    scope: ScopeArgs,
    /// The account a system unit runs as (User=).
    #[arg(long, value_name = "USER")]
    run_as: Option<String>,
    /// The hermes-svc binary the unit runs (default: this binary).
    #[arg(long, value_name = "PATH")]
    exec: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct InstallArgs {
    #[command(flatten)]
    source: UnitSource,
    /// An environment variable for the gateway, written to our drop-in (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// WatchdogSec for the unit, written to our drop-in.
    #[arg(long, value_name = "N")]
    watchdog_sec: Option<String>,
    /// RestartSec for the unit, written to our drop-in.
    #[arg(long, value_name = "N")]
    restart_sec: Option<String>,
    /// Write and enable, but do not start.
    #[arg(long)]
    no_start: bool,
    /// Back up a hand-edited unit and rewrite it.
    #[arg(long)]
    force: bool,
    /// Stop, disable and back up other units that serve this profile.
    #[arg(long)]
    migrate: bool,
    /// Print every file and bus call, change nothing.
    #[arg(long)]
    dry_run: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct UninstallArgs {
    #[arg(long)]
    profile: String,
    #[command(flatten)]
    scope: ScopeArgs,
    #[arg(long)]
    dry_run: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct SetArgs {
    #[arg(long)]
    profile: String,
    #[command(flatten)]
    scope: ScopeArgs,
    /// Do not restart a running unit.
    #[arg(long)]
    no_restart: bool,
    #[arg(long)]
    dry_run: bool,
    #[arg(long)]
    json: bool,
    /// KEY=VALUE pairs: environment variables, or WatchdogSec / RestartSec.
    #[arg(required = true, value_name = "KEY=VALUE")]
    pairs: Vec<String>,
}

#[derive(Args, Debug)]
struct UnsetArgs {
    #[arg(long)]
    profile: String,
    #[command(flatten)]
    scope: ScopeArgs,
    #[arg(long)]
    no_restart: bool,
    #[arg(long)]
    dry_run: bool,
    #[arg(long)]
    json: bool,
    #[arg(required = true, value_name = "KEY")]
    keys: Vec<String>,
}

#[derive(Args, Debug)]
struct UnitArgs {
    #[arg(long)]
    profile: String,
    #[command(flatten)]
    scope: ScopeArgs,
}

#[derive(Args, Debug)]
struct StatusArgs {
    #[arg(long)]
    profile: Option<String>,
    #[command(flatten)]
    scope: ScopeArgs,
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct EventsArgs {
    #[arg(long)]
    profile: String,
    /// Keep printing new events as they arrive.
    #[arg(long)]
    follow: bool,
    /// Only events after the one with this id.
    #[arg(long, value_name = "ID")]
    since: Option<String>,
    /// Print the stored JSON lines.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct DoctorArgs {
    /// Only findings about this profile (and machine-wide ones).
    #[arg(long)]
    profile: Option<String>,
    /// Print `{"findings":[{"id","severity","subject","message","fix"}]}`.
    #[arg(long)]
    json: bool,
    /// Apply the safe, reversible fixes, print each one, then report what remains.
    #[arg(long)]
    fix: bool,
}

#[derive(Args, Debug)]
struct DemoArgs {
    /// How long to let events flow before and after the fault, in seconds.
    #[arg(long, default_value_t = 4)]
    seconds: u64,
}

#[derive(Args, Debug)]
struct RenderArgs {
    #[command(flatten)]
    source: UnitSource,
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
}

/// Bad input: exits 2, and nothing has been touched.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Usage(String);

fn usage(msg: impl Into<String>) -> anyhow::Error {
    Usage(msg.into()).into()
}

/// Entry point for `main`: run, print errors, map them to exit codes.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(matches!(cli.command, Command::Gateway(_)));
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            // An error can quote what a platform, a state file or a config said.
            let shown = |e: &dyn std::fmt::Display| safe_text::visible(&e.to_string()).into_owned();
            eprintln!("error: {}", shown(&err));
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {}", shown(&cause));
            }
            let code = if err.is::<Usage>() {
                exit_code::USAGE
            } else if let Some(g) = err.downcast_ref::<runtime::GatewayError>() {
                g.exit_code()
            } else {
                exit_code::FAILURE
            };
            ExitCode::from(code)
        }
    }
}

fn init_tracing(gateway: bool) {
    use tracing_subscriber::EnvFilter;
    let default = if gateway { "info" } else { "warn" };
    let filter = EnvFilter::try_from_env("HERMES_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Gateway(GatewayCommand::Run { profile }) => {
            // The gateway runs under a supervisor: a bad profile is a configuration error
            // (78, which the unit does not restart), not a usage error.
            let profile = ProfileName::parse(&profile)
                .and_then(Profile::from_env)
                .map_err(runtime::GatewayError::Profile)?;
            // Before any thread exists: setting the environment is not thread-safe.
            crate::env_file::load(&profile.env_file());
            let _ = rustls::crypto::ring::default_provider().install_default();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("failed to start the async runtime")?;
            rt.block_on(runtime::run(&profile))?;
            Ok(exit_code::OK)
        }
        Command::Render(args) => {
            let spec = unit_spec(&args.source)?;
            let settings = settings(&args.env, None, None)?;
            print!("{}", spec.render()?);
            let mut dropin = crate::dropin::DropIn::default();
            dropin.env.extend(settings.env);
            if !dropin.is_empty() {
                println!("\n# {}", crate::dropin::DROPIN_NAME);
                print!("{}", dropin.render()?);
            }
            Ok(exit_code::OK)
        }
        Command::Events(args) => {
            let profile = Profile::from_env(parse_profile(&args.profile)?)
                .map_err(|e| usage(e.to_string()))?;
            let mut out = std::io::stdout();
            runtime()?.block_on(crate::gateway::spool::events_command(
                &profile.inbox_dir(),
                args.since.as_deref(),
                args.follow,
                args.json,
                &mut out,
            ))?;
            Ok(exit_code::OK)
        }
        Command::Demo(args) => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            runtime()?.block_on(crate::demo::run(std::time::Duration::from_secs(
                args.seconds,
            )))
        }
        Command::Install(args) => runtime()?.block_on(install_cmd(args)),
        Command::Uninstall(args) => runtime()?.block_on(uninstall_cmd(args)),
        Command::Set(args) => runtime()?.block_on(set_cmd(args)),
        Command::Unset(args) => runtime()?.block_on(unset_cmd(args)),
        Command::Start(a) => runtime()?.block_on(lifecycle_cmd(a, "start")),
        Command::Stop(a) => runtime()?.block_on(lifecycle_cmd(a, "stop")),
        Command::Restart(a) => runtime()?.block_on(lifecycle_cmd(a, "restart")),
        Command::Status(args) => runtime()?.block_on(status_cmd(args)),
        Command::Doctor(args) => runtime()?.block_on(doctor_cmd(args)),
    }
}

fn parse_profile(name: &str) -> anyhow::Result<ProfileName> {
    ProfileName::parse(name).map_err(|e| usage(e.to_string()))
}

/// The profile for a unit of `scope`: system units read the `--run-as` user's home.
fn resolve_profile(name: &str, scope: Scope, run_as: Option<&str>) -> anyhow::Result<Profile> {
    let name = parse_profile(name)?;
    let from_env = crate::profile::hermes_home_var();
    // The account is checked even when HERMES_HOME names the home: a unit for a user that
    // does not exist fails at every start.
    let account = match (scope, run_as) {
        (Scope::System, Some(user)) => Some(
            nix::unistd::User::from_name(user)
                .ok()
                .flatten()
                .ok_or_else(|| usage(format!("--run-as {user}: no such user on this machine")))?,
        ),
        _ => None,
    };
    let home = match (account, from_env) {
        (_, Some(home)) => home,
        (Some(account), None) => account.dir.join(".hermes"),
        _ => crate::profile::default_hermes_home().map_err(|e| usage(e.to_string()))?,
    };
    Profile::new(name, home).map_err(|e| usage(e.to_string()))
}

fn unit_spec(src: &UnitSource) -> anyhow::Result<UnitSpec> {
    let scope = src.scope.scope();
    match (scope, &src.run_as) {
        (Scope::User, Some(_)) => {
            return Err(usage(
                "--run-as only applies to --system units (user units run as you)",
            ))
        }
        (Scope::System, None) => {
            return Err(usage(
                "--system needs --run-as USER: the account the gateway runs as",
            ))
        }
        _ => {}
    }
    let exec = match &src.exec {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("failed to find this binary's path")?,
    };
    check_executable(&exec)?;
    let profile = resolve_profile(&src.profile, scope, src.run_as.as_deref())?;
    // `EnvironmentFile=` takes its path as a glob (systemd.exec(5)), and a path that is not
    // one file is skipped without a word: the gateway would start without its secrets.
    let env_file = profile.env_file();
    let home = env_file.to_string_lossy();
    if let Some(c) = home
        .chars()
        .find(|c| matches!(c, '*' | '?' | '[' | ']' | '\\'))
    {
        return Err(usage(format!(
            "{home}: {c:?} would make systemd read EnvironmentFile= as a pattern and skip this .env; choose a HERMES_HOME without * ? [ ] or \\"
        )));
    }
    let spec = UnitSpec {
        profile,
        scope,
        exec,
        run_as: src.run_as.clone(),
    };
    // Render once now, so bad values are usage errors before anything is touched.
    spec.render().map_err(|e| usage(e.to_string()))?;
    Ok(spec)
}

fn check_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if !path.is_absolute() {
        return Err(usage(format!(
            "--exec {}: must be an absolute path",
            path.display()
        )));
    }
    // systemd does not undo `$$` in the executable's own path (only in arguments), so a `$`
    // there can only end in a unit that fails with 203/EXEC.
    if path.to_string_lossy().contains('$') {
        return Err(usage(format!(
            "--exec {}: systemd cannot run a program whose path contains '$'; move or link it elsewhere",
            path.display()
        )));
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
        Ok(_) => Err(usage(format!(
            "--exec {}: not an executable file",
            path.display()
        ))),
        Err(e) => Err(usage(format!("--exec {}: {e}", path.display()))),
    }
}

fn seconds(flag: &str, raw: &str) -> anyhow::Result<u64> {
    let raw = raw.trim();
    let digits = raw.strip_suffix('s').unwrap_or(raw);
    match digits.parse::<u64>() {
        Ok(n) if n > 0 && n <= dropin::MAX_SECONDS => Ok(n),
        _ => Err(usage(format!(
            "{flag}={raw:?}: must be a whole number of seconds from 1 to {}, like 30",
            dropin::MAX_SECONDS
        ))),
    }
}

fn env_pair(flag: &str, raw: &str) -> anyhow::Result<(String, String)> {
    let (k, v) = raw.split_once('=').ok_or_else(|| {
        usage(format!(
            "{flag} {raw:?}: expected KEY=VALUE, like HTTPS_PROXY=http://proxy:8080"
        ))
    })?;
    escape::env_assignment(k, v).map_err(|e| usage(format!("{flag} {k}: {e}")))?;
    if let Some(why) = dropin::reserved_env(k) {
        return Err(usage(format!("{flag} {k}: cannot be set here: {why}")));
    }
    Ok((k.to_owned(), v.to_owned()))
}

fn settings(
    env: &[String],
    watchdog: Option<&str>,
    restart: Option<&str>,
) -> anyhow::Result<Settings> {
    let mut s = Settings::default();
    for raw in env {
        s.env.push(env_pair("--env", raw)?);
    }
    if let Some(w) = watchdog {
        s.directives
            .push((Directive::WatchdogSec, seconds("--watchdog-sec", w)?));
    }
    if let Some(r) = restart {
        s.directives
            .push((Directive::RestartSec, seconds("--restart-sec", r)?));
    }
    Ok(s)
}

/// `set` pairs: a supported directive name sets the directive, anything else an env var.
fn set_pairs(pairs: &[String]) -> anyhow::Result<Settings> {
    let mut s = Settings::default();
    for raw in pairs {
        let (k, v) = raw.split_once('=').ok_or_else(|| {
            usage(format!(
                "{raw:?}: expected KEY=VALUE, like HTTPS_PROXY=http://proxy:8080 or WatchdogSec=60"
            ))
        })?;
        match Directive::from_name(k) {
            Some(d) => s.directives.push((d, seconds(d.name(), v)?)),
            None => s.env.push(env_pair("set", raw)?),
        }
    }
    Ok(s)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What install, set, unset and uninstall report.
#[derive(Serialize)]
struct Report<'a> {
    unit: &'a str,
    scope: Scope,
    outcome: &'a str,
    dry_run: bool,
    steps: Vec<String>,
    notes: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    linger: Option<Linger>,
}

fn report(plan: &Plan, scope: Scope, outcome: &str, out: Output, linger: Option<Linger>) {
    let Output { dry_run, json } = out;
    let r = Report {
        unit: &plan.unit,
        scope,
        outcome,
        dry_run,
        steps: plan.steps.iter().map(ToString::to_string).collect(),
        notes: &plan.notes,
        linger,
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).expect("report serialises")
        );
        return;
    }
    let would = if dry_run { "would be " } else { "" };
    println!("{}: {would}{outcome} ({scope} scope)", plan.unit);
    for step in &plan.steps {
        println!("  {step}");
        if dry_run {
            if let Step::WriteFile { contents, .. } = step {
                for line in contents.lines() {
                    println!("  | {line}");
                }
            }
        }
    }
    for note in &plan.notes {
        println!("note: {note}");
    }
    if let Some(hint) = linger.and_then(|l| l.hint(&crate::linger::current_user())) {
        println!("note: {hint}");
    }
}

/// Unless this is a dry run, hold the lock that makes unit edits one at a time, from the
/// first read of the unit to the last effect.
async fn edit_lock(scope: Scope, dry_run: bool) -> anyhow::Result<Option<EditLock>> {
    if dry_run {
        return Ok(None);
    }
    let dir = scope
        .unit_dir()
        .ok_or(observed::ObserveError::NoUnitDir(scope))?;
    Ok(Some(EditLock::acquire(&dir, edit_lock::WAIT).await?))
}

/// Connect, unless this is a dry run and no manager answers (then plan from disk alone).
async fn connect(scope: Scope, dry_run: bool) -> anyhow::Result<Option<Systemd>> {
    match Systemd::connect(scope).await {
        Ok(s) => Ok(Some(s)),
        Err(e) if dry_run => {
            eprintln!("warning: {e}; planning from the files on disk alone");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// How a command that changes something prints: `--dry-run` and `--json`.
#[derive(Clone, Copy)]
struct Output {
    dry_run: bool,
    json: bool,
}

/// Carry out `plan` (unless `--dry-run`) and report it as `changed`, or as `unchanged` when
/// it changes nothing: the last two steps of every install-like command.
async fn carry_out(
    plan: &Plan,
    systemd: Option<&Systemd>,
    scope: Scope,
    changed: &str,
    out: Output,
    linger: Option<Linger>,
) -> anyhow::Result<u8> {
    if !out.dry_run {
        effects::apply(plan, systemd.expect("connected unless dry-run")).await?;
    }
    let outcome = if plan.is_unchanged() {
        "unchanged"
    } else {
        changed
    };
    report(plan, scope, outcome, out, linger);
    Ok(exit_code::OK)
}

async fn linger_for(scope: Scope) -> Option<Linger> {
    (scope == Scope::User).then_some(Linger::query(nix::unistd::getuid().as_raw()).await)
}

async fn install_cmd(args: InstallArgs) -> anyhow::Result<u8> {
    let spec = unit_spec(&args.source)?;
    let req = InstallRequest {
        settings: settings(
            &args.env,
            args.watchdog_sec.as_deref(),
            args.restart_sec.as_deref(),
        )?,
        spec,
        start: !args.no_start,
        force: args.force,
        migrate: args.migrate,
        now: now(),
    };
    let scope = req.spec.scope;
    let _lock = edit_lock(scope, args.dry_run).await?;
    let systemd = connect(scope, args.dry_run).await?;
    let observed =
        observed::observe(&req.spec.profile, scope, systemd.as_ref(), Siblings::Find).await?;
    let plan = install::plan_install(&req, &observed)?;
    let verb = if observed.unit_text.is_none() {
        "installed"
    } else {
        "updated"
    };
    let out = Output {
        dry_run: args.dry_run,
        json: args.json,
    };
    let linger = linger_for(scope).await;
    carry_out(&plan, systemd.as_ref(), scope, verb, out, linger).await
}

async fn uninstall_cmd(args: UninstallArgs) -> anyhow::Result<u8> {
    let scope = args.scope.scope();
    let profile = resolve_profile(&args.profile, scope, None)?;
    let _lock = edit_lock(scope, args.dry_run).await?;
    let systemd = connect(scope, args.dry_run).await?;
    let observed = observed::observe(&profile, scope, systemd.as_ref(), Siblings::Skip).await?;
    let plan = install::plan_uninstall(&observed, now());
    let out = Output {
        dry_run: args.dry_run,
        json: args.json,
    };
    carry_out(&plan, systemd.as_ref(), scope, "uninstalled", out, None).await
}

async fn set_cmd(args: SetArgs) -> anyhow::Result<u8> {
    let scope = args.scope.scope();
    let profile = resolve_profile(&args.profile, scope, None)?;
    let settings = set_pairs(&args.pairs)?;
    let _lock = edit_lock(scope, args.dry_run).await?;
    let systemd = connect(scope, args.dry_run).await?;
    let observed = observed::observe(&profile, scope, systemd.as_ref(), Siblings::Skip).await?;
    let plan = install::plan_set(&args.profile, &settings, &observed, !args.no_restart)?;
    let out = Output {
        dry_run: args.dry_run,
        json: args.json,
    };
    carry_out(&plan, systemd.as_ref(), scope, "updated", out, None).await
}

async fn unset_cmd(args: UnsetArgs) -> anyhow::Result<u8> {
    let scope = args.scope.scope();
    let profile = resolve_profile(&args.profile, scope, None)?;
    for key in &args.keys {
        if Directive::from_name(key).is_none() {
            escape::env_name(key).map_err(|e| usage(e.to_string()))?;
        }
    }
    let _lock = edit_lock(scope, args.dry_run).await?;
    let systemd = connect(scope, args.dry_run).await?;
    let observed = observed::observe(&profile, scope, systemd.as_ref(), Siblings::Skip).await?;
    let plan = install::plan_unset(&args.profile, &args.keys, &observed, !args.no_restart)?;
    let out = Output {
        dry_run: args.dry_run,
        json: args.json,
    };
    carry_out(&plan, systemd.as_ref(), scope, "updated", out, None).await
}

async fn lifecycle_cmd(args: UnitArgs, action: &'static str) -> anyhow::Result<u8> {
    let scope = args.scope.scope();
    let profile = resolve_profile(&args.profile, scope, None)?;
    let systemd = Systemd::connect(scope).await?;
    let unit = profile.unit_name();
    match action {
        "start" => systemd.start(&unit).await?,
        "stop" => systemd.stop(&unit).await?,
        _ => systemd.restart(&unit).await?,
    }
    println!("{unit}: {action} done");
    Ok(exit_code::OK)
}

async fn status_cmd(args: StatusArgs) -> anyhow::Result<u8> {
    let scope = args.scope.scope();
    let only = args.profile.as_deref().map(parse_profile).transpose()?;
    let systemd = Systemd::connect(scope).await?;
    let (report, linger) = tokio::join!(
        status::gather(&systemd, only.as_ref(), None),
        linger_for(scope)
    );
    let mut report = report?;
    report.linger = linger;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(exit_code::OK)
}

/// Exit 0 with no errors, 1 with errors; 2 (as a usage error) when doctor could not look at
/// anything at all, so a script can tell "unhealthy" from "could not tell".
async fn doctor_cmd(args: DoctorArgs) -> anyhow::Result<u8> {
    let only = args.profile.as_deref().map(parse_profile).transpose()?;
    if args.fix {
        let out = crate::doctor::run_fix(only.as_ref())
            .await
            .map_err(|e| usage(e.to_string()))?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            print!("{}", out.to_text(crate::doctor::colour_stdout()));
        }
        for why in &out.failed {
            eprintln!("fix failed: {why}");
        }
        return Ok(out.report.exit_code());
    }
    let report = crate::doctor::run(only.as_ref())
        .await
        .map_err(|e| usage(e.to_string()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_text(crate::doctor::colour_stdout()));
    }
    Ok(report.exit_code())
}

//! `reload`: ask a profile's running gateway to read its configuration again (SIGHUP), wait
//! for what came of it in the state file, and say so. What `ExecReload=` runs, so
//! `systemctl reload` waits for the result too; under launchd the same command signals the
//! gateway itself.
//!
//! The pid comes from the pid file, and is signalled only once the kernel's lock table says
//! it holds the profile's instance lock and its command line is `gateway run --profile NAME`
//! (on Linux; elsewhere the state file must name the same live pid): a pid file left by a dead
//! gateway may name anyone's process by now, and SIGHUP kills most of them.

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::args::ReloadArgs;
use super::error::usage;
use super::error::{CliError, ReloadError};
use super::validate::parse_profile;
use crate::bounded_read::Owner;
use crate::exit_code;
use crate::gateway::pid_file::PidFile;
use crate::gateway::state_file::{ReloadOutcome, ReloadRecord, StateFile};
use crate::profile::Profile;

pub(super) fn run(args: ReloadArgs) -> Result<u8, CliError> {
    let name = parse_profile(&args.profile)?;
    let profile = Profile::from_env(name).map_err(|e| usage(e.to_string()))?;
    let record = reload(&profile, args.timeout)?;
    println!(
        "{}: reload #{} applied: {}",
        profile.name(),
        record.generation,
        record.reason
    );
    Ok(exit_code::OK)
}

/// Signal the profile's gateway and wait for its answer in the state file.
fn reload(profile: &Profile, timeout: Duration) -> Result<ReloadRecord, ReloadError> {
    let name = profile.name().to_string();
    let not_running = || ReloadError::NotRunning {
        profile: name.clone(),
    };
    let pid = gateway_pid(profile).ok_or_else(not_running)?;
    let raw = Pid::from_raw(i32::try_from(pid).map_err(|_| not_running())?);
    // A reload that began before the signal may have read the files before they were last
    // written: only one that began after it answers this command (signals coalesce, so one
    // always does).
    let sent = crate::runtime::reload::monotonic_usec();
    kill(raw, Signal::SIGHUP).map_err(|source| ReloadError::Signal { pid, source })?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(r) = last_reload(profile, pid).filter(|r| r.began_monotonic_usec >= sent) {
            return match r.outcome {
                ReloadOutcome::Refused => Err(ReloadError::Refused { reason: r.reason }),
                _ => Ok(r),
            };
        }
        if !crate::process_probe::exists(pid) {
            return Err(ReloadError::Exited { pid, profile: name });
        }
        if Instant::now() >= deadline {
            return Err(ReloadError::NoAnswer {
                pid,
                profile: name,
                waited: timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The reload record in the state file, when `pid` wrote it.
fn last_reload(profile: &Profile, pid: u32) -> Option<ReloadRecord> {
    let state = StateFile::load(&profile.state_file(), Owner::SelfOrRoot).ok()??;
    (state.pid == pid).then_some(state.reload).flatten()
}

/// The running gateway of `profile`: the pid file's, once it is known to be the gateway.
fn gateway_pid(profile: &Profile) -> Option<u32> {
    let record = PidFile::read(&profile.pid_file())?;
    let pid = record.pid;
    if record.profile != profile.name().as_str() || !crate::process_probe::exists(pid) {
        return None;
    }
    is_the_gateway(profile, pid).then_some(pid)
}

#[cfg(target_os = "linux")]
fn is_the_gateway(profile: &Profile, pid: u32) -> bool {
    let owner = crate::gateway::flock::holder(&profile.lock_file());
    owner.pid == Some(pid) && owner.profile.as_deref() == Some(profile.name().as_str())
}

/// No lock table to ask: the state file, which only the lock's holder writes, must name the
/// same pid.
#[cfg(not(target_os = "linux"))]
fn is_the_gateway(profile: &Profile, pid: u32) -> bool {
    StateFile::load(&profile.state_file(), Owner::SelfOrRoot)
        .ok()
        .flatten()
        .is_some_and(|s| s.pid == pid)
}

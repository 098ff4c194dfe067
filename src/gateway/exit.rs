//! How a gateway run ended, and the exit status that makes its service manager do the right
//! thing next, decided in one table for both managers.
//!
//! The two managers read a status in opposite ways. The systemd unit restarts every exit but
//! 78 (`Restart=always` with `RestartPreventExitStatus=78`). launchd has no such list; the
//! plist's `KeepAlive = { SuccessfulExit = false }` restarts every exit but 0, and a death by
//! signal too (launchd's `job_keepalive()` counts only `WIFEXITED && WEXITSTATUS == 0` as
//! successful; see `launchd::plist`). So "stay down" is 78 under systemd and 0 under launchd,
//! while "restart me" (75) and any other failure (1) restart under both.
//!
//! A requested stop (SIGTERM, SIGINT; `launchctl bootout` sends SIGTERM) exits 0 under both:
//! after a `bootout` launchd has nothing left to keep alive. The run loop returns without an
//! error only on such a signal ([`Requested`]), so there is no clean exit that nobody asked
//! for: anything else that ends a run is an error with one of the outcomes below, and a panic
//! or a crash signal is a non-zero status that both managers restart.

use crate::exit_code;
use crate::service::manager::Manager;

/// The only way a run ends without an error: a stop someone asked for, by this signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Requested(pub(crate) &'static str);

/// How a run ended, in the terms the service manager must act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// SIGTERM or SIGINT.
    Stopped,
    /// A conflict or a configuration error that a restart cannot fix: another gateway holds
    /// the profile or a token, `gateway.toml` is invalid, a secret is missing, the platform
    /// refused the credentials for good. Restarting would only fail the same way, forever.
    StayDown,
    /// A clean restart is the cure: a component stale past the self-watchdog, an adapter
    /// without a connection past `max-outage`, a component that panicked.
    Restart,
    /// Anything else (a file that cannot be written, a lock directory that cannot be used):
    /// perhaps passing, so the manager tries again after its restart delay.
    Failed,
}

/// The exit status for `outcome` under `manager`. Every pair is listed, so a new outcome or
/// manager has to say what it means to each.
pub(crate) fn status(manager: Manager, outcome: Outcome) -> u8 {
    match (manager, outcome) {
        (Manager::Systemd | Manager::Launchd, Outcome::Stopped) => exit_code::OK,
        // `RestartPreventExitStatus=78` keeps the unit down.
        (Manager::Systemd, Outcome::StayDown) => exit_code::CONFIG,
        // The only status `SuccessfulExit = false` leaves down. 78 would be respawned every
        // `ThrottleInterval`, the loop hermes-agent's own tracker reports.
        (Manager::Launchd, Outcome::StayDown) => exit_code::OK,
        (Manager::Systemd | Manager::Launchd, Outcome::Restart) => exit_code::TEMPFAIL,
        (Manager::Systemd | Manager::Launchd, Outcome::Failed) => exit_code::FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What each manager does after an exit with `status`, by its own rules: the unit's
    /// `Restart=always` + `RestartPreventExitStatus=78`, the plist's `SuccessfulExit = false`.
    fn restarts(manager: Manager, status: u8) -> bool {
        match manager {
            Manager::Systemd => status != exit_code::CONFIG,
            Manager::Launchd => status != exit_code::OK,
        }
    }

    #[test]
    fn each_outcome_has_its_status_under_each_manager() {
        use Outcome::*;
        let table = [
            (Stopped, 0, 0),
            (StayDown, 78, 0),
            (Restart, 75, 75),
            (Failed, 1, 1),
        ];
        for (outcome, systemd, launchd) in table {
            assert_eq!(status(Manager::Systemd, outcome), systemd, "{outcome:?}");
            assert_eq!(status(Manager::Launchd, outcome), launchd, "{outcome:?}");
        }
    }

    #[test]
    fn under_either_manager_only_a_conflict_stays_down_and_every_failure_restarts() {
        for manager in [Manager::Systemd, Manager::Launchd] {
            let after = |outcome| restarts(manager, status(manager, outcome));
            assert!(!after(Outcome::StayDown), "{manager}: a conflict respawns");
            assert!(after(Outcome::Restart), "{manager}: restart me");
            assert!(after(Outcome::Failed), "{manager}: a failure");
        }
        // A requested stop is 0 under both; systemd does not restart it only because the stop
        // was its own job, and launchd because `bootout` removed the job.
        assert_eq!(status(Manager::Launchd, Outcome::Stopped), exit_code::OK);
    }
}

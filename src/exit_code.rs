//! Process exit codes, documented in one place (docs/exit-codes.md mirrors this).
//!
//! The gateway's codes drive its service manager, and the two managers read them in opposite
//! ways. Under systemd, 75 means "restart me", and 78 is listed in `RestartPreventExitStatus=`
//! so a configuration conflict stays down instead of flapping. launchd has no such list: the
//! plist's `KeepAlive = { SuccessfulExit = false }` restarts every exit but 0, so under launchd
//! a conflict or configuration error exits 0 (with its reason logged and left in the state
//! file) and everything that must restart is non-zero:
//!
//! | the gateway's run ended by           | systemd | launchd |
//! |--------------------------------------|---------|---------|
//! | SIGTERM or SIGINT                    | 0       | 0       |
//! | a conflict or configuration error    | 78      | 0       |
//! | "restart me" (self-watchdog, outage) | 75      | 75      |
//! | any other failure                    | 1       | 1       |
//!
//! Which error is which outcome is decided in one match, `GatewayError::outcome`
//! (`runtime.rs`), and which outcome is which code under which manager in one table,
//! `gateway::exit::status`; `CliError::exit_code` (`cli/error.rs`) maps every other command's
//! failures.

/// A requested stop, or a command that succeeded; under launchd also a gateway that must stay
/// down.
pub(crate) const OK: u8 = 0;
/// Anything else that went wrong.
pub(crate) const FAILURE: u8 = 1;
/// Bad input on the command line: nothing was touched.
pub(crate) const USAGE: u8 = 2;
/// EX_TEMPFAIL: the gateway wants a clean restart (stale component, outage past max-outage).
pub(crate) const TEMPFAIL: u8 = 75;
/// EX_CONFIG: a conflict or configuration error that a restart cannot fix (under systemd).
pub(crate) const CONFIG: u8 = 78;

//! Process exit codes, documented in one place (docs/exit-codes.md mirrors this).
//!
//! The gateway's codes drive systemd: 75 means "restart me", and 78 is listed in
//! `RestartPreventExitStatus=` so a configuration conflict stays down instead of flapping.
//! Which failure exits with which code is decided in one match, `CliError::exit_code`
//! (`cli/error.rs`).

/// A requested stop, or a command that succeeded.
pub(crate) const OK: u8 = 0;
/// Anything else that went wrong.
pub(crate) const FAILURE: u8 = 1;
/// Bad input on the command line: nothing was touched.
pub(crate) const USAGE: u8 = 2;
/// EX_TEMPFAIL: the gateway wants a clean restart (stale component, outage past max-outage).
pub(crate) const TEMPFAIL: u8 = 75;
/// EX_CONFIG: a conflict or configuration error that a restart cannot fix.
pub(crate) const CONFIG: u8 = 78;

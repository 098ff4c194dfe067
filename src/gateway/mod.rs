//! The gateway process that a unit runs: `hermes-svc gateway run --profile NAME`.

pub mod flock;
pub mod notify;
pub mod pid_file;
pub mod runtime;

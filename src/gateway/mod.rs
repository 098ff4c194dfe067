//! The gateway process that a unit runs: `hermes-svc gateway run --profile NAME`.

pub mod cron;
pub mod fault;
pub mod flock;
pub mod health;
pub mod notify;
pub mod pid_file;
pub mod runtime;
pub mod spool;

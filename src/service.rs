//! The manager-neutral half of running a profile as a service: which manager serves this
//! machine, and (as the backends move in) the request, plan, observation and rules that
//! systemd and launchd share.

pub mod manager;

//! The manager-neutral half of running a profile as a service: which manager serves this
//! machine, the plan a command makes and the rules it makes it by, and which profile a job
//! serves. The backends (`crate::systemd`, `crate::launchd`) observe their world and carry
//! plans out; the decisions are made here.

pub mod definition;
pub(crate) mod files;
pub mod manager;
pub mod observed;
pub mod plan;
pub mod planner;
pub mod role;
pub mod served_profile;
pub mod settings;

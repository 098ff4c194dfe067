//! Integration tests: the real `hermes-svc` binary against a real systemd user manager.

mod adapter;
mod adapter_rig;
mod crashes_and_races;
mod doctor;
mod gateway;
mod gateway_systemd;
mod harness;
mod install;
mod platform_rules;
mod property;
mod units;

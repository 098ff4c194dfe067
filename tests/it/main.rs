//! Integration tests: the real `hermes-svc` binary against a real systemd user manager.

mod adapter;
mod adapter_rig;
mod crashes_and_races;
mod doctor;
mod faked_health;
mod gateway;
mod gateway_systemd;
mod harness;
mod hostile_files;
mod hostile_text;
mod install;
mod launchd_plist;
mod platform_rules;
mod property;
mod sandbox;
mod token_lock;
mod units;

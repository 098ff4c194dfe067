//! Integration tests: the real `hermes-svc` binary against a real systemd user manager.

mod adapter;
mod adapter_rig;
mod crashes_and_races;
mod doctor;
mod doctor_catalogue;
mod faked_health;
mod gateway;
mod gateway_launchd;
mod gateway_systemd;
mod harness;
mod hostile_files;
mod hostile_text;
mod install;
mod launchctl;
mod launchd_plist;
mod line_counter;
mod mock_runtime;
mod odd_text;
mod platform_rules;
mod profile_builder;
mod property;
mod property_toml;
mod sandbox;
mod token_lock;
mod unit_props;
mod units;

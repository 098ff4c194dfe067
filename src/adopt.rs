//! `hermes-svc adopt`: a Hermes install's platforms moved to the profile's gateway.
//! The reading and mapping half is pure (data in, data out); the effects live beside it.

pub mod cron;
pub mod dotenv;
pub mod hermes_home;
pub mod mapping;
pub mod pairing;

//! Hermes's cron jobs (TODO)

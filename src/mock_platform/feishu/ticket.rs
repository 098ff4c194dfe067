//! What endpoint discovery hands out: a connect URL whose single-use ticket the upgrade must
//! present, or a refusal. Below the state that issues and checks tickets, the endpoint that
//! answers discovery and the connection that serves the ticket's holder.

use super::config::ClientConfig;
use super::faults::Refusal;

/// An issued connect URL's identity: single use, so every connect needs a fresh discovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub(crate) device_id: String,
    pub(crate) service: i32,
}

/// What endpoint discovery answers.
pub(crate) enum Discovery {
    Url { url: String, config: ClientConfig },
    Refused(Refusal),
}

//! How an HTTP long poll is timed, for every platform that receives by one: how long a poll
//! may wait on the server, and the grace on top of that before a poll with no answer is
//! called a dead connection.

use std::time::Duration;

use toml::Spanned;

use super::keys::AdapterKeys;
use super::ConfigError;

/// Time for the answer to cross the network once the server stops waiting.
const POLL_GRACE: Duration = Duration::from_secs(10);
/// Past this a poll is not "long" but a connection nobody watches.
const MAX_POLL_TIMEOUT: Duration = Duration::from_secs(120);

/// How one long poll is timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollTiming {
    /// How long the server may hold a poll with nothing to say (the first poll's, where the
    /// server names each next poll's wait).
    pub timeout: Duration,
    /// On top of `timeout`: a poll unanswered by then is a dead connection.
    pub grace: Duration,
}

impl PollTiming {
    /// The client's deadline for a poll that may wait `timeout` on the server.
    pub fn deadline(&self, timeout: Duration) -> Duration {
        timeout + self.grace
    }
}

impl AdapterKeys<'_> {
    /// `poll-timeout` (`default` when absent) and `poll-grace`.
    pub fn poll_timing(
        &self,
        poll_timeout: &Option<Spanned<String>>,
        poll_grace: &Option<Spanned<String>>,
        default: Duration,
    ) -> Result<PollTiming, ConfigError> {
        let name = self.name();
        let timeout = self.opt_duration("poll-timeout", poll_timeout, default)?;
        let span = poll_timeout.as_ref().map_or(0..0, |r| r.span());
        if timeout > MAX_POLL_TIMEOUT {
            return self.err(
                span,
                format!(
                    "adapter {name:?}: poll-timeout is longer than {}s; a poll held that long is \
                     a connection nobody watches (the platforms' own ceilings are lower)",
                    MAX_POLL_TIMEOUT.as_secs()
                ),
            );
        }
        // The platforms take whole seconds, so "500ms" would be sent as 0: a short poll,
        // answered at once, over and over. A long poll of under a second is not one anywhere.
        if timeout < Duration::from_secs(1) || timeout.subsec_nanos() != 0 {
            return self.err(
                span,
                format!(
                    "adapter {name:?}: poll-timeout must be a whole number of seconds, at least \
                     1s (e.g. \"30s\"); the platforms count a poll's wait in seconds"
                ),
            );
        }
        let grace = self.opt_duration("poll-grace", poll_grace, POLL_GRACE)?;
        Ok(PollTiming { timeout, grace })
    }
}

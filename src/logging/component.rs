//! The part of the gateway a log line comes from, as a span around that part's task, so every
//! line the task logs carries it (on the journal as `HERMES_COMPONENT`).
//!
//! A span rather than a field on each event: a task's helpers (connecting, the spool, the
//! sender) log without knowing who called them. Each span is a root (`parent: None`), so a
//! line carries exactly one component even when its task was started from another one's.
//! Spans are `ERROR` level so that they are enabled under any `HERMES_LOG` filter that lets a
//! line through; the plain-text output hides them (logging.rs).

use tracing::Span;

/// The gateway's parts, as the journal names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Component {
    /// The run loop: start, READY=1, the drain.
    Runtime,
    /// The watchdog tick: the state file, WATCHDOG=1, staleness.
    Watchdog,
    /// A platform connection (which one is the line's `adapter` field).
    Adapter,
    /// The cron ticker and its jobs.
    Cron,
    /// The outbox's delivery workers.
    Outbox,
    /// The local agent API.
    Api,
    /// The bridge to the agent behind the gateway (`[agent]`).
    Agent,
    /// The access rules: who may reach the agent, and what strangers are told.
    Access,
}

impl Component {
    /// The value of `HERMES_COMPONENT`, stable for `journalctl HERMES_COMPONENT=...`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Component::Runtime => "runtime",
            Component::Watchdog => "watchdog",
            Component::Adapter => "adapter",
            Component::Cron => "cron",
            Component::Outbox => "outbox",
            Component::Api => "api",
            Component::Agent => "agent",
            Component::Access => "access",
        }
    }

    /// A root span naming this component, to instrument its task with or to enter.
    pub(crate) fn span(self) -> Span {
        tracing::error_span!(parent: None, "component", component = self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Component;

    #[test]
    fn names_are_distinct_lowercase_words() {
        let all = [
            Component::Runtime,
            Component::Watchdog,
            Component::Adapter,
            Component::Cron,
            Component::Outbox,
            Component::Api,
            Component::Agent,
        ];
        let names: std::collections::BTreeSet<_> = all.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), all.len());
        assert!(names
            .iter()
            .all(|n| n.chars().all(|c| c.is_ascii_lowercase())));
    }
}

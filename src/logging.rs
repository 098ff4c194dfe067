//! Where the process's log lines go: natively to journald, with structured fields, when
//! systemd connected stderr to the journal; plain text on stderr otherwise.
//!
//! systemd.exec(5) tells a service its stderr is the journal through `JOURNAL_STREAM`
//! (`journal_stream.rs`). Only then does the gateway talk journald's native protocol, so that
//! every line carries `HERMES_PROFILE`, `HERMES_COMPONENT` (`component.rs`), `HERMES_ADAPTER`
//! and `HERMES_CODE` where it has them, and a `PRIORITY` from its level (docs/logs.md). A
//! foreground run, launchd, or a stderr redirected elsewhere keeps the plain text, because a
//! person or a log file reads it there.

pub(crate) mod component;
mod journal_stream;
pub(crate) mod plain_text;
pub(crate) mod throttle;

use tracing_journald::{Priority, PriorityMappings};
use tracing_subscriber::filter::{filter_fn, EnvFilter, FilterExt, LevelFilter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

pub(crate) use component::Component;

/// The prefix tracing-journald puts before every field of ours: `adapter` becomes
/// `HERMES_ADAPTER`, and nothing of ours can pass for a journal field such as `PRIORITY`.
const FIELD_PREFIX: &str = "HERMES";

/// Set up logging for this process, once. `profile` is the profile a gateway serves: on the
/// journal it goes on every line as `HERMES_PROFILE`, since one process serves one profile.
/// `default_level` applies unless `HERMES_LOG` holds a filter.
pub(crate) fn init(profile: Option<&str>, default_level: &str) {
    let filter =
        || EnvFilter::try_from_env("HERMES_LOG").unwrap_or_else(|_| EnvFilter::new(default_level));
    if journal_stream::stderr_is_journal() {
        if let Some(journal) = journal(profile) {
            let _ = tracing_subscriber::registry()
                .with(journal.with_filter(filter()))
                .try_init();
            return;
        }
    }
    let _ = tracing_subscriber::registry()
        .with(plain(filter()))
        .try_init();
}

/// Plain text on stderr, every field written by `plain_text.rs`, so that a platform's text
/// can neither forge a line nor drive a terminal. The component spans (component.rs) are for
/// the journal's fields only: hidden here, so the plain text reads as it always has. One
/// filter, not two stacked:
/// under stacked per-layer filters the level filter still enabled the spans, so every poll of
/// every task entered and left a span that nothing showed (about 6% of a thousand-adapter
/// gateway's CPU, docs/benchmarks.md).
fn plain<S>(filter: EnvFilter) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_subscriber::fmt::layer()
        .fmt_fields(plain_text::PlainFields)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .with_filter(
            filter_fn(|meta| !meta.is_span())
                // Without a hint of its own, the pair would have none, and `try_init` would
                // then let the `log` records of every dependency through at TRACE: each
                // tungstenite frame's `log::trace!` dispatched, to be refused (about 4% of a
                // thousand-adapter gateway's CPU). With it, the pair's hint is the filter's.
                .with_max_level_hint(LevelFilter::TRACE)
                .and(filter),
        )
}

/// The journald layer, or `None` when its socket cannot be reached (then the caller falls
/// back to plain text on stderr, which systemd still delivers to the journal).
fn journal(profile: Option<&str>) -> Option<tracing_journald::Layer> {
    let layer = tracing_journald::layer().ok()?;
    let mut layer = layer
        .with_field_prefix(Some(FIELD_PREFIX.to_owned()))
        .with_priority_mappings(priorities());
    // Only a valid profile name (the gateway refuses any other, and says so): the value is a
    // plain token, fit for a journal match.
    if let Some(name) = profile.filter(|p| crate::profile::ProfileName::parse(p).is_ok()) {
        layer = layer.with_custom_fields([(format!("{FIELD_PREFIX}_PROFILE"), name)]);
    }
    Some(layer)
}

/// syslog's reading of the levels, which `journalctl -p` filters by: info is Informational
/// (6), not tracing-journald's default Notice (5), which is for what is unusual.
fn priorities() -> PriorityMappings {
    PriorityMappings {
        error: Priority::Error,
        warn: Priority::Warning,
        info: Priority::Informational,
        debug: Priority::Debug,
        trace: Priority::Debug,
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::filter::EnvFilter;
    use tracing_subscriber::layer::SubscriberExt;

    use super::{plain, Component};

    #[test]
    fn plain_text_leaves_component_spans_disabled_and_lines_enabled() {
        let subscriber = tracing_subscriber::registry().with(plain(EnvFilter::new("info")));
        tracing::subscriber::with_default(subscriber, || {
            // A disabled span costs its task nothing to enter on every poll.
            assert!(Component::Adapter.span().is_disabled());
            assert!(tracing::enabled!(tracing::Level::INFO));
            assert!(!tracing::enabled!(tracing::Level::DEBUG));
        });
    }

    #[test]
    fn plain_text_hints_its_level_so_log_records_below_it_are_refused_at_the_call() {
        use tracing_subscriber::Layer;
        let layer = plain::<tracing_subscriber::Registry>(EnvFilter::new("info"));
        assert_eq!(
            layer.max_level_hint(),
            Some(tracing_subscriber::filter::LevelFilter::INFO)
        );
    }
}

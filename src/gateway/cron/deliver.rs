//! A job's result, delivered to a chat: its stdout, through the outbox, once per run.
//!
//! Once per run is the idempotency key, `cron:JOB:DUE` (the scheduled time of the run). A
//! gateway restarted in the middle of a delivery finds the message in the outbox and sends it
//! from there; a run repeated for the same due time (a missed run caught up) is accepted once.

use std::process::ExitStatus;

use super::job::Outcome;
use super::CronSpec;
use crate::gateway::outbox::{Outbox, Policy, Request};
use crate::gateway::send::TextUnit;

/// How much of a job's stdout is kept for delivery; the rest only reaches `cron.log`.
pub(super) const CAPTURE_MAX: usize = 64 * 1024;

/// The start of a job's stdout, and how many bytes after it were not kept.
#[derive(Debug, Default)]
pub(super) struct Captured {
    pub(super) bytes: Vec<u8>,
    pub(super) dropped: u64,
}

impl Captured {
    pub(super) fn push(&mut self, chunk: &[u8]) {
        let room = CAPTURE_MAX.saturating_sub(self.bytes.len());
        let keep = chunk.len().min(room);
        self.bytes.extend_from_slice(&chunk[..keep]);
        self.dropped += (chunk.len() - keep) as u64;
    }
}

/// What a run sends: its stdout when it succeeded and printed something, a short notice when
/// it failed and `deliver-failures` asks for one, and nothing otherwise (a run stopped by a
/// shutdown did not finish, so it has no result).
pub(super) fn message_text(
    spec: &CronSpec,
    outcome: &Outcome,
    stdout: &Captured,
    (max, unit): (usize, TextUnit),
) -> Option<String> {
    let failed = |why: String| {
        spec.deliver_failures.then(|| {
            fit(
                &format!("cron job {} failed: {why}", spec.name),
                0,
                max,
                unit,
            )
        })
    };
    match outcome {
        Outcome::Exited(status) if status.success() => {
            let text = String::from_utf8_lossy(&stdout.bytes);
            let text = text.trim_end();
            (!text.trim().is_empty()).then(|| fit(text, stdout.dropped, max, unit))
        }
        Outcome::Exited(status) => failed(describe(status)),
        Outcome::TimedOut => failed(format!(
            "timed out after {}",
            humantime::format_duration(spec.timeout)
        )),
        Outcome::Failed => failed("it could not be started; see logs/cron.log".into()),
        Outcome::Stopped => None,
    }
}

fn describe(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// `text` cut to `max` `unit`s, with a mark saying how much is missing, so that a cut is never
/// mistaken for the whole output.
pub(super) fn fit(text: &str, dropped_bytes: u64, max: usize, unit: TextUnit) -> String {
    if dropped_bytes == 0 && unit.len(text) <= max {
        return text.to_owned();
    }
    let mark = |missing: u64| {
        format!("\n[… truncated: {missing} more bytes of output; all of it is in logs/cron.log]")
    };
    // The mark's own length depends on the number in it; the longest it can be is enough.
    let room = max.saturating_sub(unit.len(&mark(u64::MAX)));
    let kept = unit.prefix(text, room);
    let missing = dropped_bytes + (text.len() - kept.len()) as u64;
    format!("{kept}{}", mark(missing))
}

/// Queue this run's message. Errors are the caller's to log: the run itself succeeded.
pub(super) async fn submit(
    outbox: &Outbox,
    spec: &CronSpec,
    due: &str,
    text: String,
) -> Result<String, crate::gateway::outbox::SubmitError> {
    let deliver = spec
        .deliver
        .as_ref()
        .expect("only jobs with deliver submit");
    let submitted = outbox
        .submit(Request {
            adapter: deliver.adapter.clone(),
            target: deliver.target.to_string(),
            text,
            reply_to: None,
            idempotency_key: format!("cron:{}:{due}", spec.name),
            policy: Policy::AtMostOnce,
            files: vec![],
        })
        .await?;
    Ok(submitted.message.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_is_marked_and_fits() {
        let long = "x".repeat(5000);
        let out = fit(&long, 0, 2000, TextUnit::Chars);
        assert!(out.chars().count() <= 2000, "{}", out.chars().count());
        assert!(out.ends_with("all of it is in logs/cron.log]"));
        assert!(out.contains("truncated: "));
        assert_eq!(fit("short", 0, 2000, TextUnit::Chars), "short");
        let dropped = fit("short", 10, 2000, TextUnit::Chars);
        assert!(
            dropped.starts_with("short\n[… truncated: 10 more bytes"),
            "{dropped}"
        );
    }

    #[test]
    fn capture_keeps_the_start_and_counts_the_rest() {
        let mut c = Captured::default();
        c.push(&vec![b'a'; CAPTURE_MAX - 1]);
        c.push(b"bcd");
        assert_eq!(c.bytes.len(), CAPTURE_MAX);
        assert_eq!(c.dropped, 2);
    }
}

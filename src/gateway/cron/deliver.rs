//! A job's result, delivered to a chat: its stdout, through the outbox, once per run, and
//! the files its output names (`MEDIA:/path`, as Hermes names them) from the directories the
//! job's `attach-from` trusts.
//!
//! Once per run is the idempotency key, `cron:JOB:DUE` (the scheduled time of the run; its
//! files `cron:JOB:DUE:fN`). A gateway restarted in the middle of a delivery finds the
//! messages in the outbox and sends them from there; a run repeated for the same due time (a
//! missed run caught up) is accepted once.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;

use super::job::Outcome;
use super::CronSpec;
use crate::gateway::outbox::{NewFile, Outbox, Policy, Request};
use crate::gateway::send::TextUnit;
use crate::media::named::{self, media_tags};

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
#[derive(Debug, Default)]
pub(super) struct Output {
    /// May be empty when the output was only files.
    pub(super) text: String,
    pub(super) files: Vec<NewFile>,
}

/// The run's [`Output`], its text cut to `max` `unit`s.
pub(super) fn output(
    spec: &CronSpec,
    workdir: &Path,
    outcome: &Outcome,
    stdout: &Captured,
    (max, unit): (usize, TextUnit),
) -> Option<Output> {
    let failed = |why: String| {
        spec.deliver_failures.then(|| Output {
            text: fit(
                &format!("cron job {} failed: {why}", spec.name),
                0,
                max,
                unit,
            ),
            files: vec![],
        })
    };
    match outcome {
        Outcome::Exited(status) if status.success() => printed(spec, workdir, stdout, (max, unit)),
        Outcome::Exited(status) => failed(describe(status)),
        Outcome::TimedOut => failed(format!(
            "timed out after {}",
            humantime::format_duration(spec.timeout)
        )),
        Outcome::Failed => failed("it could not be started; see logs/cron.log".into()),
        Outcome::Stopped => None,
    }
}

/// What a successful run printed, with the files it named taken out. A file that is not
/// sent is said at the top of the text, where a cut does not reach.
fn printed(
    spec: &CronSpec,
    workdir: &Path,
    stdout: &Captured,
    (max, unit): (usize, TextUnit),
) -> Option<Output> {
    let (text, paths) = media_tags(&String::from_utf8_lossy(&stdout.bytes));
    let (files, notes) = attachments(spec, workdir, paths);
    let text: String = notes
        .iter()
        .map(|n| format!("[{n}]\n"))
        .chain([text.trim_end().to_owned()])
        .collect();
    // Leading spaces are the job's layout; only trailing ones go.
    let text = text.trim_end();
    let blank = text.trim().is_empty();
    if blank && files.is_empty() {
        return None;
    }
    let text = match blank {
        true => String::new(),
        false => fit(text, stdout.dropped, max, unit),
    };
    Some(Output { text, files })
}

/// The files `paths` name, opened where the job's `attach-from` allows them, and a note for
/// each that is not.
fn attachments(
    spec: &CronSpec,
    workdir: &Path,
    paths: Vec<PathBuf>,
) -> (Vec<NewFile>, Vec<String>) {
    let (mut files, mut notes) = (vec![], vec![]);
    for path in paths {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".into());
        let mut why = if spec.attach_from.is_empty() {
            "the job has no attach-from in gateway.toml".to_owned()
        } else {
            named::Refused::Outside.says("the job's attach-from")
        };
        for root in &spec.attach_from {
            match named::below(&path, &workdir.join(root)) {
                Ok(_) => {
                    why.clear();
                    break;
                }
                Err(named::Refused::Outside) => {}
                Err(refused) => why = refused.says(""),
            }
        }
        if why.is_empty() {
            match std::fs::File::open(&path) {
                Ok(file) => {
                    files.push(NewFile {
                        file: Arc::new(file),
                        name,
                    });
                    continue;
                }
                Err(e) => why = format!("it could not be read: {e}"),
            }
        }
        tracing::warn!(job = %spec.name, path = %path.display(), why = %why, "a file the cron job named is not sent");
        notes.push(format!("a file the job named, {name}, was not sent: {why}"));
    }
    (files, notes)
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

/// Queue this run's messages: the text, then each file. Errors are the caller's to log: the
/// run itself succeeded. The text's message id, when there was text.
pub(super) async fn submit(
    outbox: &Outbox,
    spec: &CronSpec,
    due: &str,
    output: Output,
) -> Result<Option<String>, crate::gateway::outbox::SubmitError> {
    let deliver = spec
        .deliver
        .as_ref()
        .expect("only jobs with deliver submit");
    let key = format!("cron:{}:{due}", spec.name);
    let mut like = Request {
        adapter: deliver.adapter.clone(),
        target: deliver.target.to_string(),
        text: output.text,
        reply_to: None,
        idempotency_key: key.clone(),
        policy: Policy::AtMostOnce,
        files: vec![],
    };
    let id = if like.text.is_empty() {
        None
    } else {
        Some(outbox.submit(like.clone()).await?.message.id)
    };
    like.idempotency_key = format!("{key}:");
    let whose = format!("a file from cron job {}", spec.name);
    outbox.submit_files(&like, output.files, &whose).await?;
    Ok(id)
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

//! One request to a send endpoint, the way every platform's endpoint runs it: logged as an
//! attempt whatever comes of it, met by the platform's armed [`SendFault`] before and after
//! processing, and settled against the record. What differs per platform (its checks, its
//! dedupe rule, the shapes of its answers) is the platform's; the order is this module's.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::fault::SendFault;
use super::post::{unix_ms_now, Platform, SendAttempt, Target};
use super::post_record::{Acceptance, PostRecord};
use super::reply::{Answer, Reply};

/// How a platform's send endpoint answers the send faults that strike before it processes a
/// post.
pub(super) trait Refusals {
    /// `send-500`.
    fn server_error(&self) -> Answer;
    /// `send-down`.
    fn unavailable(&self) -> Answer;
    /// `send-429` on a post to `target`, and the wait the answer tells the client, if it
    /// tells one.
    fn rate_limited(&self, target: Target, retry_after: Duration) -> (Answer, Option<Duration>);
}

/// One request to a send endpoint, handled by `process` and logged as an attempt with the
/// status it was answered (none for a hang or a reset), whatever came of it.
pub(super) fn attempted(
    posts: &PostRecord,
    platform: Platform,
    target: Target,
    target_id: String,
    process: impl FnOnce(&mut SendAttempt) -> Reply,
) -> Reply {
    let mut attempt = SendAttempt {
        platform,
        target,
        target_id,
        received_at: Instant::now(),
        received_unix_ms: unix_ms_now(),
        status: None,
        recorded: false,
        message_id: None,
        retry_after: None,
        fault: None,
    };
    let reply = process(&mut attempt);
    attempt.status = match &reply {
        Reply::Answer(answer) | Reply::Partial { answer, .. } => Some(answer.status),
        Reply::Hang | Reply::Reset => None,
    };
    tracing::debug!(
        platform = platform.name(),
        target = target.name(),
        status = ?attempt.status,
        fault = ?attempt.fault,
        "mock send request"
    );
    posts.record_attempt(attempt);
    reply
}

/// The reply an armed fault that acts before processing gives instead of processing, if one
/// strikes this attempt.
pub(super) fn struck_before(
    posts: &PostRecord,
    attempt: &mut SendAttempt,
    refusals: &impl Refusals,
) -> Option<Reply> {
    let fault = posts.strike_before(attempt.platform)?;
    attempt.fault = Some(fault.name());
    match fault {
        SendFault::ServerError(_) => Some(Reply::Answer(refusals.server_error())),
        SendFault::RateLimited { retry_after, .. } => {
            let (answer, wait) = refusals.rate_limited(attempt.target, retry_after);
            attempt.retry_after = wait;
            Some(Reply::Answer(answer))
        }
        SendFault::Hang(_) => Some(Reply::Hang),
        SendFault::Down(_) => Some(Reply::Answer(refusals.unavailable())),
        // Never struck before processing.
        SendFault::ResetAfterProcessing(_) | SendFault::HangAfterProcessing(_) => None,
    }
}

/// The reply an armed fault that acts after processing gives instead of the answer, if one
/// strikes this (accepted) attempt.
pub(super) fn struck_after(posts: &PostRecord, attempt: &mut SendAttempt) -> Option<Reply> {
    let fault = posts.strike_after(attempt.platform)?;
    attempt.fault = Some(fault.name());
    Some(match fault {
        SendFault::ResetAfterProcessing(_) => Reply::Reset,
        _ => Reply::Hang,
    })
}

/// The answer the record gave, noted in the attempt; `None` when it refused the post as a
/// repeat of a once-only key, which each platform answers in its own shape.
pub(super) fn settled(acceptance: Acceptance, attempt: &mut SendAttempt) -> Option<Value> {
    match acceptance {
        Acceptance::Created { message_id, answer } => {
            attempt.recorded = true;
            attempt.message_id = Some(message_id);
            Some(answer)
        }
        Acceptance::Earlier { message_id, answer } => {
            attempt.message_id = Some(message_id);
            Some(answer)
        }
        Acceptance::Duplicate => None,
    }
}

//! One delivery worker per adapter: takes the adapter's next message from the outbox, sends
//! it, and records how that went. One request at a time per adapter, so a platform's rate
//! limit is met by waiting, never by a burst; a platform outage only makes messages wait,
//! and no heartbeat depends on this task, so it never makes the gateway unhealthy.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

use super::{Finish, Message, Next, Outbox, Policy, State};
use crate::gateway::send::classify::local;
use crate::gateway::send::{Answer, OutFile, Outgoing, PlatformReply, Post};
use crate::gateway::until_shutdown;

/// A message not delivered within this long after it was queued fails.
pub(crate) const DEADLINE: Duration = Duration::from_secs(24 * 3600);
/// The first retry's wait; each later one doubles, up to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_secs(1);
/// Kept short, so that the first message after an outage goes out soon after it ends.
const RETRY_MAX: Duration = Duration::from_secs(30);
/// A fenced worker looks again this much later (its run ends first).
const FENCED_PAUSE: Duration = Duration::from_secs(1);
/// After the journal itself failed, wait this long before trying the next step.
const JOURNAL_PAUSE: Duration = Duration::from_secs(1);

/// Deliver `adapter`'s messages until shutdown. `connected` changes each time the adapter
/// connects again (after an outage, or a new login): its messages waiting out a backoff are
/// then retried at once, rather than up to [`RETRY_MAX`] after the platform came back.
pub(crate) async fn run<S: Post>(
    adapter: String,
    sender: S,
    outbox: Arc<Outbox>,
    mut connected: Option<watch::Receiver<u64>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut queued = outbox.subscribe();
    let mut targets = Targets::default();
    let mut typed = Typed::default();
    loop {
        if *shutdown.borrow() {
            return;
        }
        let wake = match outbox.next(&adapter, Instant::now()) {
            // Boxed: a send's state (the HTTP exchange) is large and lives only while it runs,
            // while this loop idles for good in each of a thousand adapters' workers.
            Next::Send(message) => {
                outbox.typed(&adapter, &message.target);
                match Box::pin(deliver(&sender, &outbox, &mut targets, *message)).await {
                    Ok(None) => continue,
                    // The platform asked for a pause before the next request (a rate-limit
                    // X-RateLimit-Remaining: 0): kept for the whole adapter, which is safe.
                    Ok(Some(pause)) => Some(Instant::now() + pause),
                    Err(e) => {
                        tracing::error!(adapter = %adapter, error = %crate::error_chain::one_line(&e), "outbox journal failed");
                        Some(Instant::now() + JOURNAL_PAUSE)
                    }
                }
            }
            // Boxed like a send: the typing request's state lives only while it runs.
            Next::Wait(at) => {
                Box::pin(typed.show(&sender, &outbox, &adapter)).await;
                Some(at)
            }
            Next::Idle => {
                Box::pin(typed.show(&sender, &outbox, &adapter)).await;
                None
            }
        };
        let nap = async {
            match wake {
                Some(at) => sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let reconnected = async {
            match connected.as_mut() {
                Some(rx) => rx.changed().await.ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = nap => {}
            _ = queued.changed() => {}
            Some(()) = reconnected => outbox.retry_now(&adapter),
            _ = until_shutdown(&mut shutdown) => return,
        }
    }
}

/// When each target that got a typing indicator may get the next: half the time it lasts
/// (`Post::TYPING_LASTS`) later, since an agent's turn asks every second.
#[derive(Default)]
struct Typed(HashMap<String, Instant>);

impl Typed {
    /// Show the indicators asked for since the last look, between messages: a reply ready to
    /// go never waits for one.
    async fn show<S: Post>(&mut self, sender: &S, outbox: &Outbox, adapter: &str) {
        let asked = outbox.take_typing(adapter);
        let Some(lasts) = S::TYPING_LASTS else {
            return;
        };
        let now = Instant::now();
        self.0.retain(|_, next| *next > now);
        for target in asked {
            if self.0.contains_key(&target) {
                continue;
            }
            let Ok(parsed) = target.parse::<S::Target>() else {
                continue;
            };
            match sender.typing(&parsed).await {
                Ok(()) => {
                    self.0.insert(target, now + lasts / 2);
                }
                Err(why) => tracing::debug!(adapter, %why, "the typing indicator was not shown"),
            }
        }
    }
}

/// One attempt at `message`, recorded before (sending) and after (how it ended). Returns the
/// pause the platform asked for before the next request, if it asked.
async fn deliver<S: Post>(
    sender: &S,
    outbox: &Outbox,
    targets: &mut Targets<S::Target>,
    message: Message,
) -> Result<Option<Duration>, super::OutboxError> {
    let id = message.id.clone();
    let answer = attempt(sender, outbox, targets, message).await;
    if !matches!(answer, Ok((false, _))) {
        targets.0.remove(&id);
    }
    answer.map(|(_, pause)| pause)
}

/// The attempt itself; the first value says whether the message is finished (sent, failed or
/// unknown), so that its target is forgotten, or is kept for the next attempt.
async fn attempt<S: Post>(
    sender: &S,
    outbox: &Outbox,
    targets: &mut Targets<S::Target>,
    message: Message,
) -> Result<(bool, Option<Duration>), super::OutboxError> {
    let id = message.id.clone();
    let done = |r: Result<(), super::OutboxError>| r.map(|()| (true, None));
    let Some(outgoing) = targets.outgoing(&message, outbox.out_files(&message)) else {
        let error = reply("the target no longer parses for this adapter");
        return done(outbox.finish(&id, Finish::Failed(error)).await);
    };
    let dedupes = sender.dedupes(&outgoing);
    // Left `sending` by a previous life: the request may have been posted.
    if message.state == State::Sending && !dedupes && message.policy == Policy::AtMostOnce {
        let error = reply(
            "the gateway stopped while the request was out; it may or may not have been \
             posted, and at-most-once does not send it again",
        );
        return done(outbox.finish(&id, Finish::Unknown(error)).await);
    }
    if past_deadline(&message) {
        let error = match &message.last_error {
            Some(last) => reply(&format!(
                "not delivered within {}; last error: {last}",
                humantime::format_duration(DEADLINE)
            )),
            None => reply(&format!(
                "not delivered within {}",
                humantime::format_duration(DEADLINE)
            )),
        };
        return done(outbox.finish(&id, Finish::Failed(error)).await);
    }
    if !outbox.may_send() {
        // A cluster's lease may be gone: nothing is sent, and the run is ending.
        tracing::warn!(id = %id, adapter = %message.adapter, "fenced: not sending");
        return Ok((false, Some(FENCED_PAUSE)));
    }
    outbox.begin(&id).await?;
    crate::test_hook::kill_at("outbox-sending", &message.idempotency_key);
    let (answer, pause) = send(sender, &outgoing).await;
    crate::test_hook::kill_at("outbox-answered", &message.idempotency_key);
    let attempts = message.attempts + 1;
    let finish = match answer {
        Answer::Sent { platform_id } => Finish::Sent { platform_id },
        Answer::Failed(error) => Finish::Failed(error),
        Answer::Retry { after, reply } => Finish::Retry {
            not_before: Instant::now() + after.unwrap_or_default().max(backoff(attempts)),
            asked: after.map(|a| Instant::now() + a),
            error: reply,
        },
        Answer::Unknown(why) if dedupes || message.policy == Policy::AtLeastOnce => Finish::Retry {
            not_before: Instant::now() + backoff(attempts),
            asked: None,
            error: self::reply(&format!("no answer ({why}); sending again")),
        },
        Answer::Unknown(why) => Finish::Unknown(self::reply(&format!(
            "no answer ({why}); it may or may not have been posted, and at-most-once does \
             not send it again"
        ))),
    };
    match &finish {
        Finish::Sent { platform_id } => {
            tracing::info!(id = %id, adapter = %message.adapter, ?platform_id, "message sent")
        }
        Finish::Retry { error, .. } => {
            tracing::warn!(id = %id, adapter = %message.adapter, %error, attempts, "send failed; will retry")
        }
        Finish::Failed(error) => {
            tracing::error!(id = %id, adapter = %message.adapter, %error, "message failed")
        }
        Finish::Unknown(error) => {
            tracing::error!(id = %id, adapter = %message.adapter, %error, "message outcome unknown")
        }
    }
    let retry = matches!(finish, Finish::Retry { .. });
    outbox.finish(&id, finish).await.map(|()| (!retry, pause))
}

/// Post `msg` once, unless its text is longer than the platform takes (a limit that may
/// have shrunk since it was queued): that fails before any request.
pub(crate) async fn send<S: Post>(
    sender: &S,
    msg: &Outgoing<S::Target>,
) -> (Answer, Option<Duration>) {
    let len = S::TEXT_UNIT.len(&msg.text);
    if len > sender.max_text() {
        let m = format!(
            "the text is {len} {}; the platform takes at most {}",
            S::TEXT_UNIT.name(),
            sender.max_text()
        );
        return (Answer::Failed(local(m)), None);
    }
    sender.send(msg).await
}

/// The targets of the messages this worker is still sending, read once each from the form
/// their platform stored at submit: a message retried twenty times is read once. A message
/// leaves when it reaches a final state.
struct Targets<T>(HashMap<String, T>);

impl<T> Default for Targets<T> {
    fn default() -> Self {
        Self(HashMap::new())
    }
}

impl<T: Clone + std::str::FromStr> Targets<T> {
    fn outgoing(&mut self, message: &Message, files: Vec<OutFile>) -> Option<Outgoing<T>> {
        let target = match self.0.get(&message.id) {
            Some(t) => t.clone(),
            None => {
                let t = T::from_str(&message.target).ok()?;
                self.0.insert(message.id.clone(), t.clone());
                t
            }
        };
        Some(Outgoing {
            id: message.id.clone(),
            target,
            text: message.text.clone(),
            reply_to: message.reply_to.clone(),
            seq: message.seq,
            files,
        })
    }
}

fn past_deadline(message: &Message) -> bool {
    humantime::parse_rfc3339(&message.queued_at)
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age > DEADLINE)
}

/// The wait before attempt `attempts + 1`: doubling from [`RETRY_MIN`], capped, with jitter
/// so that many messages failing together do not retry together.
pub(super) fn backoff(attempts: u32) -> Duration {
    let base = RETRY_MIN.saturating_mul(1 << attempts.saturating_sub(1).min(16));
    base.min(RETRY_MAX).mul_f64(0.5 + fastrand::f64() / 2.0)
}

fn reply(message: &str) -> PlatformReply {
    PlatformReply {
        status: None,
        code: None,
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::gateway::send::TargetError;

    static PARSED: AtomicUsize = AtomicUsize::new(0);

    /// A target whose every read is counted.
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Counted(String);

    impl std::str::FromStr for Counted {
        type Err = TargetError;

        fn from_str(text: &str) -> Result<Counted, TargetError> {
            PARSED.fetch_add(1, Ordering::SeqCst);
            Ok(Counted(text.to_owned()))
        }
    }

    impl std::fmt::Display for Counted {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    fn message(id: &str) -> Message {
        Message {
            id: id.into(),
            idempotency_key: id.into(),
            adapter: "a".into(),
            target: format!("room:{id}"),
            text: "hi".into(),
            reply_to: None,
            seq: None,
            policy: Policy::AtMostOnce,
            attachments: vec![],
            state: State::Queued,
            attempts: 0,
            queued_at: String::new(),
            updated_at: String::new(),
            platform_id: None,
            last_error: None,
        }
    }

    #[test]
    fn a_target_is_read_once_however_often_its_message_is_tried() {
        let mut targets: Targets<Counted> = Targets::default();
        for _ in 0..20 {
            for id in ["m1", "m2"] {
                let out = targets.outgoing(&message(id), vec![]).unwrap();
                assert_eq!(out.target, Counted(format!("room:{id}")));
            }
        }
        assert_eq!(PARSED.load(Ordering::SeqCst), 2);
    }
}

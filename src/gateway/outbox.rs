//! The durable outbox: every message the gateway is asked to send, appended (and fsync'd)
//! before anyone is told it was accepted, and delivered by one worker per adapter.
//!
//! A message is a small state machine, and every transition is a line appended to a journal
//! (`outbox/journal.jsonl`): queued, then sending (written *before* the request goes out),
//! then sent, failed or unknown. After a crash the journal says exactly how far each message
//! got. One still `queued` was never sent and is sent now. One left `sending` may or may not
//! have reached the platform: where the platform dedupes by a key we send (Discord's
//! `nonce`, QQ's `msg_seq` on a reply) it is simply sent again and the platform drops the
//! copy; where it cannot, the message's policy decides, at-most-once (it becomes `unknown`,
//! reported, never silently) or at-least-once (it is sent again).
//!
//! The same idempotency key is accepted once: a second submit returns the first message.

pub(crate) mod message;

pub use message::{Message, Policy, Request, State, Stats};

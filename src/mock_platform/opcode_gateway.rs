//! The op-code WebSocket gateway QQ Bot and Discord share: Hello, Identify and Resume,
//! heartbeats and their ACKs, dispatches with sequence numbers, and the close codes, written
//! from Discord's gateway docs (which QQ's copy), with the [`Fault`](super::Fault)s that break
//! it. What differs between the two platforms (how a client gets a token, discovery, the send
//! endpoints) is in `qqbot/` and `discord/`, which both lean on this.
//!
//! Sessions live apart from connections so that a client that loses its connection can
//! resume and get exactly the dispatches it missed; the event id log lets a test account for
//! every generated event (lost or duplicated).

mod command;
pub(super) mod connection;
// Public for the fuzz target `gateway_frame` (fuzz/), which decodes client frames with `parse`.
pub mod frames;
pub(super) mod generator;
mod session;
pub(super) mod state;

//! One Relay connection's wire: the agent's WebSocket messages split into frames (a long one
//! off the runtime's thread, which also feeds the watchdog), and frames to the agent written by
//! a writer of their own, each within a deadline, so that an agent that stops reading never
//! blocks the session, a new dial's takeover or a stop.

use std::time::Duration;

use futures_util::SinkExt;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::frames::{FromAgent, Lines};
use super::listen::Ws;

/// Frames queued for the agent and not yet written, at most.
pub(super) const WRITE_QUEUE: usize = 1024;
/// The longest one frame's write may take: an agent that reads nothing fills the socket's
/// buffers, and the write then waits for good.
const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a stopping gateway waits for its close frame to be written.
pub(super) const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// A WebSocket message longer than this is split into frames off the runtime's thread: the
/// gateway's one thread also feeds the watchdog.
const SPLIT_INLINE: usize = 64 * 1024;

/// Write `frames` to the agent, each within [`WRITE_DEADLINE`]; why the writing stopped.
pub(super) async fn write_frames(
    mut sink: futures_util::stream::SplitSink<Ws, WsMessage>,
    mut frames: mpsc::Receiver<WsMessage>,
) -> String {
    while let Some(frame) = frames.recv().await {
        match tokio::time::timeout(WRITE_DEADLINE, sink.send(frame)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return e.to_string(),
            Err(_) => {
                return format!(
                    "a frame took longer than {}s to write: the agent does not read",
                    WRITE_DEADLINE.as_secs()
                )
            }
        }
    }
    "the session ended".into()
}

/// The frames `text` completes; a long message is split on the blocking pool.
pub(super) async fn split(
    lines: &mut Lines,
    text: String,
) -> Result<Vec<Result<FromAgent, String>>, String> {
    if text.len() <= SPLIT_INLINE {
        return lines.push(&text).map_err(|e| e.to_string());
    }
    let mut taken = std::mem::take(lines);
    let (back, frames) = tokio::task::spawn_blocking(move || {
        let frames = taken.push(&text);
        (taken, frames)
    })
    .await
    .map_err(|e| format!("splitting the agent's frames failed: {e}"))?;
    *lines = back;
    frames.map_err(|e| e.to_string())
}

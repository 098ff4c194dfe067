//! What every WebSocket the mock serves needs at its end, whichever platform's protocol it
//! speaks: a close that lets the close code arrive, a silence that keeps the socket open, and
//! a registration with the platform's state that is given up however the task ends.

use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

use super::shutdown::stopped;

pub(super) type Ws = WebSocketStream<TcpStream>;

/// Long enough for a well-behaved client to answer a close frame, short enough that shutdown
/// is not held up by one that never does.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Sends the close frame and waits (bounded) for the client's answer, because dropping a
/// socket with unread input makes the kernel send RST, which can hide the close code.
pub(super) async fn close(
    mut sink: SplitSink<Ws, Message>,
    mut stream: SplitStream<Ws>,
    code: u16,
) {
    let frame = CloseFrame {
        code: code.into(),
        reason: Utf8Bytes::from_static(""),
    };
    tracing::info!(code, "mock closing connection");
    if sink.send(Message::Close(Some(frame))).await.is_err() {
        return;
    }
    let _ = timeout(CLOSE_GRACE, async {
        while let Some(Ok(_)) = stream.next().await {}
    })
    .await;
}

/// Keeps a silenced socket open without answering anything. The raw bytes the client sends
/// are swallowed (never parsed) only so that its eventual FIN is noticed and the socket freed.
pub(super) async fn hold_silently(mut ws: Ws, shutdown: &mut watch::Receiver<bool>) {
    let socket = ws.get_mut();
    let mut buf = [0u8; 1024];
    loop {
        tokio::select! {
            _ = stopped(shutdown) => return,
            read = socket.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
        }
    }
}

/// How a connection's loop ended, and so what its socket gets.
pub(super) enum End {
    /// The socket is gone, or the mock is stopping: nothing.
    Gone,
    /// A close frame with this code.
    Close(u16),
    /// Half-open: nothing more is written or read, and the socket stays open until the client
    /// goes away.
    Silence,
}

/// Carries out `end` on the socket's two halves.
pub(super) async fn finish(
    end: End,
    sink: SplitSink<Ws, Message>,
    stream: SplitStream<Ws>,
    shutdown: &mut watch::Receiver<bool>,
) {
    match end {
        End::Gone => {}
        End::Close(code) => close(sink, stream, code).await,
        End::Silence => {
            if let Ok(ws) = stream.reunite(sink) {
                hold_silently(ws, shutdown).await;
            }
        }
    }
}

/// Runs its closure when dropped: a connection unregisters from its platform's state even
/// when its task is aborted.
pub(super) struct Registration<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Registration<F> {
    pub(super) fn new(unregister: F) -> Self {
        Registration(Some(unregister))
    }
}

impl<F: FnOnce()> Drop for Registration<F> {
    fn drop(&mut self) {
        if let Some(unregister) = self.0.take() {
            unregister();
        }
    }
}

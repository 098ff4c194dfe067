//! What can go wrong on the mock WeCom's side.

/// A fault of the long connections, applied to the bot's live connection when set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WeComFault {
    /// Half-open: nothing more is written or read, no answer, no close, no FIN.
    Silence,
    /// `ping` goes unanswered; everything else is normal.
    NoPong,
    /// The TCP connection is dropped without a close frame.
    Drop,
    /// A close frame with this code: a planned disconnect from the server's side.
    Close(u16),
    /// Another client subscribed the bot: this connection gets `disconnected_event` and is
    /// closed, as the docs' "连接断开事件" says.
    Kick,
}

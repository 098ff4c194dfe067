//! What the mock WeCom records for a test to read.

/// One callback the platform made, with every delivery of it.
#[derive(Clone, Debug, PartialEq)]
pub struct WeComEventRecord {
    pub msgid: String,
    /// The `req_id` of each delivery, in order.
    pub req_ids: Vec<String>,
    pub text: String,
}

/// One message the bot posted: a reply (`aibot_respond_msg`, under a callback's `req_id`,
/// one per stream id however often it was refreshed) or a message it started
/// (`aibot_send_msg`).
#[derive(Clone, Debug, PartialEq)]
pub struct WeComPost {
    /// `aibot_respond_msg` or `aibot_send_msg`.
    pub cmd: String,
    /// The callback's `req_id` for a reply; the command's own for a message the bot started.
    pub req_id: String,
    pub stream_id: Option<String>,
    pub chat_id: Option<String>,
    pub content: String,
    /// Replies after the first with the same stream id (each refreshed this message).
    pub refreshes: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WeComStats {
    /// Subscriptions answered with `errcode` 0.
    pub subscribed: u64,
    /// Subscriptions refused.
    pub refused: u64,
    /// Connections closed with `disconnected_event`.
    pub kicked: u64,
    /// Pings answered.
    pub pongs: u64,
    /// Answers to commands the mock swallowed (the lost-answer fault).
    pub answers_lost: u64,
    /// Files served from their links.
    pub file_downloads: u64,
}

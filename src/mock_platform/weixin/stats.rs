//! What the mock's Weixin side counts, for a test to check a client's conduct against.

/// How many protocol violations are kept with their description (all are counted).
pub(crate) const VIOLATIONS_KEPT: usize = 100;

/// Counters of the Weixin side since the mock started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WeixinStats {
    /// `getupdates` requests, answered or not.
    pub polls: u64,
    /// Polls answered with `ret` 0 (messages or, after the hold, none).
    pub answered: u64,
    /// Of those, the ones answered with no messages because the hold ran out.
    pub empty_answers: u64,
    /// Polls held unanswered by [`WeixinFault::HangPolls`](super::WeixinFault::HangPolls).
    pub hung: u64,
    /// Messages handed out in answers, repeats included.
    pub messages_delivered: u64,
    /// `getupdates_buf` values the mock never gave (read as the start of the log).
    pub bad_cursors: u64,
    /// The `get_updates_buf` the last poll sent.
    pub last_cursor_seen: Option<String>,
    /// `sendmessage` requests, answered or not.
    pub sends: u64,
    /// Sends refused for a `context_token` that is not the peer's newest.
    pub stale_context_tokens: u64,
    /// Session-expired answers (`ret` -14) given, by any endpoint.
    pub expired_answers: u64,
    /// Frequency-limit answers (`ret` -2) given, by any endpoint.
    pub rate_limited: u64,
    /// HTTP 5xx answers given, by any endpoint.
    pub server_errors: u64,
    /// POSTs missing or misusing a required header or `base_info.channel_version` (one
    /// request counts once, however many checks it fails).
    pub header_violations: u64,
    /// POSTs whose `X-WECHAT-UIN` repeats the previous POST's: clients draw a new random one per
    /// request.
    pub uin_repeats: u64,
    /// What the first violations were, as `"<path>: <check>"`.
    pub violations: Vec<String>,
    /// `get_bot_qrcode` requests.
    pub qr_fetches: u64,
    /// `get_qrcode_status` requests.
    pub qr_status_polls: u64,
    /// Bot tokens issued (by a confirmed login or `weixin_issue_token`).
    pub tokens_issued: u64,
    /// `getuploadurl` requests answered with an upload.
    pub upload_urls: u64,
    /// CDN uploads taken (the length, key and MD5 all as announced).
    pub uploads: u64,
    /// CDN uploads refused, with what was wrong in `upload_refusals_said`.
    pub upload_refusals: u64,
    /// Why the first CDN uploads were refused.
    pub upload_refusals_said: Vec<String>,
    /// CDN downloads served.
    pub downloads: u64,
}

//! What a test asks of the mock WeCom when nothing is broken: the one AI bot it hosts and the
//! people who talk to it.

/// The WeCom part of [`MockConfig`](crate::mock_platform::MockConfig).
#[derive(Clone, Debug)]
pub struct WeComConfig {
    /// The bot's id and secret, the only pair `aibot_subscribe` takes.
    pub bot_id: String,
    pub secret: String,
    /// Who `emit`'s one-to-one messages come from (a `userid`).
    pub user_id: String,
    /// The group chat `emit_group` speaks in (a `chatid`).
    pub group_chat_id: String,
}

impl Default for WeComConfig {
    fn default() -> Self {
        WeComConfig {
            bot_id: "aibMockBot0001".to_owned(),
            secret: "mock-wecom-bot-secret".to_owned(),
            user_id: "zhangsan".to_owned(),
            group_chat_id: "wrkMockGroup0001".to_owned(),
        }
    }
}

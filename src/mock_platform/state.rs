//! State shared by the listener, the platforms' endpoints and the public handle: each
//! platform's state under its own lock, and the send record.

use std::sync::Arc;

use super::config::MockConfig;
use super::fault::FaultSwitch;
use super::feishu::state::FeishuState;
use super::opcode_gateway::state::Gateway;
use super::post_record::PostRecord;
use super::stats::Counters;
use super::telegram::state::TelegramState;
use super::weixin::state::WeixinState;

pub(super) struct Shared {
    pub(crate) config: MockConfig,
    pub(crate) counters: Arc<Counters>,
    /// The op-code gateway (QQ Bot and Discord): sessions, connections and the event log.
    pub(crate) gateway: Arc<Gateway>,
    /// The send endpoints' record, under its own lock.
    pub(crate) posts: PostRecord,
    /// Feishu's long connection, tokens and events, under their own locks.
    pub(crate) feishu: FeishuState,
    /// Telegram's updates, pollers and webhook, under their own lock.
    pub(crate) telegram: TelegramState,
    /// Weixin's messages, cursors, tokens and QR logins, under their own lock.
    pub(crate) weixin: WeixinState,
}

impl Shared {
    pub(crate) fn new(config: MockConfig, advertised_ws_url: String) -> Shared {
        let counters = Arc::new(Counters::default());
        let fault = Arc::new(FaultSwitch::default());
        let gateway = Gateway::new(&config, advertised_ws_url, counters.clone(), fault);
        Shared {
            feishu: FeishuState::new(config.feishu.clone(), String::new()),
            telegram: TelegramState::new(config.telegram.clone()),
            weixin: WeixinState::new(config.weixin.clone()),
            gateway: Arc::new(gateway),
            config,
            counters,
            posts: PostRecord::new(),
        }
    }
}

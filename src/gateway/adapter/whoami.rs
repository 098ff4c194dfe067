//! Who each adapter's bot is on its platform, as its connection learned it (a session's READY,
//! a who-am-I request, or the account the configuration names): what tells a mention of the
//! bot, a reply to it and its own echo from anyone else's message.
//!
//! Learned at run time and held only in memory: the access rules read it when a message is
//! stored, and what they decided is stored with the message, so nothing reads it later.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The bot's own account on its platform. Either part may be unknown: one whose connection
/// has not said yet has neither.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BotId {
    /// The platform's stable id of the bot's account (a user id, an open id).
    pub id: Option<String>,
    /// The bot's user name, without a sigil: what a mention is written with where the
    /// platform mentions by name; elsewhere only for the logs.
    pub handle: Option<String>,
}

/// Every adapter's [`BotId`], by adapter name. Cheap to clone: one map per gateway.
#[derive(Clone, Debug, Default)]
pub struct Whoami(Arc<Mutex<HashMap<String, BotId>>>);

impl Whoami {
    /// Adapter `adapter`'s bot is `bot` (a connection learned it, or learned it again).
    pub fn set(&self, adapter: &str, bot: BotId) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.get(adapter) != Some(&bot) {
            map.insert(adapter.to_owned(), bot);
        }
    }

    /// What is known of adapter `adapter`'s bot; nothing yet is an empty [`BotId`].
    pub fn get(&self, adapter: &str) -> BotId {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(adapter)
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_connection_learned_is_kept_per_adapter() {
        let who = Whoami::default();
        assert_eq!(who.get("tg"), BotId::default());
        let bot = BotId {
            id: Some("42".into()),
            handle: Some("hermes_bot".into()),
        };
        who.clone().set("tg", bot.clone());
        assert_eq!(who.get("tg"), bot);
        assert_eq!(who.get("dc"), BotId::default());
    }
}

//! The Telegram side of the handle: what a test drives (updates, faults, the webhook) and
//! reads (update ids, counters). Sends show in the shared `posts()` and `send_attempts()`.

use serde_json::json;

use super::super::handle::MockPlatform;
use super::faults::{Armed, TelegramFault};
use super::state::TelegramState;
use super::stats::TelegramStats;
use super::Telegram;

impl MockPlatform {
    fn telegram(&self) -> &TelegramState {
        &self.side::<Telegram>().state
    }

    /// `n` text messages from the mock's user in the first configured chat (1001 by
    /// default); returns their `update_id`s.
    pub fn telegram_emit(&self, n: usize) -> Vec<i64> {
        let telegram = self.telegram();
        let chat = telegram.config.chats.first().copied().unwrap_or(1001);
        (0..n)
            .map(|_| {
                let k = telegram.updates_generated() + 1;
                telegram.emit_text(chat, &format!("telegram message {k}"))
            })
            .collect()
    }

    /// One text message from the mock's user in `chat_id`, which the bot then knows; returns
    /// its `update_id`.
    pub fn telegram_emit_text(&self, chat_id: i64, text: &str) -> i64 {
        self.telegram().emit_text(chat_id, text)
    }

    /// A photo (`bytes`) with `caption` from the mock's user in `chat_id`: its one size's
    /// `file_id` is what `getFile` knows, and the file is served at its `file_path`. Returns
    /// the `update_id`.
    pub fn telegram_emit_photo(&self, chat_id: i64, caption: &str, bytes: Vec<u8>) -> i64 {
        self.telegram().emit_photo(chat_id, caption, bytes)
    }

    /// A document (`bytes`, named `file_name`) from the mock's user in `chat_id`. Returns the
    /// `update_id`.
    pub fn telegram_emit_document(&self, chat_id: i64, file_name: &str, bytes: Vec<u8>) -> i64 {
        self.telegram().emit_document(chat_id, file_name, bytes)
    }

    /// A voice note (`bytes`, Ogg/Opus) from the mock's user in `chat_id`. Returns the
    /// `update_id`.
    pub fn telegram_emit_voice(&self, chat_id: i64, bytes: Vec<u8>) -> i64 {
        self.telegram().emit_voice(chat_id, bytes)
    }

    /// How many times the mock's file server has served a file.
    pub fn telegram_files_fetched(&self) -> usize {
        self.telegram().files.fetched()
    }

    /// A message from the mock's user in `chat_id` that mentions the bot as Telegram marks a
    /// mention: `before`, then `@` and the bot's username under a `mention` entity (its offset
    /// and length in UTF-16 code units, as the Bot API counts them), then `after`. Returns its
    /// `update_id`.
    pub fn telegram_emit_mention(&self, chat_id: i64, before: &str, after: &str) -> i64 {
        let telegram = self.telegram();
        let mention = format!("@{}", telegram.config.bot_username);
        let entity = json!({
            "type": "mention",
            "offset": utf16_len(before),
            "length": utf16_len(&mention),
        });
        let text = format!("{before}{mention}{after}");
        telegram.emit(chat_id, &text, vec![entity], None)
    }

    /// A message from the mock's user in `chat_id` replying to the bot's latest message there;
    /// `None` (and nothing emitted) while the bot has posted nothing there.
    pub fn telegram_emit_reply_to_bot(&self, chat_id: i64, text: &str) -> Option<i64> {
        let telegram = self.telegram();
        let replied = telegram.last_bot_message(chat_id)?;
        Some(telegram.emit(chat_id, text, Vec::new(), Some(replied)))
    }

    /// Every update generated, in order, delivered or not.
    pub fn telegram_update_ids(&self) -> Vec<i64> {
        self.telegram().update_ids()
    }

    /// Arms a `getUpdates` fault until cleared (`Duplicate` acts once), replacing any other.
    pub fn telegram_set_fault(&self, fault: TelegramFault) {
        let armed = Armed { fault, polls: None };
        self.telegram().set_fault(Some(armed));
    }

    /// Arms a `getUpdates` fault for the next `polls` polls, replacing any other.
    pub fn telegram_set_fault_for(&self, fault: TelegramFault, polls: u32) {
        let armed = Armed {
            fault,
            polls: Some(polls),
        };
        self.telegram().set_fault(Some(armed));
    }

    pub fn telegram_clear_fault(&self) {
        self.telegram().set_fault(None);
    }

    /// Sets the webhook as `setWebhook` would, without its checks (an empty `url` removes
    /// it): polls are refused with 409 until a `deleteWebhook`.
    pub fn telegram_set_webhook(&self, url: &str) {
        let url = (!url.is_empty()).then(|| url.to_owned());
        self.telegram().set_webhook(url, false);
    }

    pub fn telegram_webhook(&self) -> Option<String> {
        self.telegram().webhook()
    }

    pub fn telegram_stats(&self) -> TelegramStats {
        self.telegram().stats()
    }
}

/// The length of `text` in UTF-16 code units, Telegram's unit for entity offsets.
fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

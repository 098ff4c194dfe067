//! Telegram's state in the mock.

/// How the mock's Telegram side behaves when nothing is broken.
#[derive(Clone, Debug, Default)]
pub struct TelegramConfig {}

pub(crate) struct TelegramState {}

impl TelegramState {
    pub(crate) fn new(config: TelegramConfig) -> Self {
        let _ = config;
        Self {}
    }
}

//! Checks of the mock's Telegram side.

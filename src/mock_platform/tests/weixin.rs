//! Checks of the mock's Weixin side.

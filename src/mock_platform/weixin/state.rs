//! Weixin's state in the mock.

/// How the mock's Weixin side behaves when nothing is broken.
#[derive(Clone, Debug, Default)]
pub struct WeixinConfig {}

pub(crate) struct WeixinState {}

impl WeixinState {
    pub(crate) fn new(config: WeixinConfig) -> Self {
        let _ = config;
        Self {}
    }
}

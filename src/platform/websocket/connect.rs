//! What a plain WebSocket adapter connects with: its URL, a bearer token when it has one, and
//! the plain dialect's pings. Nothing to fetch, and no close code that means anything.

use std::sync::Arc;

use super::Config;
use crate::config::Secret;
use crate::gateway::adapter::dialect::Dialect;
use crate::gateway::adapter::outlet::Outlet;
use crate::gateway::adapter::setup::{Connector, PlatformError, Prepared};

pub(super) struct Plain {
    pub(super) config: Config,
    pub(super) token: Option<Secret>,
    /// Where its sender's frames come in, when it has a `send-frame`.
    pub(super) outlet: Option<Arc<Outlet>>,
}

impl Connector for Plain {
    async fn prepare(&mut self, _resume_url: Option<&str>) -> Result<Prepared, PlatformError> {
        Ok(Prepared {
            url: self.config.url.clone(),
            authorization: self
                .token
                .as_ref()
                .map(|s| format!("Bearer {}", s.expose())),
            dialect: Dialect::Plain {
                ping_interval: self.config.ping_interval,
                app_ping: self.config.app_ping.clone(),
            },
            limit: None,
        })
    }

    fn identify_key(&self) -> String {
        format!("websocket:{}", self.config.url)
    }

    fn outlet(&self) -> Option<Arc<Outlet>> {
        self.outlet.clone()
    }
}

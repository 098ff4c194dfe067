//! Getting onto the long connection: endpoint discovery hands out a single-use ticket in the
//! connect URL, and the upgrade must present it. Single use, so a client cannot skip
//! discovery on a reconnect; the SDKs rediscover on every connect (`connect` in oapi-sdk-go
//! `ws/client.go`, `tryConnect` in node-sdk `ws-client/index.ts`).

use super::super::events::hex;
use super::super::faults::{code, Refusal};
use super::super::ticket::{Discovery, Ticket};
use super::{FeishuState, Inner};

impl FeishuState {
    /// `POST /callback/ws/endpoint`, after the body was found to hold both fields.
    pub(crate) fn discover(&self, app_id: &str, app_secret: &str) -> Discovery {
        let mut inner = self.lock();
        inner.stats.endpoint_calls += 1;
        if let Some(refusal) = inner.take_refusal(true) {
            return Discovery::Refused(refusal);
        }
        let refused = |code: i64, msg: &str| {
            Discovery::Refused(Refusal::Endpoint {
                code,
                msg: msg.to_owned(),
            })
        };
        if app_id.is_empty() || app_secret.is_empty() {
            inner.stats.refused += 1;
            return refused(code::NO_CREDENTIAL, "app_id or app_secret is empty");
        }
        if app_id != self.config.app_id || app_secret != self.config.app_secret {
            inner.stats.refused += 1;
            return refused(code::INVALID_CREDENTIAL, "app_id or app_secret is invalid");
        }
        if inner.conns.len() >= self.config.max_connections {
            inner.stats.refused += 1;
            return refused(code::EXCEED_CONN_LIMIT, "exceed conn limit");
        }
        let ticket = hex(32);
        let issued = Ticket {
            device_id: format!("{}", fastrand::u64(1..u64::MAX / 2)),
            service: fastrand::i32(1..i32::MAX),
        };
        let url = format!(
            "{}?device_id={}&service_id={}&ticket={ticket}",
            inner.ws_url, issued.device_id, issued.service
        );
        inner.tickets.insert(ticket, issued);
        Discovery::Url {
            url,
            config: inner.client_config,
        }
    }

    /// The upgrade request's check: a ticket this platform issued and nobody used, naming the
    /// same device and service, within the connection limit and no refusal armed.
    pub(crate) fn admit(
        &self,
        ticket: &str,
        device_id: &str,
        service: &str,
    ) -> Result<Ticket, Refusal> {
        let mut inner = self.lock();
        if let Some(refusal) = inner.take_refusal(false) {
            return Err(refusal);
        }
        let issued = inner
            .tickets
            .remove(ticket)
            .filter(|t| t.device_id == device_id && service.parse::<i32>().ok() == Some(t.service));
        let Some(issued) = issued else {
            inner.stats.refused += 1;
            let mut refusal = Refusal::auth_failed();
            if let Refusal::Handshake { msg, .. } = &mut refusal {
                *msg = "invalid or used ticket".to_owned();
            }
            return Err(refusal);
        };
        if inner.conns.len() >= self.config.max_connections {
            inner.stats.refused += 1;
            return Err(Refusal::conn_limit());
        }
        Ok(issued)
    }
}

impl Inner {
    /// One strike of the armed refusal if it acts at this stage.
    fn take_refusal(&mut self, at_endpoint: bool) -> Option<Refusal> {
        let (left, refusal) = self.refuse.as_mut()?;
        if refusal.at_endpoint() != at_endpoint {
            return None;
        }
        let refusal = refusal.clone();
        *left -= 1;
        if *left == 0 {
            self.refuse = None;
        }
        self.stats.refused += 1;
        Some(refusal)
    }
}

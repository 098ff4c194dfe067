//! The op-code gateway's side of the handle: its faults, the dispatches a test generates, and
//! what it counts.

use super::super::fault::Fault;
use super::super::handle::MockPlatform;
use super::super::stats::MockStats;
use super::state::Gateway;
use super::WS_PATH;

impl MockPlatform {
    fn gateway(&self) -> &Gateway {
        self.side::<Gateway>()
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}{WS_PATH}", self.addr())
    }

    /// Lets a test send clients through a proxy (or anywhere else) by changing only what
    /// discovery returns.
    pub fn set_advertised_ws_url(&self, url: String) {
        self.gateway().set_advertised_ws_url(url);
    }

    pub fn set_fault(&self, fault: Fault) {
        self.gateway().set_fault(fault);
    }

    pub fn clear_fault(&self) {
        self.gateway().set_fault(Fault::None);
    }

    /// Buffered in every session, so a session without a working connection gets these on its
    /// next resume.
    pub fn emit(&self, n: usize) {
        self.gateway().generate(n);
    }

    /// One dispatch with exactly this type (`t`), event id and `d`, however hostile, in every
    /// session: for tests of what reaches a reader's terminal from a platform.
    pub fn emit_dispatch(&self, kind: &str, id: &str, d: serde_json::Value) {
        self.gateway().generate_dispatch(kind, id, &d);
    }

    pub fn stats(&self) -> MockStats {
        self.gateway().stats()
    }

    pub fn generated_event_ids(&self) -> Vec<String> {
        self.gateway().event_ids()
    }
}

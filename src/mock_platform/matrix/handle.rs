//! The Matrix side of the handle: what a test drives (events from the human, encryption,
//! `/sync` faults, the token) and reads (event ids, counters). Sends show in the shared
//! `posts()` and `send_attempts()` under
//! [`Platform::Matrix`](super::super::post::Platform::Matrix).

use super::super::handle::MockPlatform;
use super::events::{self, Origin};
use super::faults::{Armed, MatrixFault};
use super::state::MatrixState;
use super::stats::MatrixStats;
use super::Matrix;

/// Where `matrix_emit` writes when the configuration names no room.
const FALLBACK_ROOM: &str = "!room1:mock.test";

impl MockPlatform {
    fn matrix(&self) -> &MatrixState {
        &self.side::<Matrix>().state
    }

    /// `n` `m.text` messages from the human in the first configured room, bodies
    /// "matrix message K" (K counting the human's messages from 1); their event ids.
    pub fn matrix_emit(&self, n: usize) -> Vec<String> {
        let matrix = self.matrix();
        let room = matrix
            .config
            .rooms
            .first()
            .map_or(FALLBACK_ROOM, String::as_str);
        (0..n)
            .map(|_| {
                let k = matrix.human_messages() + 1;
                self.matrix_emit_text(room, &format!("matrix message {k}"))
            })
            .collect()
    }

    /// One `m.text` message from the human in `room`; its event id. A room the
    /// configuration does not list comes into being without the bot, which never sees it.
    pub fn matrix_emit_text(&self, room: &str, text: &str) -> String {
        let content = events::text(text);
        let origin = Origin::HumanMessage;
        self.matrix()
            .emit(room, "m.room.message", None, content, origin)
    }

    /// An `m.image` from the human in `room` whose content (`bytes`) is in the mock's content
    /// repository, named `body`; its event id.
    pub fn matrix_emit_image(&self, room: &str, body: &str, bytes: Vec<u8>) -> String {
        let matrix = self.matrix();
        let server = matrix
            .config
            .user_id
            .split_once(':')
            .map_or("mock.example", |(_, s)| s)
            .to_owned();
        let url = matrix.media.add(&server, bytes);
        let content = serde_json::json!({"msgtype": "m.image", "body": body, "url": url,
                                         "info": {"mimetype": "image/png"}});
        matrix.emit(room, "m.room.message", None, content, Origin::HumanMessage)
    }

    /// One `m.room.encrypted` (Megolm) event from the human in `room`; its event id.
    pub fn matrix_emit_encrypted(&self, room: &str) -> String {
        let matrix = self.matrix();
        let n = matrix.event_ids(None).len() as u64 + 1;
        let content = events::megolm(n);
        matrix.emit(room, "m.room.encrypted", None, content, Origin::Human)
    }

    /// Turns encryption on in `room` mid-session: an `m.room.encryption` state event from
    /// the human in its timeline, and in its state from then on; the event's id.
    pub fn matrix_enable_encryption(&self, room: &str) -> String {
        let content = events::encryption();
        let kind = "m.room.encryption";
        self.matrix()
            .emit(room, kind, Some(""), content, Origin::Human)
    }

    /// Arms a `/sync` fault until cleared (`RepeatBatch` acts once), replacing any other.
    pub fn matrix_set_fault(&self, fault: MatrixFault) {
        let armed = Armed { fault, syncs: None };
        self.matrix().set_fault(Some(armed));
    }

    /// Arms a `/sync` fault for the next `syncs` syncs it acts on, replacing any other.
    pub fn matrix_set_fault_for(&self, fault: MatrixFault, syncs: u32) {
        let armed = Armed {
            fault,
            syncs: Some(syncs),
        };
        self.matrix().set_fault(Some(armed));
    }

    pub fn matrix_clear_fault(&self) {
        self.matrix().set_fault(None);
    }

    /// From now on every endpoint that needs a token answers 401 `M_UNKNOWN_TOKEN`
    /// (`soft_logout` false): the session was logged out.
    pub fn matrix_revoke_token(&self) {
        self.matrix().set_revoked(true);
    }

    pub fn matrix_restore_token(&self) {
        self.matrix().set_revoked(false);
    }

    /// Every event put in any room, in stream order: the human's, the bot's own echoes and
    /// state changes (not the state `encrypted_rooms` starts with).
    pub fn matrix_event_ids(&self) -> Vec<String> {
        self.matrix().event_ids(None)
    }

    /// Only the human's `m.room.message` events, in order.
    pub fn matrix_message_ids(&self) -> Vec<String> {
        self.matrix().event_ids(Some(Origin::HumanMessage))
    }

    pub fn matrix_stats(&self) -> MatrixStats {
        self.matrix().stats()
    }
}

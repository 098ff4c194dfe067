//! The JSON the API speaks, shared by the server and [`super::client`], so that the two
//! cannot drift apart. docs/api.openapi.json describes the same shapes.

use serde::{Deserialize, Serialize};

use crate::gateway::outbox::Policy;
use crate::gateway::spool::Event;
use crate::platform::Message;

/// Set to `true` on a `200` answer to `POST /v1/messages` whose idempotency key was used
/// before: the message in the body is the one that earlier request queued.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// The body of `POST /v1/messages`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendBody {
    pub adapter: String,
    pub target: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    pub idempotency_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// Media ids (`POST /v1/media`'s answers) of files to post with the text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<String>,
}

/// The answer to `POST /v1/media`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uploaded {
    /// What `attachments` names it by.
    pub id: String,
    pub bytes: u64,
    pub sha256: String,
    pub mime: String,
}

/// The answer to `GET /v1/events`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct EventsPage {
    pub events: Vec<PagedEvent>,
    /// Where the next read starts: pass it as `after`.
    pub next: String,
}

/// An event as the spool stores it, with the cursor just after it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct PagedEvent {
    pub cursor: String,
    /// The event read as a chat message; absent for events that are not one.
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(flatten)]
    pub event: Event,
}

/// Every error answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Stable, for programs: e.g. `missing_field`, `unknown_adapter`, `cursor_gone`.
    pub code: String,
    /// For people: what was wrong and the fix.
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

//! `GET /_matrix/client/v3/rooms/{roomId}/messages` (docs/research/matrix-client-server.md
//! §4, spec `message_pagination.yaml`): how a client fills the gap a limited timeline left.
//! `dir` is required; `from` (optional since v1.3) and `to` take any token this homeserver
//! minted, sync or room; `limit` defaults to 10; `filter` is a `RoomEventFilter` as JSON.
//! `chunk` is newest-first backwards, its events carry `room_id`, and `end` is there only
//! while more is left: "No `end` means no more events".

use serde_json::json;

use super::super::http::RequestHead;
use super::super::reply::Answer;
use super::auth;
use super::errors;
use super::filter::{EventFilter, Refused};
use super::state::{Direction, MatrixState};
use super::tokens::Kind;

/// `limit` when the request gives none (spec default).
const DEFAULT_LIMIT: usize = 10;
/// The most events one page carries, whatever `limit` asks; the mock's own cap.
const MAX_LIMIT: usize = 1000;

pub(crate) fn messages(head: &RequestHead, room: &str, state: &MatrixState) -> Answer {
    state.count(|s| s.messages_requests += 1);
    match page(head, room, state) {
        Ok(answer) | Err(answer) => answer,
    }
}

fn page(head: &RequestHead, room: &str, state: &MatrixState) -> Result<Answer, Answer> {
    auth::check(head, state)?;
    let invalid = |message: &str| errors::error(400, "M_INVALID_PARAM", message);
    let direction = match head.query_param("dir").as_deref() {
        Some("b") => Direction::Backwards,
        Some("f") => Direction::Forwards,
        Some(_) => {
            return Err(invalid(
                "Query parameter \"dir\" must be one of [\"b\", \"f\"]",
            ))
        }
        None => return Err(invalid("Missing query parameter \"dir\"")),
    };
    let both = [Kind::Sync, Kind::Room];
    let position = |name: &str| match head.query_param(name) {
        None => Ok(None),
        Some(token) => match state.parse_token(&token, &both) {
            Some(position) => Ok(Some((token, position))),
            None => Err(errors::invalid_token()),
        },
    };
    let from = position("from")?;
    let to = position("to")?.map(|(_, position)| position);
    let limit = match head.query_param("limit") {
        None => DEFAULT_LIMIT,
        Some(text) => text
            .trim()
            .parse::<usize>()
            .map_err(|_| invalid("Query parameter \"limit\" must be a non-negative integer"))?,
    };
    let filter = match head.query_param("filter") {
        None => EventFilter::default(),
        Some(text) => EventFilter::inline(&text).map_err(|refused| match refused {
            Refused::NotJson => errors::error(400, "M_NOT_JSON", "Invalid filter JSON"),
            Refused::BadJson(message) => errors::error(400, "M_BAD_JSON", &message),
        })?,
    };
    if !state.is_joined(room) {
        return Err(errors::not_in_room(&state.config.user_id, room));
    }
    let start = match (&from, direction) {
        (Some((token, _)), _) => token.clone(),
        (None, Direction::Backwards) => state.token(Kind::Room, state.position()),
        (None, Direction::Forwards) => state.token(Kind::Room, 0),
    };
    let from = from.map(|(_, position)| position);
    let page = state.page(room, direction, from, to, limit.min(MAX_LIMIT), &filter);
    let mut body = json!({"start": start, "chunk": page.chunk});
    if let Some(end) = page.end {
        body["end"] = json!(state.token(Kind::Room, end));
    }
    Ok(Answer::new(200, body))
}

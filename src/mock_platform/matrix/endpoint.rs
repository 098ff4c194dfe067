//! Which endpoint a request is for, and the ones that answer from state at once: versions,
//! `whoami`, `joined_rooms`, a room's state event, and filter upload and download
//! (docs/research/matrix-client-server.md §1, §3, §7). Ids in the path may come
//! percent-encoded (`!`, `:`, `$`, as mautrix quotes them) or raw; each segment is decoded
//! on its own, so an encoded `/` stays inside its id.

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::reply::Answer;
use super::auth;
use super::errors;
use super::filter::{self, Refused, SyncFilter};
use super::send::SendPath;
use super::state::MatrixState;

/// Everything under it is the homeserver's.
pub(crate) const PREFIX: &str = "/_matrix/";
/// Needs no token: "a cheap liveness probe".
pub(crate) const VERSIONS_PATH: &str = "/_matrix/client/versions";
const CLIENT_V3: &str = "/_matrix/client/v3/";
const MEDIA_DOWNLOAD: &str = "/_matrix/client/v1/media/download/";
const MEDIA_CONFIG: &str = "/_matrix/client/v1/media/config";
/// Where content is uploaded: still under `/_matrix/media/v3/` (authenticated media moved
/// only the download side to `/_matrix/client/v1/media/`).
pub(crate) const MEDIA_UPLOAD: &str = "/_matrix/media/v3/upload";

/// The endpoints the mock serves.
pub(crate) enum Route {
    Versions,
    Whoami,
    Sync,
    JoinedRooms,
    Messages(String),
    Send(SendPath),
    State {
        room: String,
        event_type: String,
        state_key: String,
    },
    UploadFilter(String),
    Upload,
    MediaConfig,
    Media {
        server: String,
        id: String,
    },
    Filter {
        user: String,
        id: String,
    },
}

/// The endpoint the request is for; 404 `M_UNRECOGNIZED` for a path the mock does not serve,
/// 405 for a method a served path does not take.
pub(crate) fn route(head: &RequestHead) -> Result<Route, Answer> {
    let (route, method) = match_path(&head.path).ok_or_else(|| errors::unrecognized(404))?;
    if head.method != method {
        return Err(errors::unrecognized(405));
    }
    Ok(route)
}

fn match_path(path: &str) -> Option<(Route, &'static str)> {
    if path == VERSIONS_PATH {
        return Some((Route::Versions, "GET"));
    }
    if path == MEDIA_UPLOAD {
        return Some((Route::Upload, "POST"));
    }
    if path == MEDIA_CONFIG {
        return Some((Route::MediaConfig, "GET"));
    }
    if let Some(rest) = path.strip_prefix(MEDIA_DOWNLOAD) {
        let segments: Vec<String> = rest.split('/').map(decode_segment).collect::<Option<_>>()?;
        return match segments.as_slice() {
            [server, id] | [server, id, _] => Some((
                Route::Media {
                    server: server.clone(),
                    id: id.clone(),
                },
                "GET",
            )),
            _ => None,
        };
    }
    let rest = path.strip_prefix(CLIENT_V3)?;
    let segments: Vec<String> = rest.split('/').map(decode_segment).collect::<Option<_>>()?;
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let owned = |s: &str| s.to_owned();
    let route = match segments.as_slice() {
        ["account", "whoami"] => (Route::Whoami, "GET"),
        ["sync"] => (Route::Sync, "GET"),
        ["joined_rooms"] => (Route::JoinedRooms, "GET"),
        ["rooms", room, "messages"] => (Route::Messages(owned(room)), "GET"),
        ["rooms", room, "send", event_type, txn_id] => {
            let path = SendPath {
                room: owned(room),
                event_type: owned(event_type),
                txn_id: owned(txn_id),
            };
            (Route::Send(path), "PUT")
        }
        ["rooms", room, "state", event_type] | ["rooms", room, "state", event_type, ""] => {
            let state = Route::State {
                room: owned(room),
                event_type: owned(event_type),
                state_key: String::new(),
            };
            (state, "GET")
        }
        ["rooms", room, "state", event_type, state_key] => {
            let state = Route::State {
                room: owned(room),
                event_type: owned(event_type),
                state_key: owned(state_key),
            };
            (state, "GET")
        }
        ["user", user, "filter"] => (Route::UploadFilter(owned(user)), "POST"),
        ["user", user, "filter", id] => {
            let filter = Route::Filter {
                user: owned(user),
                id: owned(id),
            };
            (filter, "GET")
        }
        _ => return None,
    };
    Some(route)
}

/// A path segment with its `%XX` escapes decoded (`+` is itself in a path); `None` when an
/// escape is malformed or the result is not UTF-8.
fn decode_segment(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte == b'%' {
            let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
            let (high, low) = (hex(i + 1)?, hex(i + 2)?);
            out.push(u8::try_from(high * 16 + low).ok()?);
            i += 3;
        } else {
            out.push(byte);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `GET /_matrix/client/versions`.
pub(crate) fn versions() -> Answer {
    Answer::new(200, json!({"versions": ["v1.11"]}))
}

/// `GET /account/whoami`: the doctor's check (§1). `is_guest` as Synapse sends it.
pub(crate) fn whoami(head: &RequestHead, state: &MatrixState) -> Answer {
    state.count(|s| s.whoami += 1);
    if let Err(answer) = auth::check(head, state) {
        return answer;
    }
    let config = &state.config;
    Answer::new(
        200,
        json!({"user_id": config.user_id, "device_id": config.device_id, "is_guest": false}),
    )
}

pub(crate) fn joined_rooms(head: &RequestHead, state: &MatrixState) -> Answer {
    if let Err(answer) = auth::check(head, state) {
        return answer;
    }
    Answer::new(200, json!({"joined_rooms": state.joined_rooms()}))
}

/// `GET /rooms/{roomId}/state/{eventType}/{stateKey}`: the content, or 404 `M_NOT_FOUND`
/// when the room has no such state (§7: how a bot asks whether a room is encrypted).
pub(crate) fn room_state(
    head: &RequestHead,
    room: &str,
    event_type: &str,
    state_key: &str,
    state: &MatrixState,
) -> Answer {
    if let Err(answer) = auth::check(head, state) {
        return answer;
    }
    if !state.is_joined(room) {
        return errors::not_in_room(&state.config.user_id, room);
    }
    match state.current_state(room, event_type, state_key) {
        Some(content) => Answer::new(200, content),
        None => errors::error(404, "M_NOT_FOUND", "Event not found."),
    }
}

/// `POST /user/{userId}/filter` (§3): a filter for later syncs, by id.
pub(crate) fn upload_filter(
    head: &RequestHead,
    body: &[u8],
    user: &str,
    state: &MatrixState,
) -> Answer {
    if let Err(answer) = auth::check(head, state) {
        return answer;
    }
    if user != state.config.user_id {
        return errors::error(403, "M_FORBIDDEN", "Cannot create filters for other users");
    }
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return errors::error(400, "M_NOT_JSON", "Content not JSON.");
    };
    match filter::from_value::<SyncFilter>(value.clone()) {
        Ok(_) => Answer::new(200, json!({"filter_id": state.upload_filter(value)})),
        Err(Refused::NotJson) => errors::error(400, "M_NOT_JSON", "Content not JSON."),
        Err(Refused::BadJson(message)) => errors::error(400, "M_BAD_JSON", &message),
    }
}

/// `GET /user/{userId}/filter/{filterId}`: the filter as uploaded, or 404.
pub(crate) fn get_filter(head: &RequestHead, user: &str, id: &str, state: &MatrixState) -> Answer {
    if let Err(answer) = auth::check(head, state) {
        return answer;
    }
    if user != state.config.user_id {
        return errors::error(403, "M_FORBIDDEN", "Cannot get filters for other users");
    }
    match state.filter(id) {
        Some(filter) => Answer::new(200, filter),
        None => errors::error(404, "M_NOT_FOUND", "No such filter"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_decode_one_by_one() {
        assert_eq!(
            decode_segment("%21r%3Amock.test").as_deref(),
            Some("!r:mock.test")
        );
        assert_eq!(decode_segment("a+b%2Fc").as_deref(), Some("a+b/c"));
        assert_eq!(decode_segment("!raw:x").as_deref(), Some("!raw:x"));
        assert_eq!(decode_segment("%2"), None);
        assert_eq!(decode_segment("%ff"), None);
    }

    #[test]
    fn paths_route_to_their_endpoint_and_method() {
        let send = "/_matrix/client/v3/rooms/%21r%3Ax/send/m.room.message/t%2F1";
        let Some((Route::Send(path), "PUT")) = match_path(send) else {
            panic!("not a send");
        };
        assert_eq!(
            (
                path.room.as_str(),
                path.event_type.as_str(),
                path.txn_id.as_str()
            ),
            ("!r:x", "m.room.message", "t/1")
        );
        for state in [
            "/_matrix/client/v3/rooms/!r:x/state/m.room.encryption",
            "/_matrix/client/v3/rooms/!r:x/state/m.room.encryption/",
        ] {
            let Some((Route::State { state_key, .. }, "GET")) = match_path(state) else {
                panic!("not a state read: {state}");
            };
            assert_eq!(state_key, "");
        }
        assert!(match_path("/_matrix/client/v3/sync/").is_none());
        assert!(match_path("/_matrix/client/r0/sync").is_none());
        assert!(matches!(
            match_path(VERSIONS_PATH),
            Some((Route::Versions, "GET"))
        ));
    }
}

//! Filters (docs/research/matrix-client-server.md §3; spec `Filter`, `RoomFilter`,
//! `RoomEventFilter`): the parts that decide which events a bot sees. `/sync` takes a filter
//! inline (the parameter starts with `{`) or by the id an upload returned; `/messages` takes
//! a `RoomEventFilter` inline. Fields the mock has nothing for (presence, account data,
//! ephemeral, `lazy_load_members`, …) are accepted and ignored.
//!
//! Matching, as the spec words it: a missing list means "all"; `*` matches any sequence of
//! characters; a `not_*` list wins over its inclusion list.

use serde::Deserialize;
use serde_json::Value;

/// The timeline limit when a filter sets none: Synapse's `filter_json.get("limit", 10)`.
pub(crate) const DEFAULT_TIMELINE_LIMIT: usize = 10;

/// A `RoomEventFilter`: which events of a room, and (for a timeline) how many.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct EventFilter {
    limit: Option<u64>,
    types: Option<Vec<String>>,
    not_types: Vec<String>,
    senders: Option<Vec<String>>,
    not_senders: Vec<String>,
}

/// The `room` part of a sync filter.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct RoomFilter {
    rooms: Option<Vec<String>>,
    not_rooms: Vec<String>,
    timeline: EventFilter,
    state: EventFilter,
}

/// A sync filter, as far as the mock reads it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SyncFilter {
    room: RoomFilter,
}

/// Why a filter was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not JSON at all: `M_NOT_JSON`.
    NotJson,
    /// JSON of the wrong shape: `M_BAD_JSON`.
    BadJson(String),
}

fn parse<T: for<'de> Deserialize<'de> + Validate>(text: &str) -> Result<T, Refused> {
    let value: Value = serde_json::from_str(text).map_err(|_| Refused::NotJson)?;
    from_value(value)
}

pub(crate) fn from_value<T: for<'de> Deserialize<'de> + Validate>(
    value: Value,
) -> Result<T, Refused> {
    if !value.is_object() {
        return Err(Refused::BadJson("filter must be a JSON object".to_owned()));
    }
    let filter: T = serde_json::from_value(value).map_err(|e| Refused::BadJson(e.to_string()))?;
    filter.validate()?;
    Ok(filter)
}

/// What serde cannot check.
pub(crate) trait Validate {
    fn validate(&self) -> Result<(), Refused>;
}

impl Validate for EventFilter {
    /// "The maximum number of events to return, must be an integer greater than 0."
    fn validate(&self) -> Result<(), Refused> {
        match self.limit {
            Some(0) => Err(Refused::BadJson("limit must be greater than 0".to_owned())),
            _ => Ok(()),
        }
    }
}

impl Validate for SyncFilter {
    fn validate(&self) -> Result<(), Refused> {
        self.room.timeline.validate()?;
        self.room.state.validate()
    }
}

impl SyncFilter {
    /// An inline filter: the `filter` parameter when it starts with `{`.
    pub(crate) fn inline(text: &str) -> Result<SyncFilter, Refused> {
        parse(text)
    }

    /// Whether the room's events reach the client at all.
    pub(crate) fn wants_room(&self, room_id: &str) -> bool {
        let room = &self.room;
        !any_match(&room.not_rooms, room_id)
            && room.rooms.as_ref().is_none_or(|r| any_match(r, room_id))
    }

    pub(crate) fn timeline(&self) -> &EventFilter {
        &self.room.timeline
    }

    pub(crate) fn state(&self) -> &EventFilter {
        &self.room.state
    }
}

impl EventFilter {
    /// A `RoomEventFilter` given inline, as `/messages` takes it.
    pub(crate) fn inline(text: &str) -> Result<EventFilter, Refused> {
        parse(text)
    }

    /// The timeline limit this filter sets, or the default.
    pub(crate) fn limit(&self) -> usize {
        self.limit.map_or(DEFAULT_TIMELINE_LIMIT, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        })
    }

    /// Whether an event (client format, with `type` and `sender`) passes.
    pub(crate) fn matches(&self, event: &Value) -> bool {
        let field = |name: &str| event.get(name).and_then(Value::as_str).unwrap_or_default();
        let passes = |value: &str, only: &Option<Vec<String>>, not: &[String]| {
            !any_match(not, value) && only.as_ref().is_none_or(|o| any_match(o, value))
        };
        passes(field("type"), &self.types, &self.not_types)
            && passes(field("sender"), &self.senders, &self.not_senders)
    }
}

fn any_match(patterns: &[String], value: &str) -> bool {
    patterns.iter().any(|pattern| wildcard(pattern, value))
}

/// `*` matches any sequence of characters (the empty one included); everything else matches
/// itself.
fn wildcard(pattern: &str, value: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == value;
    };
    let Some(mut remaining) = value.strip_prefix(first) else {
        return false;
    };
    let mut parts: Vec<&str> = rest.split('*').collect();
    let last = parts.pop().unwrap_or_default();
    for part in parts {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wildcards_match_any_sequence() {
        assert!(wildcard("*", "m.room.message"));
        assert!(wildcard("m.room.*", "m.room.message"));
        assert!(!wildcard("m.room.*", "m.reaction"));
        assert!(wildcard("*.message", "m.room.message"));
        assert!(wildcard("m.*.mess*", "m.room.message"));
        assert!(!wildcard("m.room.message", "m.room.messages"));
        assert!(!wildcard("a*a", "a"));
    }

    #[test]
    fn not_types_win_and_a_missing_list_means_all() {
        let filter =
            EventFilter::inline(r#"{"types":["m.room.*"],"not_types":["m.room.encrypted"]}"#)
                .unwrap();
        assert!(filter.matches(&json!({"type": "m.room.message", "sender": "@a:x"})));
        assert!(!filter.matches(&json!({"type": "m.room.encrypted", "sender": "@a:x"})));
        assert!(!filter.matches(&json!({"type": "m.reaction", "sender": "@a:x"})));
        let all = EventFilter::default();
        assert!(all.matches(&json!({"type": "m.reaction"})));
        assert_eq!(all.limit(), DEFAULT_TIMELINE_LIMIT);
    }

    #[test]
    fn bad_filters_are_refused_by_kind() {
        assert_eq!(SyncFilter::inline("{nope").unwrap_err(), Refused::NotJson);
        let wrong_shape = SyncFilter::inline(r#"{"room":{"timeline":{"limit":"ten"}}}"#);
        assert!(matches!(wrong_shape, Err(Refused::BadJson(_))));
        let zero = SyncFilter::inline(r#"{"room":{"timeline":{"limit":0}}}"#);
        assert!(matches!(zero, Err(Refused::BadJson(_))));
        let rooms =
            SyncFilter::inline(r#"{"room":{"rooms":["!a:x"],"not_rooms":["!b:x"]}}"#).unwrap();
        assert!(rooms.wants_room("!a:x") && !rooms.wants_room("!b:x") && !rooms.wants_room("!c:x"));
    }
}

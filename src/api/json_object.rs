//! A request body read as a JSON object whose every member name is given once.
//!
//! JSON (RFC 8259) leaves a repeated name to the parser, and parsers disagree: serde_json
//! keeps the last, others the first. A body with two `idempotency_key`s (or two `text`s) is
//! then a different message to the gateway than to whatever checked or logged it on the way,
//! so it is refused rather than read either way.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

/// A JSON object's members, in a map, and the first name that came twice.
#[derive(Debug, Default)]
pub(super) struct JsonObject {
    pub(super) members: Map<String, Value>,
    pub(super) repeated: Option<String>,
}

impl<'de> Deserialize<'de> for JsonObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = JsonObject;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonObject, A::Error> {
                let mut object = JsonObject::default();
                while let Some((name, value)) = map.next_entry::<String, Value>()? {
                    if object.members.contains_key(&name) {
                        object.repeated.get_or_insert(name);
                    } else {
                        object.members.insert(name, value);
                    }
                }
                Ok(object)
            }
        }
        deserializer.deserialize_map(Members)
    }
}

#[cfg(test)]
mod tests {
    use super::JsonObject;

    #[test]
    fn a_repeated_name_is_found_and_the_first_value_kept() {
        let o: JsonObject =
            serde_json::from_str(r#"{"a":1,"k":"x","b":{"k":1,"k":2},"k":"y","a":3}"#).unwrap();
        assert_eq!(o.repeated.as_deref(), Some("k"));
        assert_eq!(o.members["k"], "x");
        let once: JsonObject = serde_json::from_str(r#"{"a":1,"b":[1,1]}"#).unwrap();
        assert_eq!(once.repeated, None);
    }

    #[test]
    fn anything_but_an_object_is_a_data_error_and_bad_json_a_syntax_error() {
        let e = serde_json::from_str::<JsonObject>("[1,2]").unwrap_err();
        assert!(e.is_data(), "{e}");
        let e = serde_json::from_str::<JsonObject>("{not json").unwrap_err();
        assert!(e.is_syntax(), "{e}");
        let e = serde_json::from_str::<JsonObject>(r#"{"a":1"#).unwrap_err();
        assert!(e.is_eof(), "{e}");
    }
}

//! A long poll's answer read item by item, so that one unreadable item costs only itself.
//!
//! `serde_json` refuses a whole document for one bad string (a lone surrogate such as
//! `"\ud800"`, which a platform can pass through from a user's message): read as one `Value`,
//! a batch of [good, bad, good] stored nothing, the cursor never moved, and the same batch
//! blocked the adapter again after every restart. So the answer is split first: its fields,
//! then the list's items, each kept as raw text; each item is then read on its own. A bad
//! one becomes an [`Item::Unreadable`], which the platform stores as a quarantined event
//! (`kind` `unreadable`, its raw text kept) and the cursor moves past like any other.
//!
//! Splitting does not check strings' escapes (`serde_json`'s raw values do not decode
//! them), which is why a bad item can still be cut out; bytes that are not UTF-8 are
//! replaced with U+FFFD first, so that they too cost only the string they are in.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::gateway::spool::Event;

/// How much of an unreadable item's raw text is kept in its quarantined event.
const MAX_RAW: usize = 64 * 1024;

/// A platform's answer: its other fields read, and its list's items one by one.
#[derive(Debug)]
pub struct Batch {
    /// The answer's fields other than the list; a field that does not read is `Null`.
    pub envelope: Value,
    /// The list's items in order; `None` when the answer has no such list.
    pub items: Option<Vec<Item>>,
}

#[derive(Debug)]
pub enum Item {
    Readable(Value),
    Unreadable {
        /// The item as the platform sent it.
        raw: String,
        /// Why it does not read.
        error: String,
    },
}

/// Read `body`, a JSON object whose field `list` holds the items; `None` when the body is
/// not a JSON object at all.
pub fn read(body: &[u8], list: &str) -> Option<Batch> {
    let text = String::from_utf8_lossy(body);
    let fields: Map<String, Value> = match serde_json::from_str::<Value>(&text) {
        // The common case: everything reads, and nothing is read twice.
        Ok(Value::Object(fields)) => fields,
        Ok(_) => return None,
        Err(_) => return read_split(&text, list),
    };
    let mut envelope = fields;
    let items = match envelope.remove(list) {
        Some(Value::Array(items)) => Some(items.into_iter().map(Item::Readable).collect()),
        _ => None,
    };
    Some(Batch {
        envelope: Value::Object(envelope),
        items,
    })
}

/// Raw fields of an object, none of them decoded yet.
type RawFields = BTreeMap<String, Box<RawValue>>;

fn read_split(text: &str, list: &str) -> Option<Batch> {
    let fields: RawFields = serde_json::from_str(text).ok()?;
    let mut envelope = Map::new();
    let mut items = None;
    for (key, raw) in fields {
        if key == list {
            let Ok(list) = serde_json::from_str::<Vec<Box<RawValue>>>(raw.get()) else {
                continue;
            };
            items = Some(list.iter().map(|raw| item(raw.get())).collect());
        } else {
            envelope.insert(key, serde_json::from_str(raw.get()).unwrap_or(Value::Null));
        }
    }
    Some(Batch {
        envelope: Value::Object(envelope),
        items,
    })
}

fn item(raw: &str) -> Item {
    match serde_json::from_str::<Value>(raw) {
        Ok(v) => Item::Readable(v),
        Err(e) => Item::Unreadable {
            raw: raw.to_owned(),
            error: e.to_string(),
        },
    }
}

/// Field `key` of an unreadable item, when that field itself reads (the item's id, so that
/// the cursor can move past it and a redelivery is recognised).
pub fn field(raw: &str, key: &str) -> Option<Value> {
    let fields: RawFields = serde_json::from_str(raw).ok()?;
    serde_json::from_str(fields.get(key)?.get()).ok()
}

/// An unreadable item as a spool event of kind `unreadable`: its raw text (cut to
/// [`MAX_RAW`]) and why it did not read, so the agent sees that something came and what.
pub(crate) fn quarantined(
    id: String,
    adapter: &str,
    seq: Option<u64>,
    raw: &str,
    error: &str,
) -> Event {
    let data = serde_json::json!({
        "raw": crate::safe_text::clip(raw, MAX_RAW),
        "error": error,
    });
    Event::new(id, adapter, "unreadable", seq, data)
}

/// A stable id for an item with none that reads: a hash of its raw text, so that the same
/// item delivered again is the same event.
pub(crate) fn raw_id(raw: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(raw.as_bytes());
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("unreadable-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_item_costs_only_itself() {
        let body = br#"{"ok":true,"result":[{"update_id":1,"message":{"text":"a"}},{"update_id":2,"message":{"text":"\ud800"}},{"update_id":3}]}"#;
        let batch = read(body, "result").unwrap();
        assert_eq!(batch.envelope["ok"], true);
        let items = batch.items.unwrap();
        assert_eq!(items.len(), 3);
        assert!(matches!(&items[0], Item::Readable(v) if v["update_id"] == 1));
        let Item::Unreadable { raw, error } = &items[1] else {
            panic!("{:?}", items[1]);
        };
        assert!(raw.contains(r"\ud800"), "{raw}");
        assert!(error.contains("escape"), "{error}");
        assert_eq!(field(raw, "update_id"), Some(serde_json::json!(2)));
        assert!(matches!(&items[2], Item::Readable(v) if v["update_id"] == 3));
    }

    #[test]
    fn bytes_that_are_not_utf8_cost_only_their_string_and_non_objects_are_none() {
        let mut body = br##"{"msgs":[{"id":"x","t":""##.to_vec();
        body.extend_from_slice(&[0xff, 0xfe]);
        body.extend_from_slice(br#""}],"ret":0}"#);
        let batch = read(&body, "msgs").unwrap();
        assert_eq!(batch.envelope["ret"], 0);
        assert!(matches!(&batch.items.unwrap()[0], Item::Readable(v) if v["id"] == "x"));
        assert!(read(b"[1,2]", "msgs").is_none());
        assert!(read(b"<html>", "msgs").is_none());
        assert!(read(b"{}", "msgs").unwrap().items.is_none());
    }

    #[test]
    fn the_raw_id_is_stable() {
        assert_eq!(raw_id("{\"a\":1}"), raw_id("{\"a\":1}"));
        assert_ne!(raw_id("{\"a\":1}"), raw_id("{\"a\":2}"));
    }
}

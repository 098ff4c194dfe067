//! Hermes's pairings carried into the profile's store (docs/research/adopt.md §3): whom Hermes
//! approved stays approved, and a code Hermes sent in the last hour can still be approved,
//! with `hermes-svc pairing approve CODE` (both hash a code as SHA-256 of salt ++ code).
//!
//! Hermes keeps `{platform}-approved.json` (`{user_id: {user_name, approved_at}}`) and
//! `{platform}-pending.json` (`{entry: {hash, salt, user_id, user_name, created_at}}`), in
//! `platforms/pairing/` and the legacy `pairing/`; both are read and joined, as Hermes heals
//! a store split across them. Rate limits and lockouts are not carried: they end within the
//! hour anyway.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::access::pairing::{
    Approval, Book, PairingError, Pending, Store, CODE_TTL_SECS, MAX_PENDING,
};

/// Hermes's pairings for the adopted platforms, as the gateway's store holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    pub approved: BTreeMap<String, BTreeMap<String, Approval>>,
    pub pending: Vec<Pending>,
    /// Entries left out, and why (never a code or a hash).
    pub notes: Vec<String>,
}

/// What a merge added to the store: what `--undo` takes out again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Merged {
    /// `(adapter, sender)` approved by the merge.
    pub approved: Vec<(String, String)>,
    /// `(adapter, sender, hash)` of the codes the merge added.
    pub pending: Vec<(String, String, String)>,
}

impl Merged {
    pub fn is_empty(&self) -> bool {
        self.approved.is_empty() && self.pending.is_empty()
    }
}

#[derive(Deserialize)]
struct HermesApproval {
    #[serde(default)]
    user_name: Option<String>,
    #[serde(default)]
    approved_at: Option<f64>,
}

#[derive(Deserialize)]
struct HermesPending {
    hash: String,
    salt: String,
    user_id: String,
    #[serde(default)]
    user_name: Option<String>,
    created_at: f64,
}

/// The pairings in Hermes's files `files` (`(name, text)`, [`crate::hermes_home`]) of the
/// platforms `adapters` maps (Hermes's platform → the adapter adopt makes), as of `now`.
pub fn carried(files: &[(String, String)], adapters: &[(&str, &str)], now: u64) -> Carried {
    let mut out = Carried::default();
    for (name, text) in files {
        let Some((platform, kind)) = name.strip_suffix(".json").and_then(|n| n.rsplit_once('-'))
        else {
            continue;
        };
        let Some((_, adapter)) = adapters.iter().find(|(p, _)| *p == platform) else {
            continue;
        };
        match kind {
            "approved" => approved(name, text, adapter, &mut out),
            "pending" => pending(name, text, adapter, now, &mut out),
            _ => {}
        }
    }
    // The newest codes per adapter, as many as the store keeps: older ones expire first.
    out.pending.sort_by_key(|p| std::cmp::Reverse(p.created_at));
    let mut per_adapter: BTreeMap<String, usize> = BTreeMap::new();
    let before = out.pending.len();
    out.pending.retain(|p| {
        let n = per_adapter.entry(p.adapter.clone()).or_default();
        *n += 1;
        *n <= MAX_PENDING
    });
    if out.pending.len() < before {
        out.notes.push(format!("{} of Hermes's waiting codes not carried: the gateway keeps at most {MAX_PENDING} per adapter", before - out.pending.len()));
    }
    out.pending.sort_by_key(|p| p.created_at);
    out
}

/// Whether hermes-svc's store takes `id` (its access rules compare printable ASCII).
fn usable_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 256 && id.bytes().all(|b| b.is_ascii_graphic())
}

fn approved(name: &str, text: &str, adapter: &str, out: &mut Carried) {
    let Ok(entries) = serde_json::from_str::<BTreeMap<String, HermesApproval>>(text) else {
        out.notes.push(format!(
            "{name} is not a pairing file Hermes wrote; its approvals are not carried"
        ));
        return;
    };
    for (user, a) in entries {
        if !usable_id(&user) {
            out.notes.push(format!(
                "{name}: an approved id with spaces or non-ASCII characters is not carried"
            ));
            continue;
        }
        let at = a
            .approved_at
            .filter(|t| t.is_finite() && *t >= 0.0)
            .map_or(0, |t| t as u64);
        out.approved
            .entry(adapter.to_owned())
            .or_default()
            .entry(user)
            .or_insert(Approval {
                name: a.user_name.filter(|n| !n.is_empty()),
                approved_at: at,
            });
    }
}

fn pending(name: &str, text: &str, adapter: &str, now: u64, out: &mut Carried) {
    let Ok(entries) = serde_json::from_str::<BTreeMap<String, HermesPending>>(text) else {
        out.notes.push(format!(
            "{name} is not a pairing file Hermes wrote; its waiting codes are not carried"
        ));
        return;
    };
    for p in entries.into_values() {
        let created = if p.created_at.is_finite() && p.created_at >= 0.0 {
            p.created_at as u64
        } else {
            continue;
        };
        let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
        let fresh = created <= now && now - created < CODE_TTL_SECS;
        if !fresh || !usable_id(&p.user_id) || !hex(&p.salt, 32) || !hex(&p.hash, 64) {
            continue;
        }
        let duplicate = out
            .pending
            .iter()
            .any(|q| q.adapter == adapter && q.sender == p.user_id);
        if duplicate {
            continue;
        }
        out.pending.push(Pending {
            adapter: adapter.to_owned(),
            sender: p.user_id,
            name: p.user_name.filter(|n| !n.is_empty()),
            created_at: created,
            salt: p.salt.to_ascii_lowercase(),
            hash: p.hash.to_ascii_lowercase(),
        });
    }
}

/// `carried` merged into `book`: approvals the store does not have yet, codes for senders
/// with none waiting, within the store's limit per adapter. A second merge adds nothing.
pub fn merge_into(book: &mut Book, carried: &Carried) -> Merged {
    let mut merged = Merged::default();
    for (adapter, senders) in &carried.approved {
        for (sender, approval) in senders {
            let slot = book.approved.entry(adapter.clone()).or_default();
            if !slot.contains_key(sender) {
                slot.insert(sender.clone(), approval.clone());
                merged.approved.push((adapter.clone(), sender.clone()));
            }
        }
    }
    for p in &carried.pending {
        let approved = book
            .approved
            .get(&p.adapter)
            .is_some_and(|s| s.contains_key(&p.sender));
        let waiting = book
            .pending
            .iter()
            .any(|q| q.adapter == p.adapter && q.sender == p.sender);
        let full = book
            .pending
            .iter()
            .filter(|q| q.adapter == p.adapter)
            .count()
            >= MAX_PENDING;
        if approved || waiting || full {
            continue;
        }
        book.pending.push(p.clone());
        merged
            .pending
            .push((p.adapter.clone(), p.sender.clone(), p.hash.clone()));
    }
    book.pending.sort_by_key(|p| p.created_at);
    merged
}

/// Merge `carried` into the profile's store, under its lock ([`Store::change`]).
pub fn merge(store: &Store, carried: &Carried) -> Result<Merged, PairingError> {
    store.change(|book| merge_into(book, carried))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SALT: &str = "00112233445566778899aabbccddeeff";

    fn files(now: u64) -> Vec<(String, String)> {
        let hash = "ab".repeat(32);
        vec![
            (
                "telegram-approved.json".into(),
                r#"{"42": {"user_name": "Ann", "approved_at": 1700000000.5}, "bad id": {}}"#.into(),
            ),
            (
                "telegram-pending.json".into(),
                format!(
                    r#"{{"e1": {{"hash": "{hash}", "salt": "{SALT}", "user_id": "7", "user_name": "Bo", "created_at": {}}},
                        "e2": {{"hash": "{hash}", "salt": "{SALT}", "user_id": "8", "created_at": {}}}}}"#,
                    now - 60,
                    now - 4000
                ),
            ),
            ("whatsapp-approved.json".into(), r#"{"5": {}}"#.into()),
            (
                "telegram-approved.json".into(),
                r#"{"42": {"approved_at": 1}, "43": {}}"#.into(),
            ),
        ]
    }

    #[test]
    fn approvals_and_fresh_codes_of_adopted_platforms_are_carried() {
        let now = 1_800_000_000;
        let c = carried(&files(now), &[("telegram", "telegram")], now);
        let tg = &c.approved["telegram"];
        assert_eq!(tg.keys().collect::<Vec<_>>(), ["42", "43"]);
        assert_eq!(
            tg["42"],
            Approval {
                name: Some("Ann".into()),
                approved_at: 1_700_000_000
            }
        );
        assert_eq!(
            c.pending.len(),
            1,
            "the code older than an hour is not carried"
        );
        assert_eq!(
            (c.pending[0].sender.as_str(), c.pending[0].created_at),
            ("7", now - 60)
        );
        assert!(!c.approved.contains_key("whatsapp"));
        assert_eq!(c.notes.len(), 1, "{:?}", c.notes);
    }

    #[test]
    fn a_merge_adds_once_and_never_overwrites() {
        let now = 1_800_000_000;
        let c = carried(&files(now), &[("telegram", "telegram")], now);
        let mut book = Book::default();
        book.approved.entry("telegram".into()).or_default().insert(
            "43".into(),
            Approval {
                name: Some("kept".into()),
                approved_at: 9,
            },
        );
        let first = merge_into(&mut book, &c);
        assert_eq!(first.approved, [("telegram".to_owned(), "42".to_owned())]);
        assert_eq!(first.pending.len(), 1);
        assert_eq!(book.approved["telegram"]["43"].approved_at, 9);
        let again = book.clone();
        assert!(merge_into(&mut book, &c).is_empty());
        assert_eq!(book, again);
    }

    #[test]
    fn the_store_is_merged_under_its_lock_and_a_rerun_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(&dir.path().join("access"));
        let now = crate::access::pairing::now();
        let c = carried(&files(now), &[("telegram", "telegram")], now);
        assert!(!merge(&store, &c).unwrap().is_empty());
        let written = std::fs::read(store.path()).unwrap();
        assert!(merge(&store, &c).unwrap().is_empty());
        assert_eq!(std::fs::read(store.path()).unwrap(), written);
    }
}

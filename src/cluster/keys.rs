//! What the active owns in etcd, and what it writes there.
//!
//! `/hermes-svc/v1/profile/NAME/active` says who is active; `/hermes-svc/v1/credential/HASH`
//! holds each bot credential the profile uses, named by a keyed hash (HMAC-SHA256 keyed with
//! the credential itself), so that two profiles with one token conflict across hosts too,
//! while etcd never holds the token, and its readers can test a guess only by holding it.
//! `/hermes-svc/v1/profile/NAME/inbound/ADAPTER` is the adapter's inbound position
//! and `.../outbox/HASH` one outbox message (`replica.rs`): both outlive every term.
//! `.../node/NODE` is a member's record (`presence.rs`).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

const PREFIX: &str = "/hermes-svc/v1/";

/// Every key of one profile's term.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    pub(crate) active: String,
    pub(crate) credentials: Vec<String>,
    /// Where each adapter's inbound position is kept (`inbound/ADAPTER` under the profile),
    /// outside the lease: it outlives every term.
    pub(crate) inbound: String,
    /// Where the outbox's messages are kept (`outbox/KEY-HASH` under the profile), outside
    /// the lease too.
    pub(crate) outbox: String,
    /// Where each member keeps its record (`node/NODE` under the profile), under a lease of
    /// its own.
    pub(crate) nodes: String,
}

impl Keys {
    /// `identities` as the runtime claims them locally: (adapter name, identity).
    pub(crate) fn new(profile: &str, identities: &[(String, String)]) -> Keys {
        Keys {
            active: format!("{PREFIX}profile/{profile}/active"),
            inbound: format!("{PREFIX}profile/{profile}/inbound/"),
            outbox: format!("{PREFIX}profile/{profile}/outbox/"),
            nodes: format!("{PREFIX}profile/{profile}/node/"),
            credentials: identities
                .iter()
                .map(|(_, identity)| format!("{PREFIX}credential/{}", keyed_hash(identity)))
                .collect(),
        }
    }

    pub(crate) fn all(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.active).chain(&self.credentials)
    }

    /// Where a standby watches for keys going: every key of the cluster.
    pub(crate) fn watch_prefix() -> &'static str {
        PREFIX
    }
}

fn keyed_hash(identity: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, identity.as_bytes());
    let tag = ring::hmac::sign(&key, b"hermes-svc cluster credential v1");
    tag.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// This machine, as a short hash of systemd's machine id (`/etc/machine-id`, the D-Bus one
/// where that is missing), or of the host name where neither exists (macOS).
fn machine() -> String {
    use sha2::{Digest, Sha256};
    let id = crate::test_hook::machine_id()
        .or_else(|| std::fs::read_to_string("/etc/machine-id").ok())
        .or_else(|| std::fs::read_to_string("/var/lib/dbus/machine-id").ok())
        .or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
        })
        .unwrap_or_default();
    let digest = Sha256::digest(id.trim().as_bytes());
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}

/// The value of every key of a term: who holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Claim {
    pub(crate) node: String,
    pub(crate) profile: String,
    pub(crate) pid: u32,
    /// When the term began, seconds since the epoch.
    pub(crate) since: u64,
    /// A hash of the machine's identity: two claims with one `node` and two machines are two
    /// hosts that were given one name.
    #[serde(default)]
    pub(crate) machine: String,
}

impl Claim {
    pub(crate) fn now(node: &str, profile: &str) -> Claim {
        Claim {
            node: node.to_owned(),
            profile: profile.to_owned(),
            pid: std::process::id(),
            since: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            machine: machine(),
        }
    }

    /// Is `self` another machine's claim under `node`'s name?
    pub(crate) fn clashes_with(&self, node: &str) -> bool {
        self.node == node && !self.machine.is_empty() && self.machine != machine()
    }

    /// `NODE since TIME`, as `STATUS=` and `status` show the active.
    pub(crate) fn describe(&self) -> String {
        let since = UNIX_EPOCH + std::time::Duration::from_secs(self.since);
        format!(
            "{} since {}",
            self.node,
            humantime::format_rfc3339_seconds(since)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_keys_hold_no_secret_and_agree_across_hosts() {
        let ids = [("a".to_string(), "kind:SECRET-TOKEN".to_string())];
        let (one, two) = (Keys::new("coder", &ids), Keys::new("other", &ids));
        assert_eq!(one.credentials, two.credentials);
        assert!(!one.credentials[0].contains("SECRET"));
        assert_eq!(one.active, "/hermes-svc/v1/profile/coder/active");
        let other = Keys::new("coder", &[("a".into(), "kind:ANOTHER".into())]);
        assert_ne!(one.credentials, other.credentials);
    }
}

//! Who may dial the connector: the upgrade token of Hermes's Relay (`gateway/relay/auth.py`,
//! `make_upgrade_token`), checked before the WebSocket is accepted.
//!
//! The port is on loopback, and any local user can reach a loopback port: without this, any of
//! them could read every message the bot receives and post as the bot. The token is
//! `base64url_nopad("{id}:{exp}:{hex HMAC-SHA256(secret, "{id}:{exp}")}")`, minted per dial with
//! `exp` 300 s ahead. The id is the profile's relay id, the secret the profile's relay secret
//! (`agent/secret.rs`). A token that never expires (`exp` 0, which the contract allows) is
//! refused: one that leaked would be good forever.

use base64::Engine;
use ring::hmac;

/// The longest a token may still be valid for: Hermes mints them 300 s ahead.
const MAX_AHEAD_SECS: u64 = 3600;

/// Why a dial was refused. Said to the log, never to the dialler.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("no Authorization: Bearer header")]
    Missing,
    #[error("the token is not base64url of id:exp:signature")]
    Malformed,
    #[error("the token is for relay id {0:?}, not this profile's")]
    OtherId(String),
    #[error("the token has expired")]
    Expired,
    #[error("the token's expiry is not within the next hour")]
    TooLong,
    #[error("the token's signature does not match the profile's relay secret")]
    BadSignature,
}

/// Check the `Authorization` header's value against relay `id` and `secret` at `now` (Unix
/// seconds).
pub fn check(header: Option<&str>, id: &str, secret: &[u8], now: u64) -> Result<(), Refused> {
    let token = header
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or(Refused::Missing)?;
    let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| Refused::Malformed)?;
    let decoded = String::from_utf8(decoded).map_err(|_| Refused::Malformed)?;
    // The id may itself hold colons: split from the right.
    let mut parts = decoded.rsplitn(3, ':');
    let (Some(sig), Some(exp), Some(payload)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Refused::Malformed);
    };
    let exp: u64 = exp.parse().map_err(|_| Refused::Malformed)?;
    if payload != id {
        return Err(Refused::OtherId(
            crate::safe_text::visible(payload)
                .chars()
                .take(64)
                .collect(),
        ));
    }
    let sig = hex(sig).ok_or(Refused::Malformed)?;
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    hmac::verify(&key, format!("{payload}:{exp}").as_bytes(), &sig)
        .map_err(|_| Refused::BadSignature)?;
    if exp == 0 || exp > now + MAX_AHEAD_SECS {
        return Err(Refused::TooLong);
    }
    if exp < now {
        return Err(Refused::Expired);
    }
    Ok(())
}

/// A token as Hermes mints one, for tests and the demo's own agent.
pub fn mint(id: &str, secret: &[u8], exp: u64) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let signed = format!("{id}:{exp}");
    let sig: String = hmac::sign(&key, signed.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{signed}:{sig}"))
}

fn hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || text.len() > 128 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"3f9a0c1b5e7d2a4c6b8e0f1a3c5e7d9b";
    /// Minted by hermes-agent 0.19.0's own `gateway.relay.auth` for id "hermes-svc-coder",
    /// exp 2000000000 and the secret above.
    const HERMES_TOKEN: &str = "aGVybWVzLXN2Yy1jb2RlcjoyMDAwMDAwMDAwOjA4NjdhZDQwMjBkZjkwNzhiODVlNTcxZWM2ZjNjZjIxYzUxMGJhZDY5MjY2NjQ1MGMxYjAzYmI0YWUzY2Q1ZTQ";

    #[test]
    fn a_token_hermes_minted_is_taken_until_it_expires() {
        let header = format!("Bearer {HERMES_TOKEN}");
        let now = 2_000_000_000 - 300;
        assert_eq!(
            check(Some(&header), "hermes-svc-coder", SECRET, now),
            Ok(())
        );
        assert_eq!(
            mint("hermes-svc-coder", SECRET, 2_000_000_000),
            HERMES_TOKEN
        );
        assert_eq!(
            check(Some(&header), "hermes-svc-coder", SECRET, 2_000_000_001),
            Err(Refused::Expired)
        );
        assert_eq!(
            check(Some(&header), "hermes-svc-coder", SECRET, now - 7200),
            Err(Refused::TooLong)
        );
    }

    #[test]
    fn anything_else_is_refused() {
        let now = 2_000_000_000 - 300;
        let id = "hermes-svc-coder";
        let bearer = |t: &str| format!("Bearer {t}");
        assert_eq!(check(None, id, SECRET, now), Err(Refused::Missing));
        assert_eq!(
            check(Some(HERMES_TOKEN), id, SECRET, now),
            Err(Refused::Missing)
        );
        assert_eq!(
            check(Some(&bearer("%%%")), id, SECRET, now),
            Err(Refused::Malformed)
        );
        assert_eq!(
            check(Some(&bearer(HERMES_TOKEN)), id, b"another secret", now),
            Err(Refused::BadSignature)
        );
        assert!(matches!(
            check(Some(&bearer(HERMES_TOKEN)), "hermes-svc-other", SECRET, now),
            Err(Refused::OtherId(_))
        ));
        let forever = mint(id, SECRET, 0);
        assert_eq!(
            check(Some(&bearer(&forever)), id, SECRET, now),
            Err(Refused::TooLong)
        );
        // A signature cut short, or not hex, is malformed, not a panic.
        let short =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{id}:{now}:abc"));
        assert_eq!(
            check(Some(&bearer(&short)), id, SECRET, now),
            Err(Refused::Malformed)
        );
        let odd = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{id}:{now}:zz"));
        assert_eq!(
            check(Some(&bearer(&odd)), id, SECRET, now),
            Err(Refused::Malformed)
        );
    }
}

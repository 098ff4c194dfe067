//! Secrets taken out of text that comes from outside, before it is stored, logged or sent to
//! the service manager.
//!
//! A platform may quote a credential back: a 502 whose description holds a request path with
//! the bot token in it, a token endpoint's error that repeats the app secret. That text became
//! an adapter's last error, and so `STATUS=` (which every local user reads through `systemctl
//! status`), the state file, the journal and `logs`. So every secret the process holds is
//! registered here as it is resolved (a [`crate::config::Secret`], an access token as it is
//! fetched), with the forms a URL gives it, and [`scrub`] replaces each with `[redacted]`.
//! Platform text is scrubbed where it enters (`safe_text::clip`, which every reading of a
//! platform's words goes through) and again where it is kept (an adapter's last error).

use std::borrow::Cow;
use std::sync::{PoisonError, RwLock};

/// What a secret is replaced with.
pub(crate) const REDACTED: &str = "[redacted]";

/// A secret shorter than this is not scrubbed: it would match ordinary words and numbers, and
/// no platform's credential is that short.
const MIN_LEN: usize = 6;

/// Every form of every secret registered so far, longest first, so that a secret that
/// contains another is replaced whole.
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remember `secret` (and its percent-encoded form) for [`scrub`].
pub(crate) fn register(secret: &str) {
    if secret.len() < MIN_LEN {
        return;
    }
    let mut forms = vec![secret.to_owned()];
    let encoded = percent_encode(secret);
    if encoded != secret {
        forms.push(encoded.to_ascii_lowercase());
        forms.push(encoded);
    }
    let mut all = SECRETS.write().unwrap_or_else(PoisonError::into_inner);
    for form in forms {
        if !all.contains(&form) {
            all.push(form);
        }
    }
    all.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `text` with every registered secret replaced by [`REDACTED`].
pub(crate) fn scrub(text: &str) -> Cow<'_, str> {
    let all = SECRETS.read().unwrap_or_else(PoisonError::into_inner);
    if !all.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for s in all.iter() {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), REDACTED);
        }
    }
    Cow::Owned(out)
}

/// Every byte but the unreserved ones as `%XX`, as a URL path or query carries it (a bot
/// token's `:` is `%3A` there).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_secret_is_scrubbed_in_every_form() {
        register("424242:redact-test-token");
        let said = "Bad Gateway: POST /bot424242:redact-test-token/getUpdates \
                    (/bot424242%3Aredact-test-token/, /bot424242%3aredact-test-token/)";
        let out = scrub(said);
        assert!(!out.contains("redact-test-token"), "{out}");
        assert_eq!(out.matches(REDACTED).count(), 3, "{out}");
        assert!(matches!(scrub("nothing secret here"), Cow::Borrowed(_)));
    }

    #[test]
    fn short_secrets_are_not_registered() {
        register("abc");
        assert_eq!(scrub("abc def"), "abc def");
    }
}

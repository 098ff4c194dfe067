//! `tenant_access_token` bookkeeping, on the wall clock of the mock: which tokens the platform
//! has issued and until when it honours them.
//!
//! "自建应用获取 tenant_access_token" (auth/v3/tenant_access_token/internal): the token lives
//! at most 2 hours; asked again with 30 minutes or more left, the endpoint returns the same
//! token; with less, a new one, and both stay valid until their own expiry.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::events::hex;

/// "剩余有效期小于 30 分钟时，调用本接口会返回一个新的 tenant_access_token".
const REISSUE_BELOW: Duration = Duration::from_secs(30 * 60);

pub(crate) struct Tokens {
    lifetime: Duration,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Token → when it stops being honoured.
    valid: HashMap<String, Instant>,
    current: Option<String>,
    issued: u64,
}

impl Tokens {
    pub(crate) fn new(lifetime: Duration) -> Tokens {
        Tokens {
            lifetime,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The token to hand out now and its remaining lifetime in whole seconds (`expire`).
    pub(crate) fn issue(&self, now: Instant) -> (String, u64) {
        let mut inner = self.lock();
        inner.valid.retain(|_, until| *until > now);
        if let Some(current) = inner.current.clone() {
            if let Some(until) = inner.valid.get(&current) {
                let left = until.saturating_duration_since(now);
                if left >= REISSUE_BELOW {
                    return (current, left.as_secs());
                }
            }
        }
        inner.issued += 1;
        let token = format!("t-mock{:04}{}", inner.issued, hex(36));
        inner.valid.insert(token.clone(), now + self.lifetime);
        inner.current = Some(token.clone());
        (token, self.lifetime.as_secs())
    }

    pub(crate) fn honoured(&self, token: &str, now: Instant) -> bool {
        self.lock()
            .valid
            .get(token)
            .is_some_and(|until| *until > now)
    }

    /// Stop honouring every token issued so far, as if their lifetime had passed.
    pub(crate) fn expire_all(&self) {
        let mut inner = self.lock();
        inner.valid.clear();
        inner.current = None;
    }

    pub(crate) fn issued(&self) -> u64 {
        self.lock().issued
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_token_while_half_an_hour_is_left_then_a_new_one() {
        let tokens = Tokens::new(Duration::from_secs(7200));
        let t0 = Instant::now();
        let (first, expire) = tokens.issue(t0);
        assert_eq!(expire, 7200);
        let (again, left) = tokens.issue(t0 + Duration::from_secs(60));
        assert_eq!((again.as_str(), left), (first.as_str(), 7140));
        let late = t0 + Duration::from_secs(7200 - 60);
        let (second, _) = tokens.issue(late);
        assert_ne!(second, first);
        assert!(tokens.honoured(&first, late) && tokens.honoured(&second, late));
        assert!(!tokens.honoured(&first, t0 + Duration::from_secs(7201)));
        tokens.expire_all();
        assert!(!tokens.honoured(&second, late));
    }
}

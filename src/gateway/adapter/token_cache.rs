//! An access token with a lifetime, as a platform hands it out (an app's access token, a
//! `tenant_access_token`): fetched on first use, used while fresh on both clocks, fetched
//! again near its end or when the platform rejects it. What is fetched, and how, is the
//! platform's; keeping it is the same for every platform.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::setup::PlatformError;

/// A token and when it expires, on both clocks. The monotonic clock stops while the machine
/// sleeps, so a laptop that slept past the token's lifetime would still think it fresh; the
/// wall clock keeps counting but can be set back. The token is used only while both say it is
/// fresh.
struct AccessToken {
    value: String,
    expires: Instant,
    expires_wall: SystemTime,
}

impl AccessToken {
    fn fresh(&self, now: Instant, wall: SystemTime, margin: Duration) -> bool {
        now + margin < self.expires && wall + margin < self.expires_wall
    }
}

/// One credential's token. Not `Debug`: it holds the token.
pub(crate) struct TokenCache {
    /// Refresh this long before the token expires.
    margin: Duration,
    cached: Mutex<Option<AccessToken>>,
    /// Held across a fetch, so callers that find no fresh token wait for one fetch rather
    /// than each making their own.
    fetching: tokio::sync::Mutex<()>,
}

impl TokenCache {
    pub(crate) fn new(margin: Duration) -> Self {
        Self {
            margin,
            cached: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// A token fresh on both clocks: the cached one, or a new one from `fetch`, which answers
    /// with the token and its lifetime.
    pub(crate) async fn get<F, Fut>(&self, fetch: F) -> Result<String, PlatformError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(String, Duration), PlatformError>>,
    {
        if let Some(t) = self.fresh() {
            return Ok(t);
        }
        let _fetch = self.fetching.lock().await;
        // Whoever held the lock before may have fetched one meanwhile.
        if let Some(t) = self.fresh() {
            return Ok(t);
        }
        let (token, lifetime) = fetch().await?;
        self.store(&token, lifetime);
        Ok(token)
    }

    /// Forget `stale`, the token the platform just rejected. A newer token someone else
    /// fetched meanwhile is kept: it was not the one rejected.
    pub(crate) fn invalidate(&self, stale: &str) {
        let mut cached = self.lock();
        if cached.as_ref().is_some_and(|t| t.value == stale) {
            *cached = None;
        }
    }

    /// The cached token, if it is fresh on both clocks.
    pub(crate) fn fresh(&self) -> Option<String> {
        let cached = self.lock();
        let t = cached.as_ref()?;
        t.fresh(Instant::now(), crate::test_hook::wall_clock(), self.margin)
            .then(|| t.value.clone())
    }

    pub(crate) fn store(&self, value: &str, lifetime: Duration) {
        // An access token is a credential too: a platform may quote it back.
        crate::redact::register(value);
        *self.lock() = Some(AccessToken {
            value: value.to_owned(),
            expires: Instant::now() + lifetime,
            expires_wall: crate::test_hook::wall_clock() + lifetime,
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<AccessToken>> {
        // A panic elsewhere while holding the lock left a whole value behind: keep using it.
        self.cached.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_stale_when_either_clock_says_so() {
        let now = Instant::now();
        let wall = SystemTime::now();
        let hour = Duration::from_secs(3600);
        let margin = Duration::from_secs(60);
        let t = AccessToken {
            value: "t".into(),
            expires: now + hour,
            expires_wall: wall + hour,
        };
        assert!(t.fresh(now, wall, margin));
        // Suspended for two hours: the monotonic clock did not move, the wall clock did.
        assert!(!t.fresh(now, wall + 2 * hour, margin));
        // The wall clock was set back: the monotonic clock still ends the token.
        assert!(!t.fresh(now + 2 * hour, wall - hour, margin));
        // Within the refresh margin.
        assert!(!t.fresh(now + hour - margin, wall, margin));
    }

    #[test]
    fn invalidating_a_token_spares_a_newer_one() {
        let t = TokenCache::new(Duration::from_secs(60));
        t.store("new", Duration::from_secs(3600));
        t.invalidate("old");
        assert_eq!(t.fresh().as_deref(), Some("new"));
        t.invalidate("new");
        assert_eq!(t.fresh(), None);
    }

    #[tokio::test]
    async fn a_fresh_token_is_not_fetched_again_and_a_failed_fetch_caches_nothing() {
        let t = TokenCache::new(Duration::from_secs(60));
        let fail = || async { Err(PlatformError::Retry("down".into())) };
        assert!(t.get(fail).await.is_err());
        assert_eq!(t.fresh(), None);
        let got = t
            .get(|| async { Ok(("a".to_owned(), Duration::from_secs(3600))) })
            .await;
        assert_eq!(got.unwrap(), "a");
        let again = t
            .get(|| async { panic!("fetched a fresh token again") })
            .await;
        assert_eq!(again.unwrap(), "a");
        // A lifetime inside the margin is stale at once: the next caller fetches.
        t.store("short", Duration::from_secs(30));
        assert_eq!(t.fresh(), None);
    }
}

//! What every adapter of one gateway shares, built once at start: the HTTP client for setup
//! requests, the proxy settings, the platforms' session start limits, the plain WebSocket
//! outlets, a bound on setup requests in flight, and what each platform keeps for all its
//! adapters and senders (an access token per credential, a login per account).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::identify_queue::IdentifyQueues;
use super::outlet::Outlets;
use super::proxy;
use super::whoami::Whoami;
use crate::gateway::fence::Fence;
use crate::gateway::grid::Grid;

/// What every adapter of one gateway shares: one HTTP client with a small idle pool, the
/// proxy settings, the platforms' session start limits, and a bound on setup requests in
/// flight. Cheap to clone; not `Debug`, because the proxy settings may hold a password.
#[derive(Clone)]
pub struct Shared {
    pub(crate) http: reqwest::Client,
    /// The proxy settings the WebSocket follows (the HTTPS client reads the same ones).
    pub(crate) proxies: proxy::ProxyEnv,
    pub(crate) identify: IdentifyQueues,
    /// One outlet per plain WebSocket adapter that can send: its sender's way into its live
    /// connection.
    pub(crate) outlets: Outlets,
    pub(super) setup_permits: Arc<Semaphore>,
    /// Whether this process may act on the platforms now (a cluster's active, until its
    /// lease could be gone): checked before every frame a session writes.
    pub(crate) fence: Fence,
    /// The one timer every connection's deadlines are on.
    pub(crate) grid: Grid,
    /// Who each adapter's bot is, as its connection learned it: the access rules read it.
    pub whoami: Whoami,
    /// What each platform keeps for all its adapters and senders, one value per type
    /// ([`Shared::keep`]).
    kept: Arc<Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>>,
}

/// Token and gateway-URL requests in flight at once, per gateway. A thousand adapters starting
/// together get their answers in about as long (each request is a round trip, and the
/// platform answers them one after another anyway), without a thousand sockets.
const SETUP_CONCURRENCY: usize = 8;

impl Shared {
    pub fn new(proxies: proxy::ProxyEnv) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(15))
            // A connect that never completes ends as a connect error, not as the request's
            // timeout: a sender then knows nothing went out and may simply try again.
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("hermes-svc/", env!("CARGO_PKG_VERSION")))
            // Setup requests come in a burst at start and then once per reconnect: a couple of
            // warm connections serve the burst, and none is kept idle for long after it.
            .pool_max_idle_per_host(SETUP_CONCURRENCY)
            .pool_idle_timeout(Duration::from_secs(10))
            .build()?;
        Ok(Self {
            http,
            proxies,
            identify: IdentifyQueues::default(),
            outlets: Outlets::default(),
            setup_permits: Arc::new(Semaphore::new(SETUP_CONCURRENCY)),
            fence: Fence::open(),
            grid: Grid::default(),
            whoami: Whoami::default(),
            kept: Arc::default(),
        })
    }

    /// The gateway's one `T`, made on first use: how a platform keeps what its adapter and
    /// its sender must share (one access token per credential, one login per account)
    /// without this struct naming any platform.
    pub(crate) fn keep<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let any = kept
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()))
            .clone();
        any.downcast()
            .unwrap_or_else(|_| unreachable!("kept by its own type id"))
    }
}

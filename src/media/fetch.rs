//! Fetching a chat message's file into the store: the trait each platform's wing implements
//! (its own credentials, its own API), and the run's set of them, one per adapter.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::download::{Body, DownloadError};
use super::store::{Store, StoreError, Stored};

/// How much the store keeps before it removes its oldest files.
pub const QUOTA: u64 = 512 * 1024 * 1024;

/// An item of a message, as its platform names it.
#[derive(Clone, Copy, Debug)]
pub struct Item<'a> {
    /// The platform's id for it (a file id, a resource key).
    pub id: Option<&'a str>,
    /// Where the platform says it is.
    pub url: Option<&'a str>,
    /// The platform's id of the message it came with, for a platform that serves a file by
    /// the message and the file's key together.
    pub message: Option<&'a str>,
    /// What it is: `photo`, `voice`, `document`, ... (a platform may fetch kinds apart).
    pub kind: &'a str,
    /// The wing's own detail of it, opaque here (`Media::extra`, such as a file's key).
    pub extra: Option<&'a str>,
}

/// A download under way.
pub type Fetching<'a> = Pin<Box<dyn Future<Output = Result<Body, DownloadError>> + Send + 'a>>;

/// A platform's way to its files, with the bot's credentials.
pub trait Fetch: Send + Sync {
    /// Start the download of `item`, within the platform's own size limit.
    fn fetch<'a>(&'a self, item: Item<'a>) -> Fetching<'a>;
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("the gateway does not fetch this platform's files yet")]
    Unsupported,
    #[error(transparent)]
    Download(#[from] DownloadError),
    #[error("the media store failed: {0}")]
    Store(String),
}

impl From<StoreError> for FetchError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Download(d) => FetchError::Download(d),
            other => FetchError::Store(crate::error_chain::one_line(&other)),
        }
    }
}

/// The run's store and each adapter's fetcher.
pub struct Inbound {
    store: Store,
    /// By adapter; a reload replaces a changed adapter's (its credential may be new).
    fetchers: std::sync::RwLock<HashMap<String, Arc<dyn Fetch>>>,
}

impl Inbound {
    pub fn new(store: Store, fetchers: HashMap<String, Arc<dyn Fetch>>) -> Inbound {
        Inbound {
            store,
            fetchers: std::sync::RwLock::new(fetchers),
        }
    }

    /// Give `adapter` this fetcher, or none: a reload that added, changed or removed it.
    pub(crate) fn set_fetcher(&self, adapter: &str, fetcher: Option<Arc<dyn Fetch>>) {
        let mut fetchers = self.fetchers.write().unwrap_or_else(|p| p.into_inner());
        match fetcher {
            Some(f) => fetchers.insert(adapter.to_owned(), f),
            None => fetchers.remove(adapter),
        };
    }

    /// The store, for files that do not come from a platform (an agent's answer's images).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Fetch `adapter`'s `item` (a `kind`, called `name` by its platform) into the store; the
    /// store is then brought back under its quota, sparing what `keep` names.
    pub async fn fetch(
        &self,
        adapter: &str,
        kind: &str,
        item: Item<'_>,
        name: Option<&str>,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Stored, FetchError> {
        let fetcher = self
            .fetchers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(adapter)
            .cloned()
            .ok_or(FetchError::Unsupported)?;
        let body = fetcher.fetch(item).await?;
        let id = item.id.or(item.url).unwrap_or("");
        let served = body.file_name();
        let stored = self
            .store
            .put(kind, id, name.or(served.as_deref()), body)
            .await?;
        if let Err(e) = self.store.evict(QUOTA, |n| n == stored.name || keep(n)) {
            tracing::warn!(error = %crate::error_chain::one_line(&e), "cannot keep the media store under its quota");
        }
        Ok(stored)
    }
}

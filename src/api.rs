//! The local agent API: HTTP/1.1 on a Unix socket in the profile's home, through which
//! agents on the same machine read the inbound events and send messages (docs/api.md, and
//! docs/api.openapi.json for the exact shapes).
//!
//! A Unix socket rather than a TCP port: there is no port to collide with another profile's
//! gateway, nothing reachable from the network, and who may connect is decided by the file
//! system (the socket's directory is 0700) and checked again per connection with
//! `SO_PEERCRED`, so only the gateway's own user gets an answer.
//!
//! The gateway binds first ([`bind`]), during start-up, so that a socket that cannot be
//! made is a start-up error that names the path, and then serves ([`Bound::serve`]) until
//! its shutdown watch turns true. The routes reach the outbox only through [`Messages`], which
//! the gateway's `Outbox` implements and tests replace with a map.

pub mod client;
mod connections;
mod events;
mod frontend;
mod json_object;
mod listener;
mod media;
pub use media::MAX_UPLOAD;
mod problem;
mod routes;
mod server;
pub mod wire;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::watch;

use crate::gateway::outbox::{self, Message, Outbox, Request};
use crate::gateway::spool::Spool;
use crate::platform::Normaliser;
use crate::profile::Profile;
use crate::trusted_dir::TrustError;

pub use connections::Connections;
pub(crate) use frontend::LocalApi;
pub use listener::{bind, Bound};

/// The largest request body accepted: 1 MiB. The longest text any platform takes is 65,536
/// characters (16 pieces of 4,096, a WebSocket adapter's limit), and JSON may
/// spell one character in up to 12 bytes (`\ud83d\ude00`, as a client that escapes all but
/// ASCII writes an emoji), so the text alone may take 768 KiB; the other fields are far
/// below the 256 KiB left. `hermes-svc send` reads at most this much text from stdin.
pub const MAX_BODY: usize = 1024 * 1024;
/// Connections open at once. A new one past it is admitted by shedding an idle or slow one
/// (api/connections.rs), and waits only while every one is handling a request. Half the
/// 1,024 file descriptors a service gets by default, so the adapters keep the rest.
pub const MAX_CONNECTIONS: usize = 512;
/// How long a request's headers may take to arrive, and how long a connection may sit idle
/// between requests (hyper's header timer starts when it waits for the next request).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request's body may take to arrive once its headers have.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest `wait` a long-poll may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// Events per answer when `limit` is not given, and the most it may ask for.
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 1000;
/// An answer stops adding events past this many bytes of them (it always has at least one).
pub const PAGE_BYTES: usize = 4 * 1024 * 1024;

/// What the routes need of the outbox, and nothing more.
pub trait Messages: Send + Sync {
    /// Queue `request` durably, or return the message already queued under its idempotency
    /// key (`new: false`).
    fn submit(&self, request: Request) -> BoxFuture<'_, Result<Submitted, Refused>>;
    fn get(&self, id: &str) -> Option<Message>;
}

/// The gateway's own outbox: its refusals keep their codes and words.
impl Messages for Outbox {
    fn submit(&self, request: Request) -> BoxFuture<'_, Result<Submitted, Refused>> {
        Box::pin(async move {
            match Outbox::submit(self, request).await {
                Ok(outbox::Submitted { message, new }) => Ok(Submitted { message, new }),
                Err(e) => Err(Refused::from_error(e.code(), e.is_client_error(), &e)),
            }
        })
    }

    fn get(&self, id: &str) -> Option<Message> {
        Outbox::get(self, id)
    }
}

/// The outbox of a gateway that could not open it: every submit is refused with
/// `outbox_unavailable` (503) and the reason, and no message is known. Receiving, and the
/// rest of the API, go on.
pub struct NoOutbox {
    why: String,
}

impl NoOutbox {
    pub fn new(why: String) -> Self {
        Self { why }
    }
}

impl Messages for NoOutbox {
    fn submit(&self, _request: Request) -> BoxFuture<'_, Result<Submitted, Refused>> {
        Box::pin(async move {
            Err(Refused {
                code: "outbox_unavailable",
                message: format!(
                    "the outbox is unavailable, so nothing can be queued: {}",
                    self.why
                ),
                client_error: false,
            })
        })
    }

    fn get(&self, _id: &str) -> Option<Message> {
        None
    }
}

/// A submitted message, and whether this submit queued it or an earlier one with the same
/// idempotency key did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submitted {
    pub message: Message,
    pub new: bool,
}

/// Why a submit queued nothing, as the API reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// Stable and machine-readable, e.g. `unknown_adapter`.
    pub code: &'static str,
    /// For a person: what was wrong and how to fix it.
    pub message: String,
    /// The request was at fault (a 4xx), rather than the gateway (a 5xx).
    pub client_error: bool,
}

impl Refused {
    /// From the outbox's own error: its code, whether the caller is at fault, and its text
    /// with every cause.
    pub fn from_error(
        code: &'static str,
        client_error: bool,
        error: &dyn std::error::Error,
    ) -> Self {
        Self {
            code,
            message: crate::error_chain::one_line(error),
            client_error,
        }
    }
}

/// Everything the routes read: the spool, its wakeups, the state file and the outbox; and the
/// table of open connections, which the server keeps and the gateway's tick reads.
#[derive(Clone)]
pub struct ApiState {
    spool_dir: PathBuf,
    /// The profile's media store, opened per request (it may appear after the start).
    media_dir: PathBuf,
    appended: watch::Receiver<u64>,
    state_file: PathBuf,
    messages: Arc<dyn Messages>,
    connections: Arc<Connections>,
    /// Reads each event as a message, by its adapter's platform.
    normaliser: Normaliser,
}

impl ApiState {
    pub fn new(
        profile: &Profile,
        spool: &Spool,
        messages: Arc<dyn Messages>,
        normaliser: Normaliser,
    ) -> Self {
        Self {
            spool_dir: spool.dir().to_owned(),
            media_dir: profile.media_dir(),
            appended: spool.subscribe(),
            state_file: profile.state_file(),
            messages,
            connections: Connections::new(MAX_CONNECTIONS),
            normaliser,
        }
    }

    /// The open connections: what the state file says of the API comes from them.
    pub fn connections(&self) -> Arc<Connections> {
        self.connections.clone()
    }
}

/// Why the API could not be set up or served. Each names the path and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(
        "the API socket path {} is {len} bytes, longer than a Unix socket address allows ({max}); use a shorter HERMES_HOME",
        path.display()
    )]
    PathTooLong {
        path: PathBuf,
        len: usize,
        max: usize,
    },
    #[error("cannot {op} {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `state/` or `state/api/` is a link, not a directory, someone else's, or writable by
    /// others: whoever could change it could serve their own socket in its place.
    #[error(transparent)]
    Untrusted(#[from] TrustError),
    #[error(
        "{} exists and is not a socket; remove it and start the gateway again",
        path.display()
    )]
    NotASocket { path: PathBuf },
    #[error(
        "another process already answers on {}; stop it (is another gateway serving this profile's home?)",
        path.display()
    )]
    InUse { path: PathBuf },
}

impl ApiError {
    /// Whether a restart would meet the same problem: everything but an I/O error needs a
    /// person to fix the path first (so the gateway should stay down rather than flap).
    pub fn needs_a_fix(&self) -> bool {
        match self {
            ApiError::Io { .. } => false,
            ApiError::Untrusted(e) => e.needs_a_fix(),
            _ => true,
        }
    }
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ApiError + 'a {
    move |source| ApiError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Bind `socket` and serve until `shutdown` turns true: [`bind`], then [`Bound::serve`].
pub async fn serve(
    socket: &Path,
    state: ApiState,
    shutdown: watch::Receiver<bool>,
) -> Result<(), ApiError> {
    bind(socket)?.serve(state, shutdown).await
}

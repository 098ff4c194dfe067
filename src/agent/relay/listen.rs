//! The Relay's listener: the loopback port Hermes dials, and the check at the upgrade. Any
//! local user can reach a loopback port, so what a dial may cost is bounded here: a dial
//! without the profile's token is refused before the WebSocket exists, at most
//! [`MAX_UPGRADING`] dials upgrade at once, each within [`UPGRADE_TIMEOUT`], and what is
//! refused or dropped is logged a line per window, not a line each.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::WebSocketStream;

use super::auth;
use crate::agent::link::Link;
use crate::logging::throttle::Throttle;

pub(super) type Ws = WebSocketStream<TcpStream>;

/// A dial must finish its upgrade within this.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(5);
/// Dials upgrading at once, at most: Hermes dials one connection at a time.
const MAX_UPGRADING: usize = 32;
/// A failing accept (out of descriptors, say) and dials dropped for new ones are logged a line
/// per 10 s, as refusals are.
static ACCEPT_FAILURES: Throttle = Throttle::new(Duration::from_secs(10));
static SHED: Throttle = Throttle::new(Duration::from_secs(10));
/// Refused dials are logged a line per 10 s, however many come: a client that keeps dialling
/// with a bad token must not push the gateway's own lines past journald's rate limit.
static REFUSALS: Throttle = Throttle::new(Duration::from_secs(10));

/// Bind the connector's port, on loopback only: a port that is taken is a start-up error,
/// before `READY=1`. Called on the runtime.
pub fn bind(port: u16) -> std::io::Result<TcpListener> {
    let listener = std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))?;
    listener.set_nonblocking(true)?;
    TcpListener::from_std(listener)
}

/// Accept dials, refuse the ones without the profile's token at the upgrade, and hand the
/// rest to the server. At most [`MAX_UPGRADING`] dials are upgrading at once, each for at most
/// [`UPGRADE_TIMEOUT`]: another local user who opens connections and never upgrades them
/// holds that many descriptors, not every one the gateway has. Past the bound the oldest dial
/// still upgrading is dropped for the new one: Hermes upgrades in milliseconds, so a flood
/// would have to bring the bound's worth of new dials within those milliseconds to shed it,
/// where turning new dials away would let a crowd that keeps itself young shut Hermes out.
pub(super) async fn accept(
    listener: TcpListener,
    id: String,
    secret: Vec<u8>,
    link: Link,
    dialled: mpsc::Sender<Ws>,
) {
    let mut upgrading: tokio::task::JoinSet<()> = tokio::task::JoinSet::new();
    // The upgrading dials, oldest first.
    let mut started: std::collections::VecDeque<tokio::task::AbortHandle> = Default::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                if let Some(more) = ACCEPT_FAILURES.note(std::time::Instant::now()) {
                    tracing::warn!(error = %e, more, "the relay's accept failed (more: failures since the last such line)");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        while upgrading.try_join_next().is_some() {}
        started.retain(|task| !task.is_finished());
        if started.len() >= MAX_UPGRADING {
            if let Some(oldest) = started.pop_front() {
                oldest.abort();
                if let Some(more) = SHED.note(std::time::Instant::now()) {
                    tracing::warn!(%peer, more, "dropped the oldest of {MAX_UPGRADING} dials to the relay still upgrading, for a new one (more: dials dropped since the last such line)");
                }
            }
        }
        let (id, secret, link, dialled) =
            (id.clone(), secret.clone(), link.clone(), dialled.clone());
        let task = upgrading.spawn(async move {
            #[allow(clippy::result_large_err)]
            let check = |request: &Request, response: Response| {
                upgrade_check(request, response, &id, &secret, &link)
            };
            // A message past the frames' own bound is refused from its header, before it is
            // read (tungstenite's default would take 64 MiB).
            let config = WebSocketConfig::default()
                .max_message_size(Some(super::frames::MAX_MESSAGE))
                .max_frame_size(Some(super::frames::MAX_MESSAGE));
            let upgrade =
                tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(config));
            match tokio::time::timeout(UPGRADE_TIMEOUT, upgrade).await {
                Ok(Ok(ws)) => {
                    let _ = dialled.send(ws).await;
                }
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "a dial to the relay did not upgrade")
                }
                Err(_) => tracing::debug!(%peer, "a dial to the relay did not upgrade in time"),
            }
        });
        started.push_back(task);
    }
}

// The error is the HTTP answer tungstenite writes for a refused upgrade: its type is the
// library's, and a refusal is rare.
#[allow(clippy::result_large_err)]
fn upgrade_check(
    request: &Request,
    response: Response,
    id: &str,
    secret: &[u8],
    link: &Link,
) -> Result<Response, ErrorResponse> {
    let refuse = |status: StatusCode, body: &str| {
        let mut r = ErrorResponse::new(Some(body.to_owned()));
        *r.status_mut() = status;
        r
    };
    if request.uri().path().trim_end_matches('/') != "/relay" {
        return Err(refuse(StatusCode::NOT_FOUND, "the relay is at /relay"));
    }
    let header = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match auth::check(header, id, secret, now) {
        Ok(()) => Ok(response),
        Err(why) => {
            if let Some(more) = REFUSALS.note(std::time::Instant::now()) {
                tracing::warn!(reason = %why, more, "refused a dial to the relay (more: the dials refused since the last such line)");
            }
            link.error(format!("refused a dial: {why}"));
            Err(refuse(StatusCode::UNAUTHORIZED, "unauthorized"))
        }
    }
}

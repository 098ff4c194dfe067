//! A client for the local agent API, for `send` and `events --follow`: one HTTP/1.1 request
//! per connection over the profile's socket, so there is no pool to keep or go stale across a
//! gateway restart.
//!
//! Before a byte is sent, the client makes sure it is talking to this profile's gateway: the
//! socket's directories (`state/` and `state/api/`) must be the user's own, not links and
//! writable by nobody else, and the process at the other end (`SO_PEERCRED`) must run as the
//! user or root. Otherwise anyone who could write the profile home could serve a socket of
//! their own there, and `send` would hand them the message and print "queued".

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::{to_bytes, Body, Bytes};
use axum::http::{header, Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

use super::listener::socket_dir;
use super::wire::{ErrorBody, EventsPage, SendBody, Uploaded, REPLAYED_HEADER};
use super::Submitted;
use crate::gateway::outbox::Message;
use crate::gateway::state_file::StateFile;
use crate::trusted_dir::TrustError;

/// The largest answer read: a page of events is at most about [`super::PAGE_BYTES`] plus one
/// event, and an event is far below this.
const MAX_ANSWER: usize = 64 * 1024 * 1024;
/// How long an answer may take beyond the wait it asked for.
const ANSWER_GRACE: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens on the socket: no file, or a file that refuses (a gateway that
    /// stopped without removing it).
    #[error("no API socket answers at {}", socket.display())]
    NotRunning {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    /// `state/` or `state/api/` is a link, someone else's, or writable by others: it names
    /// the directory and the fix.
    #[error(transparent)]
    Untrusted(TrustError),
    /// The process serving the socket runs as another user: not this profile's gateway.
    #[error(
        "{} is served by uid {uid}, not by you (uid {me}) or root, so it is not this profile's gateway and nothing was sent to it: someone who can write the profile home may have put it there; check who owns {} and the directories above it",
        socket.display(),
        socket.parent().and_then(Path::parent).unwrap_or(socket).display()
    )]
    Impostor { socket: PathBuf, uid: u32, me: u32 },
    #[error("cannot connect to {}", socket.display())]
    Connect {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the API at {} closed the connection or broke the protocol", socket.display())]
    Http {
        socket: PathBuf,
        #[source]
        source: hyper::Error,
    },
    #[error("the API at {} did not answer within {:?}", socket.display(), after)]
    Timeout { socket: PathBuf, after: Duration },
    /// The gateway answered with an error; `status` below 500 means the request was at fault
    /// and nothing was done.
    #[error("the gateway refused the request ({code}): {message}")]
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    #[error("the API answered {status} with a body that is not what it documents: {detail}")]
    Unexpected { status: u16, detail: String },
}

impl ClientError {
    /// The request was at fault and the gateway did nothing.
    pub fn is_client_error(&self) -> bool {
        matches!(self, ClientError::Refused { status, .. } if (400..500).contains(status))
    }
}

/// A connection-per-request client for one profile's API socket.
#[derive(Clone, Debug)]
pub struct Client {
    socket: PathBuf,
}

impl Client {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `POST /v1/messages`.
    pub async fn submit(&self, body: &SendBody) -> Result<Submitted, ClientError> {
        let json = serde_json::to_vec(body).expect("a request body serialises");
        let (status, headers, bytes) = self
            .request(
                Method::POST,
                "/v1/messages",
                Some(json.into()),
                Duration::ZERO,
            )
            .await?;
        if status != StatusCode::ACCEPTED && status != StatusCode::OK {
            return Err(refusal(status, &bytes));
        }
        let message: Message = decode(status, &bytes)?;
        let replayed = headers
            .get(REPLAYED_HEADER)
            .is_some_and(|v| v.as_bytes() == b"true");
        Ok(Submitted {
            message,
            new: status == StatusCode::ACCEPTED && !replayed,
        })
    }

    /// `POST /v1/media`: `file`, `len` bytes long, streamed into the profile's media store as
    /// `name`. Given the time a slow disk takes for it on top of the usual grace.
    pub async fn upload(
        &self,
        file: tokio::fs::File,
        len: u64,
        name: &str,
    ) -> Result<Uploaded, ClientError> {
        let path = format!("/v1/media?name={}", percent_encode(name));
        let body = Body::from_stream(crate::media::file_chunks(file));
        let pace = Duration::from_secs(len / (10 * 1024 * 1024));
        let (status, _, bytes) = self.request(Method::POST, &path, Some(body), pace).await?;
        if status != StatusCode::CREATED {
            return Err(refusal(status, &bytes));
        }
        decode(status, &bytes)
    }

    /// `GET /v1/messages/{id}`; `None` when the gateway knows no such message.
    pub async fn message(&self, id: &str) -> Result<Option<Message>, ClientError> {
        let path = format!("/v1/messages/{}", percent_encode(id));
        let (status, _, bytes) = self
            .request(Method::GET, &path, None, Duration::ZERO)
            .await?;
        match status {
            StatusCode::OK => decode(status, &bytes).map(Some),
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(refusal(status, &bytes)),
        }
    }

    /// `GET /v1/events`: the events after `after` (`None` for the oldest kept), waiting up
    /// to `wait` for one to arrive.
    pub async fn events(
        &self,
        after: Option<&str>,
        wait: Duration,
        limit: usize,
    ) -> Result<EventsPage, ClientError> {
        let mut path = format!("/v1/events?limit={limit}&wait={}ms", wait.as_millis());
        if let Some(after) = after {
            path.push_str("&after=");
            path.push_str(&percent_encode(after));
        }
        let (status, _, bytes) = self.request(Method::GET, &path, None, wait).await?;
        if status != StatusCode::OK {
            return Err(refusal(status, &bytes));
        }
        decode(status, &bytes)
    }

    /// `GET /v1/health`: the gateway's state file as it last wrote it.
    pub async fn health(&self) -> Result<StateFile, ClientError> {
        let (status, _, bytes) = self
            .request(Method::GET, "/v1/health", None, Duration::ZERO)
            .await?;
        if status != StatusCode::OK {
            return Err(refusal(status, &bytes));
        }
        decode(status, &bytes)
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Body>,
        wait: Duration,
    ) -> Result<(StatusCode, axum::http::HeaderMap, Bytes), ClientError> {
        let limit = wait + ANSWER_GRACE;
        tokio::time::timeout(limit, self.request_inner(method, path, body))
            .await
            .map_err(|_| ClientError::Timeout {
                socket: self.socket.clone(),
                after: limit,
            })?
    }

    async fn request_inner(
        &self,
        method: Method,
        path: &str,
        body: Option<Body>,
    ) -> Result<(StatusCode, axum::http::HeaderMap, Bytes), ClientError> {
        match socket_dir(&self.socket) {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Err(ClientError::NotRunning {
                    socket: self.socket.clone(),
                    source: io::ErrorKind::NotFound.into(),
                })
            }
            Err(e) => return Err(ClientError::Untrusted(e)),
        }
        let stream = UnixStream::connect(&self.socket).await.map_err(|source| {
            let socket = self.socket.clone();
            match source.kind() {
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                    ClientError::NotRunning { socket, source }
                }
                _ => ClientError::Connect { socket, source },
            }
        })?;
        self.check_peer(&stream)?;
        let http = |source| ClientError::Http {
            socket: self.socket.clone(),
            source,
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(http)?;
        let driver = tokio::spawn(conn);
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "localhost");
        let body = match body {
            Some(body) => {
                let kind = if path.starts_with("/v1/media") {
                    "application/octet-stream"
                } else {
                    "application/json"
                };
                request = request.header(header::CONTENT_TYPE, kind);
                body
            }
            None => Body::empty(),
        };
        let request = request.body(body).map_err(|e| ClientError::Unexpected {
            status: 0,
            detail: format!("cannot build the request for {path}: {e}"),
        })?;
        let response = sender.send_request(request).await.map_err(http)?;
        let (parts, incoming) = response.into_parts();
        let bytes = to_bytes(Body::new(incoming), MAX_ANSWER)
            .await
            .map_err(|e| ClientError::Unexpected {
                status: parts.status.as_u16(),
                detail: format!("cannot read the body: {e}"),
            })?;
        driver.abort();
        Ok((parts.status, parts.headers, bytes))
    }
}

impl Client {
    /// The server must run as this user, or as root: a connection is made even through a
    /// directory that was swapped after the check, but the peer's uid comes from the kernel.
    fn check_peer(&self, stream: &UnixStream) -> Result<(), ClientError> {
        let cred = stream.peer_cred().map_err(|source| ClientError::Connect {
            socket: self.socket.clone(),
            source,
        })?;
        let me = nix::unistd::geteuid().as_raw();
        if cred.uid() == me || cred.uid() == 0 {
            return Ok(());
        }
        Err(ClientError::Impostor {
            socket: self.socket.clone(),
            uid: cred.uid(),
            me,
        })
    }
}

fn decode<T: serde::de::DeserializeOwned>(
    status: StatusCode,
    bytes: &[u8],
) -> Result<T, ClientError> {
    serde_json::from_slice(bytes).map_err(|e| ClientError::Unexpected {
        status: status.as_u16(),
        detail: e.to_string(),
    })
}

/// An error answer, read as the documented error shape when it is one.
fn refusal(status: StatusCode, bytes: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(ErrorBody { error }) => ClientError::Refused {
            status: status.as_u16(),
            code: error.code,
            message: error.message,
        },
        Err(_) => ClientError::Unexpected {
            status: status.as_u16(),
            detail: String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned(),
        },
    }
}

/// Everything but unreserved characters escaped, for a path segment or a query value.
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

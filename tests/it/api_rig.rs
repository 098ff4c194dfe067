//! The local agent API served for real on a Unix socket in a scratch home, with the real
//! outbox (which can also fail as a full disk would), and a raw HTTP/1.1 client that sends
//! exactly the bytes a test gives it.
//!
//! This is also how the gateway starts the API: `api::bind` during start-up (a bad socket
//! directory fails the start), then `Bound::serve` on its own task with the gateway's
//! shutdown watch.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use hermes_svc::api::{self, ApiError, ApiState, Messages, Refused, Submitted};
use hermes_svc::gateway::outbox::{Message, Outbox, Request, Route};
use hermes_svc::gateway::spool::{Event, Spool};
use hermes_svc::platform::{discord, qqbot, telegram, Normaliser};
use hermes_svc::profile::{Profile, ProfileName};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::harness::{scratch_dir, TempDir};

pub const PROFILE: &str = "agent";
/// The rig's adapters' limit, standing in for a platform's.
pub const MAX_TEXT: usize = 2000;
/// The `tg` adapter's limit: Telegram's, the longest any platform takes.
pub const TG_MAX_TEXT: usize = 65_536;

/// The gateway's real outbox, which fails as one on a full disk would for the text
/// `fail-io` (the one answer a test cannot get from a healthy disk), and as one the gateway
/// could not open would for `no-outbox` (tests/it/hostile_files.rs has the real one).
pub struct IoFault(pub Arc<Outbox>);

impl Messages for IoFault {
    fn submit(&self, request: Request) -> BoxFuture<'_, Result<Submitted, Refused>> {
        if request.text == "fail-io" {
            return Box::pin(async {
                Err(Refused {
                    code: "outbox_write_failed",
                    message: "cannot append to outbox/journal.jsonl: No space left on device"
                        .into(),
                    client_error: false,
                })
            });
        }
        if request.text == "no-outbox" {
            return Box::pin(async {
                Err(Refused {
                    code: "outbox_unavailable",
                    message: "the outbox is unavailable, so nothing can be queued: ...".into(),
                    client_error: false,
                })
            });
        }
        Messages::submit(self.0.as_ref(), request)
    }

    fn get(&self, id: &str) -> Option<Message> {
        Messages::get(self.0.as_ref(), id)
    }
}

/// A scratch home with the profile's spool, and the API serving it.
pub struct ApiRig {
    pub home: TempDir,
    pub profile: Profile,
    pub rt: tokio::runtime::Runtime,
    pub spool: Arc<Spool>,
    /// The real outbox, with adapters `qq` (QQ Bot) and `dc` (Discord) that take
    /// [`MAX_TEXT`] characters, `tg` (Telegram) that takes [`TG_MAX_TEXT`], and no worker:
    /// what is queued stays queued.
    pub outbox: Arc<Outbox>,
    /// The server's connection table, as the gateway's tick reads it.
    pub connections: Arc<api::Connections>,
    stop: watch::Sender<bool>,
    server: Option<JoinHandle<Result<(), ApiError>>>,
}

impl ApiRig {
    /// The spool in the profile's inbox, as the gateway has it.
    pub fn start() -> Self {
        Self::start_with(|p| p.home().join("inbox"))
    }

    /// The spool in the directory `spool_dir` names.
    pub fn start_with(spool_dir: impl FnOnce(&Profile) -> PathBuf) -> Self {
        Self::build(spool_dir)
    }

    /// What the state file would say of the API now, as JSON.
    pub fn api_health(&self) -> Value {
        serde_json::to_value(self.connections.health()).unwrap()
    }

    /// Messages queued so far.
    pub fn queued(&self) -> u64 {
        self.outbox.stats().depth
    }

    fn build(spool_dir: impl FnOnce(&Profile) -> PathBuf) -> Self {
        let home = scratch_dir("api");
        let profile =
            Profile::new(ProfileName::parse(PROFILE).unwrap(), home.path().to_owned()).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let spool = Arc::new(Spool::open(&spool_dir(&profile)).unwrap());
        let outbox = {
            let routes = HashMap::from([
                (
                    "qq".to_owned(),
                    Route::new::<qqbot::Sender>("qqbot", MAX_TEXT, MAX_TEXT),
                ),
                (
                    "dc".to_owned(),
                    Route::new::<discord::Sender>("discord", MAX_TEXT, MAX_TEXT),
                ),
                (
                    "tg".to_owned(),
                    Route::new::<telegram::Sender>("telegram", TG_MAX_TEXT, 4096),
                ),
            ]);
            Arc::new(Outbox::open(&home.path().join("outbox"), routes).unwrap())
        };
        let messages: Arc<dyn Messages> = Arc::new(IoFault(outbox.clone()));
        let normaliser = Normaliser::of([
            ("qq".to_owned(), "qqbot"),
            ("dc".to_owned(), "discord"),
            ("tg".to_owned(), "telegram"),
        ]);
        let state = ApiState::new(&profile, &spool, messages, normaliser);
        let connections = state.connections();
        // What the gateway does: bind first, where a failure stops the start, then serve.
        let bound = api::bind(&profile.api_socket()).expect("the API binds");
        let (stop, shutdown) = watch::channel(false);
        let server = rt.spawn(bound.serve(state, shutdown));
        Self {
            home,
            profile,
            rt,
            spool,
            outbox,
            connections,
            stop,
            server: Some(server),
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.profile.api_socket()
    }

    pub fn append(&self, id: &str) {
        self.append_event(Event::new(
            id,
            "qq",
            "MESSAGE_CREATE",
            Some(1),
            serde_json::json!({"content": id}),
        ));
    }

    pub fn append_event(&self, event: Event) {
        self.rt.block_on(self.spool.append(&event)).unwrap();
    }

    /// Ask the server to stop, as the gateway's shutdown does, and wait for it.
    pub fn stop(&mut self) {
        self.stop.send_replace(true);
        if let Some(server) = self.server.take() {
            let result = self
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(10), server).await })
                .expect("the API stops within 10 s");
            result.unwrap().unwrap();
        }
    }

    pub fn get(&self, path: &str) -> Answer {
        http(&self.socket(), "GET", path, None)
    }

    pub fn post(&self, path: &str, body: &[u8]) -> Answer {
        http(&self.socket(), "POST", path, Some(body))
    }
}

impl Drop for ApiRig {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// One HTTP answer: status, headers (lower-case names) and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// `error.code` of an error answer.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// One request on its own connection (`Connection: close`), read to the end.
pub fn http(socket: &Path, method: &str, path: &str, body: Option<&[u8]>) -> Answer {
    let mut stream =
        UnixStream::connect(socket).unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
    stream
        .set_read_timeout(Some(Duration::from_secs(90)))
        .unwrap();
    let body = body.unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    // A body over the limit may be refused before it is all read: the answer still comes.
    let _ = stream.write_all(body);
    read_answer(&mut stream)
}

/// A request whose body is declared `length` bytes long of which only `sent` are sent, on
/// its own connection, and the answer the server gives before it closes the connection.
pub fn http_partial(socket: &Path, method: &str, path: &str, length: usize, sent: &[u8]) -> Answer {
    let mut stream =
        UnixStream::connect(socket).unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
    stream
        .set_read_timeout(Some(Duration::from_secs(90)))
        .unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(sent).unwrap();
    read_answer(&mut stream)
}

/// Everything the server wrote before it closed the connection. A server that answers
/// before reading the whole request (a body too large, or too slow) and then closes leaves
/// bytes unread on its side, and the kernel then ends the client's read with ECONNRESET
/// instead of EOF, after the answer's bytes: those bytes are the answer, as any HTTP client
/// takes them.
fn read_answer(stream: &mut UnixStream) -> Answer {
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !raw.is_empty() => {}
        Err(e) => panic!(
            "reading the answer: {e} after {:?}",
            String::from_utf8_lossy(&raw)
        ),
    }
    parse_answer(&raw)
}

fn parse_answer(raw: &[u8]) -> Answer {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t == "chunked")
    {
        body = dechunk(&body);
    }
    Answer {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let nl = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&data[..nl]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[nl + 2..nl + 2 + size]);
        data = &data[nl + 2 + size + 2..];
    }
}

/// The ids in a `GET /v1/events` answer.
pub fn ids(page: &Value) -> Vec<String> {
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

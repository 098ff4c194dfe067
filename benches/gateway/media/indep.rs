//! The same figures against benches/independent/matrix_server.py, a homeserver written from
//! the Matrix spec and not from our mock or adapter: a 50 MB file out (`POST /v1/media`, then
//! `POST /v1/messages` to the room: the gateway uploads it to the content repository and
//! sends an `m.file` naming it) and in (an `m.image` whose content the gateway downloads into
//! its store), each with the gateway's memory and the bytes' SHA-256 checked where they
//! landed (the server's record of the upload; the stored file); and the latency a 1 MB photo
//! adds over a text, out (submit → the server has the event) and in (the server's event →
//! the agent's request).
//!
//! Timing across the two processes: the server stamps each event it accepts with the Unix
//! time in µs (`received_unix_us`), read here against the system clock taken at submit; both
//! sides read the same clock of the same machine. Files put into the repository for an
//! inbound message go in before the clock starts: a user's upload is not the gateway's work.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hermes_svc::api::wire::SendBody;
use serde_json::{json, Value};

use crate::independent::Independent;
use crate::proc::cpu_ns;
use crate::scratch;

use super::inbound::{named_path, BigIn, InLatency};
use super::out::{Dest, Landed};
use super::rig::{document, ms, png, sha256, Agent, Call, Rig, INDEPENDENT_ROOM};

const LEN_BIG: usize = 50_000_000;
const LEN_PHOTO: usize = 1_000_000;

/// The independent homeserver as a child process, and its bench routes.
pub(super) struct Server {
    server: Independent,
    http: reqwest::Client,
    _dir: ScratchDir,
}

/// The server's log directory, removed when the server is dropped.
struct ScratchDir(std::path::PathBuf);
impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Server {
    pub(super) fn start(python: &str, tag: &str) -> Server {
        let dir = scratch(&format!("media-indep-{tag}"));
        let server = Independent::start_matrix(python, &dir.join("server.log"));
        Server {
            server,
            http: reqwest::Client::new(),
            _dir: ScratchDir(dir),
        }
    }

    pub(super) fn base(&self) -> String {
        self.server.base()
    }

    async fn get(&self, path: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.base()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("GET {path} is not JSON: {e}"))
    }

    /// Every event the bot sent (`GET /_posts`).
    async fn posts(&self) -> Vec<Value> {
        let mut v = self.get("/_posts").await;
        v["posts"]
            .as_array_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The first event the bot sent whose `body` is `body`, waited for up to `limit`.
    async fn wait_event(&self, body: &str, limit: Duration) -> Option<Value> {
        let end = Instant::now() + limit;
        loop {
            if let Some(p) = self.posts().await.into_iter().find(|p| p["body"] == body) {
                return Some(p);
            }
            if Instant::now() > end {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The server's record of the file event `event_id`: its msgtype and the SHA-256 and size
    /// of the bytes the repository holds for its mxc URI.
    async fn file_event(&self, event_id: &str) -> Option<Value> {
        let media = self.get("/_independent/media").await;
        media["file_events"]
            .as_array()?
            .iter()
            .find(|e| e["event_id"] == event_id)
            .cloned()
    }

    /// `bytes` put into the repository as `name` (`POST /_independent/media`; the bench's own
    /// names need no escaping in a query): its media id.
    async fn put(&self, name: &str, content_type: &str, bytes: Vec<u8>) -> String {
        let want = sha256(&bytes);
        let r: Value = self
            .http
            .post(format!(
                "{}/_independent/media?filename={name}",
                self.base()
            ))
            .header("Content-Type", content_type)
            .body(bytes)
            .send()
            .await
            .expect("POST /_independent/media")
            .json()
            .await
            .expect("its answer is JSON");
        assert_eq!(
            r["sha256"],
            want.as_str(),
            "the repository holds {name}: {r}"
        );
        r["media_id"].as_str().unwrap().to_owned()
    }

    /// An `m.image` from the server's peer naming `media_id`, with `body` (`POST
    /// /_independent/media/emit`).
    async fn emit_image(&self, media_id: &str, body: &str) {
        let spec = json!({"media_id": media_id, "msgtype": "m.image", "body": body});
        let r = self
            .http
            .post(format!("{}/_independent/media/emit", self.base()))
            .json(&spec)
            .send()
            .await
            .expect("POST /_independent/media/emit");
        assert!(r.status().is_success(), "emit: {}", r.status());
    }

    async fn emit_text(&self, text: &str) {
        self.server.control("emit", json!({"text": text})).await;
    }

    /// How many answers ("ok") the bot has sent.
    async fn answers(&self) -> usize {
        self.posts()
            .await
            .iter()
            .filter(|p| p["body"] == "ok")
            .count()
    }
}

/// The bench's room on the independent homeserver.
impl Dest for Server {
    type Post = Value;

    fn message(&self, key: &str, text: &str, attachments: Vec<String>) -> SendBody {
        SendBody {
            adapter: "mx".into(),
            target: format!("room:{INDEPENDENT_ROOM}"),
            text: text.into(),
            reply_to: None,
            idempotency_key: key.into(),
            policy: None,
            attachments,
        }
    }

    async fn wait_post(&self, text: &str, limit: Duration) -> Option<Value> {
        self.wait_event(text, limit).await
    }

    /// The server stamps each event it accepts with the Unix time in µs.
    fn at_ms(&self, post: &Value, _started: Instant, wall: SystemTime) -> f64 {
        let at_us = post["received_unix_us"].as_f64().expect("received_unix_us");
        (at_us - unix_us(wall)) / 1000.0
    }

    /// The file event `post` is, as the server recorded it; a post that is not one panics.
    async fn landed(&self, post: &Value) -> Option<Landed> {
        let id = post["event_id"].as_str().unwrap_or_default();
        let e = self
            .file_event(id)
            .await
            .unwrap_or_else(|| panic!("{id} is not a file event: {post}"));
        assert_eq!(
            e["in_repo"], true,
            "{id} names a file the repository has: {e}"
        );
        Some(Landed {
            method: e["msgtype"].as_str().unwrap_or_default().to_owned(),
            bytes: e["size"].as_u64().unwrap_or(0),
            sha256: e["sha256"].as_str().unwrap_or_default().to_owned(),
        })
    }
}

fn unix_us(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as f64
}

/// A 50,000,000-byte file as an `m.image` (bytes no signature matches, as in the mock's row,
/// so the store keeps it as a file and the bridge names its path).
pub(super) async fn big_in(rig: &Rig, srv: &Server, agent: &Agent) -> BigIn {
    let bytes = document(LEN_BIG);
    let want = sha256(&bytes);
    let media = srv.put("big-in.bin", "image/png", bytes).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pid = rig.pid();
    let (rss_before_kib, hwm_before_kib) = rig.memory();
    let cpu0 = cpu_ns(pid);
    let emitted = Instant::now();
    srv.emit_image(&media, "big-in.bin").await;
    let call = agent
        .wait_call("big-in", Duration::from_secs(300))
        .await
        .expect("the agent never had the 50 MB file's turn");
    let to_agent_ms = ms(emitted, call.at);
    let gateway_cpu_ms = (cpu_ns(pid) - cpu0) as f64 / 1e6;
    let path = named_path(&call.text)
        .unwrap_or_else(|| panic!("no stored file named in {:?}", call.text))
        .to_owned();
    srv.wait_event("ok", Duration::from_secs(30))
        .await
        .expect("the turn's answer never reached the server");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_after_kib, hwm_kib) = rig.memory();
    let stored = std::fs::read(&path).unwrap_or_default();
    BigIn {
        bytes: stored.len() as u64,
        rss_before_kib,
        hwm_before_kib,
        hwm_kib,
        rss_after_kib,
        to_agent_ms,
        gateway_cpu_ms,
        same_bytes: sha256(&stored) == want,
    }
}

/// What one inbound turn says: a text, or a photo already in the repository.
enum Said<'a> {
    Text,
    Photo(&'a str),
}

/// One turn: the message tagged `tag` emitted; when, and the agent's request for it, once the
/// turn's answer has reached the server.
async fn turn(srv: &Server, agent: &Agent, tag: &str, said: Said<'_>) -> (Instant, Call) {
    let limit = Duration::from_secs(30);
    let before = srv.answers().await;
    let emitted = Instant::now();
    match said {
        Said::Text => srv.emit_text(tag).await,
        Said::Photo(media) => srv.emit_image(media, tag).await,
    }
    let call = agent
        .wait_call(tag, limit)
        .await
        .unwrap_or_else(|| panic!("the agent never had {tag}"));
    let end = Instant::now() + limit;
    while srv.answers().await <= before {
        assert!(Instant::now() < end, "{tag}'s answer was never posted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (emitted, call)
}

/// `runs` texts and `runs` 1 MB photos from the server's peer, alternating, each after the
/// previous turn's answer was posted.
pub(super) async fn in_latency(srv: &Server, agent: &Agent, runs: usize) -> InLatency {
    let photo = png(LEN_PHOTO);
    let mut result = InLatency {
        photo_bytes: LEN_PHOTO,
        text: vec![],
        photo: vec![],
        photo_request_bytes: 0,
    };
    for i in 0..=runs {
        let (mut t, mut p) = (0.0, 0.0);
        for photo_turn in [i % 2 == 1, i % 2 == 0] {
            if photo_turn {
                let tag = format!("pin-{i:03}");
                let media = srv
                    .put(&format!("{tag}.png"), "image/png", photo.clone())
                    .await;
                let (emitted, call) = turn(srv, agent, &tag, Said::Photo(&media)).await;
                p = ms(emitted, call.at);
                result.photo_request_bytes = call.body_bytes;
            } else {
                let tag = format!("tin-{i:03}");
                let (emitted, call) = turn(srv, agent, &tag, Said::Text).await;
                t = ms(emitted, call.at);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if i > 0 {
            result.text.push(t);
            result.photo.push(p);
        }
    }
    result
}

//! What the media measurements share: a real gateway process with a Telegram adapter (and,
//! for files in, a Matrix adapter and an agent) against the built-in mock, or a Matrix adapter
//! (and an agent) against the independent homeserver; its agent API, a trivial
//! OpenAI-compatible agent served in this process, and the files sent.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::post;
use axum::{Json, Router};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use hermes_svc::api::client::Client;
use hermes_svc::mock_platform::telegram::TelegramConfig;
use hermes_svc::mock_platform::{MatrixConfig, MockPlatform, Post};

use crate::binary::{spawn_gateway, Gateway};
use crate::proc::proc_status;
use crate::scratch;

/// The mock's Telegram chat, as a target of the API.
pub(super) const TG_CHAT: &str = "chat:1001";
pub(super) const PROFILE: &str = "md";
/// benches/independent/matrix_server.py's defaults: its token, its bot and its one room.
pub(super) const INDEPENDENT_TOKEN: &str = "mx-indep-token";
pub(super) const INDEPENDENT_USER: &str = "@bot:indep.test";
pub(super) const INDEPENDENT_ROOM: &str = "!r1:indep.test";

pub(super) fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `len` bytes that no signature matches (a document, not a photo), not all alike.
pub(super) fn document(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// A PNG signature and `len` bytes after it: a photo by its bytes.
pub(super) fn png(len: usize) -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend((0..len - png.len()).map(|i| (i * 13 % 253) as u8));
    png
}

/// One request the agent answered: when it arrived (its body read whole), and the text of its
/// user message (a photo's data URL left out).
#[derive(Clone)]
pub(super) struct Call {
    pub(super) at: Instant,
    pub(super) text: String,
    pub(super) body_bytes: usize,
}

#[derive(Clone, Default)]
pub(super) struct Heard(Arc<Mutex<Vec<Call>>>);

/// An OpenAI-compatible agent that answers every turn "ok" at once.
pub(super) struct Agent {
    pub(super) url: String,
    heard: Heard,
    accept: JoinHandle<()>,
}

impl Agent {
    pub(super) async fn start() -> Agent {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let heard = Heard::default();
        let router = Router::new()
            .route("/v1/chat/completions", post(completions))
            .layer(DefaultBodyLimit::disable())
            .with_state(heard.clone());
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let service = TowerToHyperService::new(router.clone());
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Agent { url, heard, accept }
    }

    /// The first call whose text contains `needle`, waited for up to `limit`.
    pub(super) async fn wait_call(&self, needle: &str, limit: Duration) -> Option<Call> {
        let end = Instant::now() + limit;
        loop {
            let found = self
                .heard
                .0
                .lock()
                .unwrap()
                .iter()
                .find(|c| c.text.contains(needle))
                .cloned();
            if found.is_some() || Instant::now() > end {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn completions(State(heard): State<Heard>, body: Bytes) -> Json<Value> {
    let at = Instant::now();
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let content = &v["messages"][0]["content"];
    let text = match content {
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.as_str().unwrap_or_default().to_owned(),
    };
    heard.0.lock().unwrap().push(Call {
        at,
        text,
        body_bytes: body.len(),
    });
    Json(json!({"choices": [{"message": {"content": "ok"}}]}))
}

/// A gateway process against the mock and its agent API.
pub(super) struct Rig {
    home: PathBuf,
    pub(super) profile_home: PathBuf,
    pub(super) client: Client,
    gw: Gateway,
}

impl Rig {
    /// A Telegram adapter `tg` against `mock`; with `agent`, also a Matrix adapter `mx`, every
    /// sender admitted, and `[agent] kind = "openai"` at its URL. Waited for until every
    /// adapter is ready and the API answers.
    pub(super) async fn start(tag: &str, mock: &MockPlatform, agent: Option<&Agent>) -> Rig {
        let base = mock.http_base();
        let mut toml = format!(
            "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"TG_TOKEN\"\n\
             api-base = \"{base}\"\npoll-timeout = \"1s\"\n\n"
        );
        let mut env = format!("TG_TOKEN={}\n", TelegramConfig::default().token);
        let mut adapters = 1;
        if let Some(agent) = agent {
            let mx = MatrixConfig::default();
            toml.push_str(&matrix_adapter(&base, &mx.user_id, Some(agent)));
            env.push_str(&format!("MX_TOKEN={}\n", mx.access_token));
            adapters = 2;
        }
        Rig::launch(tag, &toml, &env, adapters).await
    }

    /// One Matrix adapter `mx` against the independent homeserver at `base`; with `agent`,
    /// every sender admitted and `[agent] kind = "openai"` at its URL. Waited for as
    /// [`Rig::start`] is.
    pub(super) async fn start_independent(tag: &str, base: &str, agent: Option<&Agent>) -> Rig {
        let toml = matrix_adapter(base, INDEPENDENT_USER, agent);
        let env = format!("MX_TOKEN={INDEPENDENT_TOKEN}\n");
        Rig::launch(tag, &toml, &env, 1).await
    }

    /// A gateway for `toml` and `env` in a fresh scratch home, once its `adapters` are ready.
    async fn launch(tag: &str, toml: &str, env: &str, adapters: usize) -> Rig {
        let home = scratch(&format!("media-{tag}"));
        let profile_home = home.join("profiles").join(PROFILE);
        std::fs::create_dir_all(&profile_home).unwrap();
        std::fs::write(profile_home.join("gateway.toml"), toml).unwrap();
        std::fs::write(profile_home.join(".env"), env).unwrap();
        let gw = spawn_gateway(&home, PROFILE, None);
        let client = Client::new(profile_home.join("state/api/agent.sock"));
        let rig = Rig {
            home,
            profile_home,
            client,
            gw,
        };
        let want = format!("{adapters}/{adapters} adapters ready");
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let state = std::fs::read_to_string(rig.profile_home.join("state/gateway.json"));
            let ready = state.is_ok_and(|t| t.contains(&want));
            if ready && rig.client.message("m-none").await.is_ok() {
                return rig;
            }
            assert!(Instant::now() < end, "the gateway never said {want:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(super) fn pid(&self) -> u32 {
        self.gw.0.id()
    }

    /// The scratch directory, for the bench's own files.
    pub(super) fn scratch(&self) -> &Path {
        &self.home
    }

    /// (VmRSS, VmHWM) in KiB.
    pub(super) fn memory(&self) -> (u64, u64) {
        let pid = self.pid();
        (proc_status(pid, "VmRSS:"), proc_status(pid, "VmHWM:"))
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = self.gw.0.kill();
        let _ = self.gw.0.wait();
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// A Matrix adapter `mx` at `base` as `user` (its token from `MX_TOKEN`); with `agent`, every
/// sender admitted and the agent behind the OpenAI bridge.
fn matrix_adapter(base: &str, user: &str, agent: Option<&Agent>) -> String {
    let mut toml = format!(
        "[[adapter]]\nname = \"mx\"\nkind = \"matrix\"\nhomeserver = \"{base}\"\n\
         user-id = \"{user}\"\ntoken-env = \"MX_TOKEN\"\npoll-timeout = \"1s\"\n\n"
    );
    if let Some(agent) = agent {
        toml.push_str(&format!(
            "[access]\nallow-all = true\nrequire-mention = false\nbudget = \"off\"\n\n\
             [agent]\nkind = \"openai\"\nurl = \"{}\"\n",
            agent.url
        ));
    }
    toml
}

/// The first post for which `pick` holds, waited for up to `limit`.
pub(super) async fn wait_post(
    mock: &MockPlatform,
    limit: Duration,
    pick: impl Fn(&Post) -> bool,
) -> Option<Post> {
    let end = Instant::now() + limit;
    loop {
        if let Some(p) = mock.posts().into_iter().find(&pick) {
            return Some(p);
        }
        if Instant::now() > end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Milliseconds from `from` to `to`, negative when `to` came first.
pub(super) fn ms(from: Instant, to: Instant) -> f64 {
    match to.checked_duration_since(from) {
        Some(d) => d.as_secs_f64() * 1000.0,
        None => -(from - to).as_secs_f64() * 1000.0,
    }
}

//! The pieces every outbox measurement shares: the platform (the built-in mock or the
//! independent server), a real gateway process with Discord adapters pointed at it and its
//! agent API, and one clock that both platforms' arrival times are read against.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hermes_svc::api::client::Client;
use hermes_svc::api::wire::SendBody;
use hermes_svc::mock_platform::{MockConfig, MockPlatform};

use crate::binary::{spawn_gateway, Gateway};
use crate::independent::Independent;
use crate::scratch;

/// The platform side of one measurement.
pub(super) enum Server {
    Mock(MockPlatform),
    Independent(Independent),
}

impl Server {
    /// `label` is "mock" or "independent"; `python` is the venv's python for the latter.
    pub(super) async fn start(label: &str, python: Option<&str>, log: &std::path::Path) -> Server {
        match label {
            "mock" => Server::Mock(MockPlatform::start(MockConfig::default()).await.unwrap()),
            _ => Server::Independent(Independent::start(
                python.expect("the independent server needs scripts/bench-deps' python"),
                // Discord's own interval, so heartbeats are background noise as in real use.
                Duration::from_millis(41_250),
                log,
            )),
        }
    }

    pub(super) fn http_base(&self) -> String {
        match self {
            Server::Mock(m) => m.http_base(),
            Server::Independent(i) => format!("http://127.0.0.1:{}", i.port),
        }
    }

    pub(super) fn pid(&self) -> Option<u32> {
        match self {
            Server::Mock(_) => None,
            Server::Independent(i) => Some(i.child.id()),
        }
    }

    pub(super) fn mock(&self) -> &MockPlatform {
        match self {
            Server::Mock(m) => m,
            Server::Independent(_) => panic!("this measurement runs against the mock only"),
        }
    }

    /// Every post so far whose text starts with `prefix`: its first word (the tag the bench
    /// put there) and when the platform received it, in ms after `clock`'s reference.
    pub(super) async fn arrivals(&self, clock: &Clock, prefix: &str) -> Vec<Arrival> {
        let tag = |content: &str| content.split(' ').next().unwrap_or_default().to_owned();
        match self {
            Server::Mock(m) => m
                .posts()
                .into_iter()
                .filter(|p| p.content.starts_with(prefix))
                .map(|p| Arrival {
                    tag: tag(&p.content),
                    at_ms: clock.since(p.received_at),
                })
                .collect(),
            Server::Independent(i) => {
                let page = i.posts().await;
                page["posts"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|p| {
                        let content = p["content"].as_str()?;
                        let received = p["received_unix_ms"].as_u64()?;
                        content.starts_with(prefix).then(|| Arrival {
                            tag: tag(content),
                            at_ms: clock.unix(received),
                        })
                    })
                    .collect()
            }
        }
    }

    /// Wait until `n` posts with `prefix` have arrived (or `limit` has passed): what arrived.
    pub(super) async fn wait_arrivals(
        &self,
        clock: &Clock,
        prefix: &str,
        n: usize,
        limit: Duration,
    ) -> Vec<Arrival> {
        let end = Instant::now() + limit;
        // The mock's record is in this process; the independent server's is a GET of every
        // post, so it is asked less often. Neither affects the times, which the platform took.
        let every = match self {
            Server::Mock(_) => Duration::from_millis(20),
            Server::Independent(_) => Duration::from_millis(250),
        };
        loop {
            let got = self.arrivals(clock, prefix).await;
            if got.len() >= n || Instant::now() > end {
                return got;
            }
            tokio::time::sleep(every).await;
        }
    }
}

/// A post as the platform recorded it.
pub(super) struct Arrival {
    pub(super) tag: String,
    pub(super) at_ms: f64,
}

/// One moment read on both clocks, so the mock's `Instant`s and the independent server's
/// wall-clock milliseconds land on the same axis. (Over a minute the two clocks drift apart by
/// far less than the independent server's 1 ms resolution.)
pub(super) struct Clock {
    at: Instant,
    unix_ms: f64,
}

impl Clock {
    pub(super) fn now() -> Clock {
        let at = Instant::now();
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            * 1000.0;
        Clock { at, unix_ms }
    }

    /// Milliseconds from the reference to `t` (negative before it).
    pub(super) fn since(&self, t: Instant) -> f64 {
        match t.checked_duration_since(self.at) {
            Some(d) => d.as_secs_f64() * 1000.0,
            None => -(self.at - t).as_secs_f64() * 1000.0,
        }
    }

    /// Milliseconds from the reference to a wall-clock time in whole milliseconds.
    pub(super) fn unix(&self, ms: u64) -> f64 {
        ms as f64 - self.unix_ms
    }
}

/// A gateway process with Discord adapters against one platform, and its agent API.
pub(super) struct Rig {
    home: PathBuf,
    pub(super) profile_home: PathBuf,
    pub(super) client: Client,
    gw: Gateway,
}

impl Rig {
    /// A fresh profile with one Discord adapter per name in `adapters`, each with its own bot
    /// token, started and waited for until every adapter is ready and the API answers.
    pub(super) async fn start(tag: &str, base: &str, adapters: &[&str]) -> Rig {
        let home = scratch(&format!("outbox-{tag}"));
        let profile_home = home.join("profiles/ob");
        std::fs::create_dir_all(&profile_home).unwrap();
        let mut toml = String::new();
        let mut env = String::new();
        for (i, name) in adapters.iter().enumerate() {
            toml.push_str(&format!(
                "[[adapter]]\nname = \"{name}\"\nkind = \"discord\"\ntoken-env = \"DC_TOKEN_{i}\"\napi-base = \"{base}\"\n\n"
            ));
            env.push_str(&format!("DC_TOKEN_{i}=bench-token-{i}\n"));
        }
        std::fs::write(profile_home.join("gateway.toml"), toml).unwrap();
        std::fs::write(profile_home.join(".env"), env).unwrap();
        let gw = spawn_gateway(&home, "ob", None);
        let client = Client::new(profile_home.join("state/api/agent.sock"));
        let rig = Rig {
            home,
            profile_home,
            client,
            gw,
        };
        let n = adapters.len();
        let want = format!("{n}/{n} adapters ready");
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

    /// The outbox journal's size on disk, in bytes.
    pub(super) fn journal_bytes(&self) -> u64 {
        std::fs::metadata(self.profile_home.join("outbox/journal.jsonl")).map_or(0, |m| m.len())
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = self.gw.0.kill();
        let _ = self.gw.0.wait();
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// A message of about 200 characters whose first word is `tag`.
pub(super) fn body(adapter: &str, target: &str, tag: &str) -> SendBody {
    let mut text = format!("{tag} ");
    while text.len() < 200 {
        text.push_str("the quick brown fox jumps over the lazy dog ");
    }
    text.truncate(200);
    SendBody {
        adapter: adapter.to_owned(),
        target: target.to_owned(),
        text: text.trim_end().to_owned(),
        reply_to: None,
        idempotency_key: tag.to_owned(),
        policy: None,
        attachments: vec![],
    }
}

/// Submit every body, `concurrency` at a time, each on its own connection as the API client
/// does; panics on a refusal (the bench built every request, so one is a bug).
pub(super) async fn submit_all(client: &Client, bodies: Vec<SendBody>, concurrency: usize) {
    let queue = std::sync::Arc::new(std::sync::Mutex::new(bodies.into_iter()));
    let mut tasks = vec![];
    for _ in 0..concurrency {
        let (queue, client) = (queue.clone(), client.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let next = queue.lock().unwrap().next();
                let Some(body) = next else { return };
                if let Err(e) = client.submit(&body).await {
                    panic!("submit {} refused: {e}", body.idempotency_key);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

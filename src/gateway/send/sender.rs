//! [`Sender`]: one adapter's way to post a message, built from its config, with what the
//! outbox needs to know about the platform (does it drop a repeat, how long may a text be).

use std::fmt;
use std::time::Duration;

use super::classify::local;
use super::discord::{self, Discord};
use super::feishu::{self, Feishu};
use super::feishu_token::FeishuToken;
use super::qq::{self, Qq};
use super::telegram::{self, Telegram};
use super::websocket::{self, WebSocket};
use super::weixin::{self, Weixin};
use super::{Answer, Outgoing};
use crate::config::Secret;
use crate::gateway::adapter::Shared;
use crate::platform::discord::Config as DiscordConfig;
use crate::platform::feishu::Config as FeishuConfig;
use crate::platform::qqbot::Config as QqBotConfig;
use crate::platform::telegram::Config as TelegramConfig;
use crate::platform::websocket::Config as WebSocketConfig;
use crate::platform::weixin::Config as WeixinConfig;
use crate::platform::{AdapterSpec, Protocol};

/// Posts messages for one adapter. Cheap to share behind an `Arc`; one request at a time or
/// many, as the caller likes. Its `Debug` names the platform only.
pub struct Sender(Platform);

enum Platform {
    Qq(Qq),
    Discord(Discord),
    WebSocket(WebSocket),
    Feishu(Feishu),
    Telegram(Telegram),
    Weixin(Weixin),
}

impl Sender {
    /// The sender for `spec`, or `None` when it cannot send (a plain WebSocket without
    /// `send-frame`). A QQ sender shares the adapter's access token through `shared`, a
    /// plain WebSocket sender the adapter's live connection.
    pub fn new(spec: &AdapterSpec, secrets: &[Secret], shared: Shared) -> Option<Sender> {
        // Every sender so far is keyed on one secret at most.
        let secret = secrets.first().cloned();
        let platform = match &spec.protocol {
            Protocol::QqBot(QqBotConfig {
                app_id,
                api_base,
                token_url,
                ..
            }) => Platform::Qq(Qq {
                token: shared.qq_tokens.get(app_id, token_url, secret.as_ref()),
                shared,
                api_base: api_base.clone(),
            }),
            Protocol::Discord(DiscordConfig { api_base, .. }) => Platform::Discord(Discord {
                http: shared.http.clone(),
                api_base: api_base.clone(),
                token: secret.unwrap_or_else(|| Secret::new(String::new())),
            }),
            Protocol::WebSocket(WebSocketConfig {
                send_frame: Some(frame),
                ..
            }) => Platform::WebSocket(WebSocket {
                frame: frame.clone(),
                outlet: shared.outlets.get(&spec.name),
            }),
            Protocol::WebSocket(WebSocketConfig {
                send_frame: None, ..
            }) => return None,
            Protocol::Feishu(FeishuConfig {
                app_id, api_base, ..
            }) => {
                let secret = secret.unwrap_or_else(|| Secret::new(String::new()));
                let token = FeishuToken::new(api_base, app_id, secret);
                Platform::Feishu(Feishu::new(shared, api_base, token))
            }
            Protocol::Telegram(TelegramConfig { api_base, .. }) => {
                Platform::Telegram(Telegram::new(
                    shared.http.clone(),
                    api_base,
                    secret.unwrap_or_else(|| Secret::new(String::new())),
                ))
            }
            Protocol::Weixin(WeixinConfig {
                api_base,
                login_file,
                ..
            }) => Platform::Weixin(Weixin {
                http: shared.http.clone(),
                account: shared.weixin.get(&spec.name, login_file, api_base),
            }),
        };
        Some(Sender(platform))
    }

    /// The adapter kind, as [`super::Target::parse`] takes it.
    pub fn kind(&self) -> &'static str {
        match self.0 {
            Platform::Qq(_) => "qqbot",
            Platform::Discord(_) => "discord",
            Platform::WebSocket(_) => "websocket",
            Platform::Feishu(_) => "feishu",
            Platform::Telegram(_) => "telegram",
            Platform::Weixin(_) => "weixin",
        }
    }

    /// Post `msg` once and say how it went. The second value, when given, is how long to
    /// wait before the next request to the same target (Discord says so when the route's
    /// rate-limit bucket is spent); it holds whatever the answer, and a `Retry`'s own
    /// `after` is separate.
    pub async fn send(&self, msg: &Outgoing) -> (Answer, Option<Duration>) {
        let len = msg.text.chars().count();
        if len > self.max_text() {
            let m = format!(
                "the text is {len} characters; {} takes at most {}",
                self.kind(),
                self.max_text()
            );
            return (Answer::Failed(local(m)), None);
        }
        match &self.0 {
            Platform::Qq(q) => (q.send(msg).await, None),
            Platform::Discord(d) => d.send(msg).await,
            Platform::WebSocket(w) => (w.send(msg).await, None),
            Platform::Feishu(f) => (f.send(msg).await, None),
            Platform::Telegram(t) => (t.send(msg).await, None),
            Platform::Weixin(w) => (w.send(msg).await, None),
        }
    }

    /// Whether the platform itself drops a second send of `msg`, so that a send whose
    /// answer was lost can be repeated without posting twice. Discord: always (the nonce,
    /// within the few minutes Discord remembers it). QQ: only a passive reply in a group or
    /// a one-to-one chat (`msg_id` + `msg_seq`). Feishu: always (the `uuid`, within the hour
    /// the platform remembers it). Weixin: always (each piece's `client_id`). Telegram and a
    /// plain WebSocket: never.
    pub fn dedupes(&self, msg: &Outgoing) -> bool {
        match self.0 {
            Platform::Qq(_) => qq::dedupes(msg),
            Platform::Discord(_) | Platform::Feishu(_) | Platform::Weixin(_) => true,
            Platform::WebSocket(_) | Platform::Telegram(_) => false,
        }
    }

    /// The longest text the platform takes, in characters (Unicode scalar values), so a
    /// caller can refuse a longer one before it is queued.
    pub fn max_text(&self) -> usize {
        match self.0 {
            Platform::Qq(_) => qq::MAX_TEXT,
            Platform::Discord(_) => discord::MAX_TEXT,
            Platform::WebSocket(_) => websocket::MAX_TEXT,
            Platform::Feishu(_) => feishu::MAX_TEXT,
            Platform::Telegram(_) => telegram::MAX_TEXT,
            Platform::Weixin(_) => weixin::MAX_TEXT,
        }
    }
}

impl fmt::Debug for Sender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sender({})", self.kind())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Timing;
    use crate::gateway::adapter::proxy::ProxyEnv;
    use crate::gateway::send::Target;

    fn spec(protocol: Protocol) -> AdapterSpec {
        AdapterSpec {
            name: "a".into(),
            timing: Timing::default(),
            protocol,
        }
    }

    fn discord() -> AdapterSpec {
        spec(Protocol::Discord(DiscordConfig {
            token_env: "T".into(),
            // Nothing listens here: a send that got this far would be a Retry.
            api_base: "http://127.0.0.1:9".into(),
            gateway_url: None,
            intents: 0,
            ws_ping: true,
        }))
    }

    fn shared() -> Shared {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Shared::new(ProxyEnv::default()).unwrap()
    }

    fn msg(target: Target, text: &str, reply_to: Option<&str>) -> Outgoing {
        Outgoing {
            id: "m".into(),
            target,
            text: text.into(),
            reply_to: reply_to.map(Into::into),
            seq: Some(1),
        }
    }

    fn plain(send_frame: Option<&str>) -> AdapterSpec {
        spec(Protocol::WebSocket(WebSocketConfig {
            url: "ws://127.0.0.1:1".into(),
            token_env: None,
            ping_interval: Duration::from_secs(15),
            app_ping: None,
            send_frame: send_frame
                .map(|t| crate::platform::websocket::SendFrame::parse(t).unwrap()),
        }))
    }

    #[test]
    fn senders_by_kind() {
        assert!(Sender::new(&plain(None), &[], shared()).is_none());
        let w = Sender::new(&plain(Some(r#"{"t":"{text}"}"#)), &[], shared()).unwrap();
        assert_eq!((w.kind(), w.max_text()), ("websocket", 65536));
        assert!(!w.dedupes(&msg(Target::WebSocket("r".into()), "hi", Some("M"))));
        let qq = spec(Protocol::QqBot(QqBotConfig {
            app_id: "1".into(),
            secret_env: "S".into(),
            api_base: "http://127.0.0.1:9".into(),
            token_url: "http://127.0.0.1:9/token".into(),
            gateway_url: None,
            intents: 0,
            shard: [0, 1],
            ws_ping: false,
        }));
        let q = Sender::new(&qq, &[Secret::new("s".into())], shared()).unwrap();
        assert_eq!((q.kind(), q.max_text()), ("qqbot", 2000));
        let group = Target::QqGroup("G".into());
        assert!(q.dedupes(&msg(group.clone(), "hi", Some("M"))));
        assert!(!q.dedupes(&msg(group, "hi", None)));
        let d = Sender::new(&discord(), &[Secret::new("tok".into())], shared()).unwrap();
        assert_eq!((d.kind(), d.max_text()), ("discord", 2000));
        assert!(d.dedupes(&msg(Target::DiscordChannel("1".into()), "hi", None)));
        assert_eq!(format!("{d:?}"), "Sender(discord)");
        let f = spec(Protocol::Feishu(FeishuConfig {
            domain: crate::platform::feishu::FeishuDomain::Feishu,
            app_id: "cli_x".into(),
            secret_env: "S".into(),
            api_base: "http://127.0.0.1:9".into(),
        }));
        let f = Sender::new(&f, &[Secret::new("s".into())], shared()).unwrap();
        assert_eq!((f.kind(), f.max_text()), ("feishu", 30_000));
        // The uuid makes every send safe to repeat, a reply or not.
        assert!(f.dedupes(&msg(Target::FeishuChat("oc_1".into()), "hi", None)));
        assert!(f.dedupes(&msg(Target::FeishuUser("ou_1".into()), "hi", Some("om_1"))));
    }

    #[tokio::test]
    async fn too_long_or_the_wrong_platform_fails_before_any_request() {
        let d = Sender::new(&discord(), &[Secret::new("tok".into())], shared()).unwrap();
        let long = "字".repeat(2001);
        let (a, _) = d
            .send(&msg(Target::DiscordChannel("1".into()), &long, None))
            .await;
        assert!(
            matches!(&a, Answer::Failed(r) if r.message.contains("2001")),
            "{a:?}"
        );
        let (a, _) = d.send(&msg(Target::QqGroup("G".into()), "hi", None)).await;
        assert!(
            matches!(&a, Answer::Failed(r) if r.status.is_none()),
            "{a:?}"
        );
        // Exactly the limit goes out (and finds nobody listening).
        let (a, _) = d
            .send(&msg(
                Target::DiscordChannel("1".into()),
                &"字".repeat(2000),
                None,
            ))
            .await;
        assert!(matches!(a, Answer::Retry { .. }), "{a:?}");
    }

    #[tokio::test]
    async fn a_bad_token_never_shows_in_the_answer() {
        let secret = Secret::new("sec\nret-token".into());
        let d = Sender::new(&discord(), &[secret], shared()).unwrap();
        let (a, _) = d
            .send(&msg(Target::DiscordChannel("1".into()), "hi", None))
            .await;
        let text = format!("{a:?}");
        assert!(matches!(a, Answer::Failed(_)), "{text}");
        assert!(!text.contains("ret-token"), "{text}");
    }

    /// Each adapter's connection task and outbox worker idle for as long as the gateway runs,
    /// a thousand of each in a big gateway, so what they hold is paid a thousand times over
    /// (docs/benchmarks.md, the 1,000-adapter RSS). A send's or a connect's state belongs
    /// in a box that exists only while it runs; these limits catch one that moves inline.
    #[tokio::test]
    async fn idle_tasks_stay_small() {
        use crate::gateway::health::{ComponentKind, Registry};
        let d = Sender::new(&discord(), &[Secret::new("tok".into())], shared()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let outbox = std::sync::Arc::new(
            crate::gateway::outbox::Outbox::open(dir.path(), Default::default()).unwrap(),
        );
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let worker = crate::gateway::outbox::worker::run("a".into(), d, outbox, None, rx.clone());
        let worker = std::mem::size_of_val(&worker);
        assert!(worker <= 1024, "an outbox worker holds {worker} bytes");

        let spec = discord();
        let deps = crate::gateway::adapter::Deps {
            spool: std::sync::Arc::new(
                crate::gateway::spool::Spool::open(&dir.path().join("inbox")).unwrap(),
            ),
            heartbeat: Registry::new().register(
                "a",
                ComponentKind::Adapter(spec.protocol.kind()),
                Duration::from_secs(60),
            ),
            shared: shared(),
            shutdown: rx,
        };
        let adapter = crate::gateway::adapter::run(spec, vec![], deps);
        let adapter = std::mem::size_of_val(&adapter);
        assert!(adapter <= 4 * 1024, "an adapter task holds {adapter} bytes");
    }
}

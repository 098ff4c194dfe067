//! The platforms, and the registry: the one place that names them all.
//!
//! Each platform is a wing, `platform/<kind>/`, holding what only it knows (docs/architecture.md
//! "Adding a platform"). A wing implements [`Platform`]; the `registry!` line below makes it
//! a kind of adapter: a variant of [`Protocol`], which is what the configuration
//! ([`config::Platforms`]) and everything above it hold, and a word in every list of kinds.

mod bot_lookup;
pub mod message;
pub mod standing;

use std::fmt;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::config::{self, AdapterKeys, ConfigError, Secret};
pub use crate::gateway::adapter::whoami::BotId;
use crate::gateway::adapter::{AdapterExit, Deps, Shared};
use crate::gateway::outbox::{worker, Outbox, Route};
use crate::gateway::send::{Post, TargetError};
use crate::gateway::spool::Event;
pub use message::Message;

/// What a platform declares about itself to the rest of the gateway.
pub trait Platform {
    /// `kind = "..."` in `gateway.toml`.
    const KIND: &'static str;
    /// The keys of its `[[adapter]]`, beside the ones every adapter has.
    const KEYS: &'static [&'static str];
    /// Its adapter's settings, read from those keys.
    type Config: Clone + fmt::Debug + PartialEq;
    /// Its way to post messages, and with it the targets it posts to.
    type Sender: Post;

    fn parse(keys: &AdapterKeys) -> Result<Self::Config, ConfigError>;

    /// The `.env` variables its secrets come from, in the order [`Platform::identity`] takes
    /// them.
    fn credential_envs(config: &Self::Config) -> Vec<&str>;

    /// A secret it keeps elsewhere than `.env` (a login file), read, or why it cannot be.
    fn stored_credential(_config: &Self::Config) -> Option<Result<Secret, String>> {
        None
    }

    /// Who it is to the platform: two gateways with one identity would take each other's
    /// events or sessions. Only its hash leaves the process.
    fn identity(config: &Self::Config, secrets: &[Secret]) -> String;

    /// A stored event of kind `kind` (the platform's event type) with payload `data`, read as
    /// a chat message; `None` for events that are not messages (joins, reactions, edits).
    fn normalise(kind: &str, data: &serde_json::Value) -> Option<message::Said>;

    /// Whether a stored message event addresses the bot: mentions it by the platform's own
    /// mention (an entity, a mention list, an event type that only a mention brings; never a
    /// match on the text), or replies to one of its messages. `bot` is what the adapter's
    /// connection learned of the bot ([`BotId`]); where the platform needs it and nothing is
    /// known yet, nothing is taken for a mention.
    fn addressed(_kind: &str, _data: &serde_json::Value, _bot: &BotId) -> bool {
        false
    }

    /// Whether a group message must address the bot ([`Platform::addressed`]) to reach the
    /// agent, unless the adapter's access rules say otherwise: Hermes's own default for the
    /// platform (docs/config.md, "Who may talk to the agent").
    const REQUIRE_MENTION: bool = true;

    /// Which of the platform's ids the access rules name a sender by, for the docs and for
    /// what `pairing list` shows.
    const SENDER_ID: &'static str = "the platform's user id";

    /// Keep the adapter's connection up, its events flowing into the spool, until shutdown
    /// or a fatal error.
    fn receive(
        spec: config::AdapterSpec<Self::Config>,
        secrets: Vec<Secret>,
        deps: Deps,
    ) -> impl Future<Output = AdapterExit> + Send;

    /// The sender of the adapter named `adapter`, or `None` when it cannot send. `shared` is
    /// what it may share with the adapter's connection (a token, a login, the live socket).
    fn sender(
        config: &Self::Config,
        adapter: &str,
        secrets: &[Secret],
        shared: &Shared,
    ) -> Option<Self::Sender>;

    /// The way to this platform's files (a message's photo, voice note, document), with the
    /// adapter's credentials (and `shared`, what it may share with the adapter's connection: a
    /// token); `None` while the wing fetches none. `http` follows no redirect: the download is
    /// pinned to the platform's own origins (`media::download`).
    fn fetcher(
        _config: &Self::Config,
        _secrets: &[Secret],
        _shared: &Shared,
        _http: &reqwest::Client,
    ) -> Option<Arc<dyn crate::media::fetch::Fetch>> {
        None
    }

    /// What doctor should ask the platform about adapter `adapter` (HSV020), holding the
    /// secrets `.env` gives it; nothing by default. `config_path` is where a fix would be made.
    fn question(
        _adapter: &str,
        _config: &Self::Config,
        _secrets: &[Secret],
        _config_path: &Path,
    ) -> Option<standing::Question> {
        None
    }

    /// The variables the Hermes agent's own adapter for this platform reads its credential
    /// from (hermes-agent 0.19.0, `gateway/config.py`; Hermes names the platform as
    /// [`Platform::KIND`]). The Hermes beside the gateway is given none of them
    /// (`agent::hermes`): the gateway holds the platform.
    const HERMES_CREDENTIALS: &'static [&'static str] = &[];

    /// What Hermes's settings for this platform (its home `home`) become in the gateway
    /// (`hermes-svc adopt`): `None` when Hermes does not run the platform, else the adapter
    /// and its access rules, or why they cannot be made as Hermes has them.
    fn from_hermes(
        _home: &crate::hermes_home::HermesHome,
    ) -> Option<Result<crate::hermes_home::wing::Wing, String>> {
        None
    }

    /// How Hermes's own adapter for this platform names it and its chats, for a gateway that
    /// speaks Hermes's ids through the Relay (`[agent] platform-ids`); `None` where Hermes has
    /// no such platform.
    const HERMES: Option<message::HermesPlatform> = None;

    /// What a new login needs, for a platform whose adapter can wait for one
    /// (`needs-login`): said when doctor finds one waiting.
    const LOGIN: Option<&'static str> = None;

    /// What `hermes-svc login KIND` does, for a platform that logs in that way; `None`, and
    /// the platform has no such command.
    const LOG_IN: Option<&'static str> = None;

    /// Log adapter `spec` in, with a person at the terminal, within `timeout`, and store the
    /// login where the adapter reads it. Only called when [`Platform::LOG_IN`] is given.
    fn log_in(
        _spec: &config::AdapterSpec<Self::Config>,
        _timeout: Duration,
    ) -> impl Future<Output = Result<LoggedIn, LoginError>> + Send {
        async { Err(LoginError::NoLogin) }
    }
}

/// A login stored by [`Platform::log_in`].
pub struct LoggedIn {
    /// The bot's account on the platform, as the platform names it.
    pub account: String,
    /// The credential the adapter will use: its fingerprint says which login this is.
    pub credential: Secret,
    pub stored_at: std::path::PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("this platform has no login command")]
    NoLogin,
    #[error("the {platform} login did not complete")]
    Incomplete {
        platform: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The login was confirmed, and could not be stored.
    #[error(transparent)]
    Store(Box<dyn std::error::Error + Send + Sync>),
}

/// The first secret, or nothing: what an identity of one credential is keyed on.
fn first(secrets: &[Secret]) -> &str {
    secrets.first().map_or("", Secret::expose)
}

/// The whole configuration, with these platforms.
pub type GatewayConfig = config::GatewayConfig<Protocol>;
/// One adapter, with its platform's settings.
pub type AdapterSpec = config::AdapterSpec<Protocol>;
/// One cron job, delivering to a target of these platforms.
pub type CronSpec = config::CronSpec<Target>;

macro_rules! registry {
    ($($variant:ident => $wing:ident :: $platform:ident,)+) => {
        // The wings: each line of the registry is its platform's whole mention here.
        $(pub mod $wing;)+

        /// One adapter's platform, with that platform's settings.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Protocol {
            $($variant(<$wing::$platform as Platform>::Config),)+
        }

        impl config::Platforms for Protocol {
            type Target = Target;

            fn kinds() -> &'static [&'static str] {
                &[$(<$wing::$platform as Platform>::KIND,)+]
            }

            fn keys(kind: &str) -> Option<&'static [&'static str]> {
                $(if kind == <$wing::$platform as Platform>::KIND {
                    return Some(<$wing::$platform as Platform>::KEYS);
                })+
                None
            }

            fn parse(kind: &str, keys: &AdapterKeys) -> Result<Self, ConfigError> {
                $(if kind == <$wing::$platform as Platform>::KIND {
                    return <$wing::$platform as Platform>::parse(keys).map(Protocol::$variant);
                })+
                keys.err(keys.span(), format!("adapter {:?}: unknown kind {kind:?}", keys.name()))
            }

            fn kind(&self) -> &'static str {
                match self {
                    $(Protocol::$variant(_) => <$wing::$platform as Platform>::KIND,)+
                }
            }

            fn credential_envs(&self) -> Vec<&str> {
                match self {
                    $(Protocol::$variant(c) => <$wing::$platform as Platform>::credential_envs(c),)+
                }
            }

            fn stored_credential(&self) -> Option<Result<Secret, String>> {
                match self {
                    $(Protocol::$variant(c) => <$wing::$platform as Platform>::stored_credential(c),)+
                }
            }

            fn identity(&self, secrets: &[Secret]) -> String {
                match self {
                    $(Protocol::$variant(c) => <$wing::$platform as Platform>::identity(c, secrets),)+
                }
            }

            fn parse_target(&self, text: &str) -> Result<Target, String> {
                Target::parse(self.kind(), text).map_err(|e| e.to_string())
            }
        }

        /// Keep `spec`'s connection up until shutdown or a fatal error, through its platform.
        /// Boxed: a connection's state lives on the heap, so a thousand idle adapter tasks
        /// stay small.
        pub fn receive(
            spec: AdapterSpec,
            secrets: Vec<Secret>,
            deps: Deps,
        ) -> Pin<Box<dyn Future<Output = AdapterExit> + Send>> {
            Box::pin(async move {
                crate::test_hook::panic_if_asked(&spec.name);
                let config::AdapterSpec { name, timing, access, protocol } = spec;
                match protocol {
                    $(Protocol::$variant(c) => {
                        let spec = config::AdapterSpec { name, timing, access, protocol: c };
                        <$wing::$platform as Platform>::receive(spec, secrets, deps).await
                    })+
                }
            })
        }

        /// `event`, stored by an adapter of `kind`, as a chat message ([`Platform::normalise`]).
        /// Its `reply` is kept only when its target reads back as one the platform takes: a
        /// platform id that would not make a target (`group:a/b`) leaves the message without a
        /// ready-made answer, rather than with one that `POST /v1/messages` refuses.
        pub fn normalise(kind: &str, event: &Event) -> Option<Message> {
            $(if kind == <$wing::$platform as Platform>::KIND {
                type T = <<$wing::$platform as Platform>::Sender as Post>::Target;
                let said = <$wing::$platform as Platform>::normalise(&event.kind, &event.data)?;
                let mut m = said.into_message(kind, &event.adapter);
                if m.reply.as_ref().is_some_and(|r| r.target.parse::<T>().is_err()) {
                    m.reply = None;
                }
                return Some(m);
            })+
            None
        }

        /// Whether `event`, stored by an adapter of `kind`, addresses its bot `bot`
        /// ([`Platform::addressed`]).
        pub fn addressed(kind: &str, event: &Event, bot: &BotId) -> bool {
            $(if kind == <$wing::$platform as Platform>::KIND {
                return <$wing::$platform as Platform>::addressed(&event.kind, &event.data, bot);
            })+
            false
        }

        /// Which id names a sender to an adapter of `kind` ([`Platform::SENDER_ID`]).
        pub fn sender_id(kind: &str) -> &'static str {
            $(if kind == <$wing::$platform as Platform>::KIND {
                return <$wing::$platform as Platform>::SENDER_ID;
            })+
            "the platform's user id"
        }

        /// Whether a group message to an adapter of `kind` must address its bot unless told
        /// otherwise ([`Platform::REQUIRE_MENTION`]).
        pub fn requires_mention(kind: &str) -> bool {
            $(if kind == <$wing::$platform as Platform>::KIND {
                return <$wing::$platform as Platform>::REQUIRE_MENTION;
            })+
            true
        }

        /// What doctor should ask `spec`'s platform, with the adapter's `secrets`.
        pub fn question(
            spec: &AdapterSpec,
            secrets: &[Secret],
            config_path: &Path,
        ) -> Option<standing::Question> {
            match &spec.protocol {
                $(Protocol::$variant(c) => {
                    <$wing::$platform as Platform>::question(&spec.name, c, secrets, config_path)
                })+
            }
        }

        /// The platforms with a login command, `(kind, what the command does)`.
        pub fn logins() -> Vec<(&'static str, &'static str)> {
            let mut out = vec![];
            $(if let Some(about) = <$wing::$platform as Platform>::LOG_IN {
                out.push((<$wing::$platform as Platform>::KIND, about));
            })+
            out
        }

        /// Log `spec` in through its platform ([`Platform::log_in`]).
        pub async fn log_in(spec: &AdapterSpec, timeout: Duration) -> Result<LoggedIn, LoginError> {
            match &spec.protocol {
                $(Protocol::$variant(c) => {
                    let spec = config::AdapterSpec {
                        name: spec.name.clone(),
                        timing: spec.timing.clone(),
                        access: spec.access.clone(),
                        protocol: c.clone(),
                    };
                    <$wing::$platform as Platform>::log_in(&spec, timeout).await
                })+
            }
        }

        /// Each platform with the variables the Hermes agent's own adapter for it reads a
        /// credential from ([`Platform::HERMES_CREDENTIALS`]).
        pub fn hermes_credentials() -> Vec<(&'static str, &'static [&'static str])> {
            let mut out = vec![];
            $(let names = <$wing::$platform as Platform>::HERMES_CREDENTIALS;
            if !names.is_empty() {
                out.push((<$wing::$platform as Platform>::KIND, names));
            })+
            out
        }

        /// Each platform Hermes runs in `home`, with what its wing makes of it
        /// ([`Platform::from_hermes`]).
        pub fn from_hermes(
            home: &crate::hermes_home::HermesHome,
        ) -> Vec<(&'static str, Result<crate::hermes_home::wing::Wing, String>)> {
            let mut out = vec![];
            $(if let Some(made) = <$wing::$platform as Platform>::from_hermes(home) {
                out.push((<$wing::$platform as Platform>::KIND, made));
            })+
            out
        }

        /// How Hermes's own adapter names the platform of `kind` and its chats
        /// ([`Platform::HERMES`]).
        pub fn hermes(kind: &str) -> Option<message::HermesPlatform> {
            $(if kind == <$wing::$platform as Platform>::KIND {
                return <$wing::$platform as Platform>::HERMES;
            })+
            None
        }

        /// What a new login on the platform of `kind` needs, if it has logins.
        pub fn login_needs(kind: &str) -> Option<&'static str> {
            $(if kind == <$wing::$platform as Platform>::KIND {
                return <$wing::$platform as Platform>::LOGIN;
            })+
            None
        }

        /// Where a message goes, on one of the platforms.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Target {
            $($variant(<<$wing::$platform as Platform>::Sender as Post>::Target),)+
        }

        impl Target {
            /// Read `text` as a target on an adapter of `kind`.
            pub fn parse(kind: &str, text: &str) -> Result<Target, TargetError> {
                $(if kind == <$wing::$platform as Platform>::KIND {
                    return text
                        .parse::<<<$wing::$platform as Platform>::Sender as Post>::Target>()
                        .map(Target::$variant);
                })+
                Err(TargetError::CannotSend { kind: kind.to_owned() })
            }
        }

        impl fmt::Display for Target {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $(Target::$variant(t) => t.fmt(f),)+
                }
            }
        }

        /// The way to the files of the adapter `spec`'s platform, if its wing fetches them.
        pub fn fetcher(
            spec: &AdapterSpec,
            secrets: &[Secret],
            shared: &Shared,
            http: &reqwest::Client,
        ) -> Option<Arc<dyn crate::media::fetch::Fetch>> {
            match &spec.protocol {
                $(Protocol::$variant(c) => {
                    <$wing::$platform as Platform>::fetcher(c, secrets, shared, http)
                })+
            }
        }

        /// One adapter's way to post messages, on its platform.
        pub enum Sender {
            $($variant(<$wing::$platform as Platform>::Sender),)+
        }

        impl Sender {
            /// The sender for `spec`, or `None` when it cannot send.
            pub fn new(spec: &AdapterSpec, secrets: &[Secret], shared: &Shared) -> Option<Sender> {
                match &spec.protocol {
                    $(Protocol::$variant(c) => {
                        <$wing::$platform as Platform>::sender(c, &spec.name, secrets, shared)
                            .map(Sender::$variant)
                    })+
                }
            }

            pub fn kind(&self) -> &'static str {
                match self {
                    $(Sender::$variant(_) => <$wing::$platform as Platform>::KIND,)+
                }
            }

            /// What the outbox checks a message to this adapter against when it is submitted.
            pub fn route(&self) -> Route {
                match self {
                    $(Sender::$variant(s) => {
                        Route::new::<<$wing::$platform as Platform>::Sender>(
                            <$wing::$platform as Platform>::KIND,
                            s.max_text(),
                            s.max_piece(),
                        )
                    })+
                }
            }

            /// The adapter's delivery worker ([`worker::run`]), sending with this sender.
            pub fn deliver(
                self,
                adapter: String,
                outbox: Arc<Outbox>,
                connected: Option<watch::Receiver<u64>>,
                shutdown: watch::Receiver<bool>,
            ) -> Pin<Box<dyn Future<Output = ()> + Send>> {
                match self {
                    $(Sender::$variant(s) => {
                        Box::pin(worker::run(adapter, s, outbox, connected, shutdown))
                    })+
                }
            }
        }

        impl fmt::Debug for Sender {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "Sender({})", self.kind())
            }
        }
    };
}

registry! {
    QqBot => qqbot::QqBot,
    Discord => discord::Discord,
    Feishu => feishu::Feishu,
    Slack => slack::Slack,
    Matrix => matrix::Matrix,
    Mattermost => mattermost::Mattermost,
    WeCom => wecom::WeCom,
    DingTalk => dingtalk::DingTalk,
    Telegram => telegram::Telegram,
    Weixin => weixin::Weixin,
    WebSocket => websocket::WebSocket,
}

/// Reads the events of one gateway's adapters as messages: which adapter is of which kind.
/// Clones share one table, which a reload replaces ([`Normaliser::follow`]), so every reader
/// (the access gate, the agent bridge, the local API) knows an adapter the reload added.
#[derive(Clone, Debug, Default)]
pub struct Normaliser {
    kinds: std::sync::Arc<std::sync::RwLock<std::collections::HashMap<String, &'static str>>>,
}

impl Normaliser {
    pub fn new(config: &GatewayConfig) -> Self {
        Self::of(kinds_of(config))
    }

    /// Adapters by name and kind.
    pub fn of(adapters: impl IntoIterator<Item = (String, &'static str)>) -> Self {
        Self {
            kinds: std::sync::Arc::new(std::sync::RwLock::new(adapters.into_iter().collect())),
        }
    }

    /// Read `config`'s adapters from now on: what a reload that added or changed one applies.
    pub fn follow(&self, config: &GatewayConfig) {
        *self
            .kinds
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = kinds_of(config).collect();
    }

    /// `event` as a message, when its adapter is still configured and the event is one.
    pub fn message(&self, event: &Event) -> Option<Message> {
        normalise(self.kind(&event.adapter)?, event)
    }

    /// The kind of adapter `adapter`, when it is configured.
    pub fn kind(&self, adapter: &str) -> Option<&'static str> {
        self.kinds
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(adapter)
            .copied()
    }

    /// Whether `event` addresses its adapter's bot `bot` ([`Platform::addressed`]).
    pub fn addressed(&self, event: &Event, bot: &BotId) -> bool {
        self.kind(&event.adapter)
            .is_some_and(|kind| addressed(kind, event, bot))
    }
}

fn kinds_of(config: &GatewayConfig) -> impl Iterator<Item = (String, &'static str)> + '_ {
    config
        .adapters
        .iter()
        .map(|a| (a.name.clone(), a.protocol.kind()))
}

impl Protocol {
    /// `kind = "..."`, for logs and health.
    pub fn kind(&self) -> &'static str {
        config::Platforms::kind(self)
    }
}

#[cfg(test)]
mod tests;

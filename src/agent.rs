//! The agent behind the gateway: how the chat messages the adapters spool reach it, and how
//! its answers reach the chats (`[agent]` in gateway.toml, docs/agent.md).
//!
//! A front end beside the local API: started on the run's stores before the components, so
//! that the connector listens before `READY=1` (Hermes retries a connector that was not there
//! only after 30 s), and served as the component `agent`. Its health is the agent link, which
//! `status` and `/v1/health` show; it is not a health input, since an agent that is down makes
//! messages wait in the spool, not the gateway stale.

pub(crate) mod answer_files;
pub mod chats;
pub mod feed;
pub mod hermes;
pub mod link;
pub mod media;
pub mod openai;
pub mod relay;
pub mod reply;
pub mod secret;

use std::time::Duration;

use tokio::sync::watch;

use self::link::Link;
use crate::config::{self, AgentSpec};
use crate::gateway::spool::Event;
use crate::gateway::state_file::FrontendHealth;
use crate::logging::Component;
use crate::platform::{GatewayConfig, Message, Normaliser};
use crate::profile::Profile;
use crate::runtime::{Frontend, FrontendError, Started, Stores};

/// The bridge of one profile, as its `[agent]` section says.
pub struct Bridge {
    profile: Profile,
}

impl Bridge {
    pub fn new(profile: &Profile) -> Self {
        Self {
            profile: profile.clone(),
        }
    }
}

/// `e` as a message for the agent, or `None`: not a chat message, or one the access rules did
/// not admit when it was stored (`access.rs`). A message stored without a verdict (before the
/// gateway judged messages) is not sent either: the gateway is the only thing between a
/// stranger and the agent, so what it did not judge does not pass.
pub fn for_agent(normaliser: &Normaliser, e: &Event) -> Option<Message> {
    if !e.access.as_ref().is_some_and(|v| v.admitted) {
        return None;
    }
    normaliser.message(e)
}

/// A turn shows the platform's typing indicator once it has run this long: an answer that
/// comes sooner needs none, and asking for one would double the requests to the platform
/// (measured: an echo agent at 100 messages a second then waited behind them, p99 115 ms).
pub const TYPING_AFTER: Duration = Duration::from_secs(1);

/// How often the running turns are looked at for [`TYPING_AFTER`]. The outbox's worker sends
/// each chat's indicator no more often than half the time it lasts (each platform's
/// `Post::TYPING_LASTS`).
pub const TYPING_EVERY: Duration = Duration::from_secs(1);

/// Show that the agent is working on `m`, where its platform has an indicator for that, if
/// its turn started [`TYPING_AFTER`] ago or longer.
pub fn typing(
    outbox: Option<&crate::gateway::outbox::Outbox>,
    m: &Message,
    started: tokio::time::Instant,
) {
    if started.elapsed() < TYPING_AFTER {
        return;
    }
    if let (Some(outbox), Some(reply)) = (outbox, &m.reply) {
        outbox.typing(&reply.adapter, &reply.target);
    }
}

/// A tick every [`TYPING_EVERY`], for a select over the turns that are running.
pub fn typing_ticks() -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(TYPING_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks
}

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("cannot listen for the agent on 127.0.0.1:{port}; set another [agent] port in {}", config.display())]
    Bind {
        port: u16,
        config: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Secret(#[from] secret::SecretError),
    #[error(transparent)]
    Feed(#[from] feed::FeedError),
    #[error("[agent] key-env names {env}, which is not set: add {env}=... to {}", env_file.display())]
    NoKey {
        env: String,
        env_file: std::path::PathBuf,
    },
}

impl Frontend for Bridge {
    fn start(
        &self,
        stores: Stores<'_>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Option<Started>, FrontendError> {
        let Some(AgentSpec { bridge, .. }) = &stores.config.agent else {
            return Ok(None);
        };
        let turn_timeout = stores
            .config
            .agent
            .as_ref()
            .map_or(Duration::from_secs(600), |a| a.turn_timeout);
        let started = match bridge {
            config::Bridge::HermesRelay { port } => {
                self.relay(*port, turn_timeout, &stores, shutdown)
            }
            config::Bridge::OpenAi(spec) => self.openai(spec, turn_timeout, &stores, shutdown),
        };
        // Each is a setting or a file a person must fix: a restart would meet it again.
        started.map(Some).map_err(|e| FrontendError::new(e, true))
    }

    /// A changed `[agent]` starts the link again; the adapters are not touched. (A reload
    /// cannot add or remove the section: the run's media store and its answers to strangers
    /// are set up by whether it has an agent.)
    fn restarts_on(&self, old: &GatewayConfig, new: &GatewayConfig) -> bool {
        old.agent != new.agent
    }

    fn check(&self, old: &GatewayConfig, new: Stores<'_>) -> Result<(), FrontendError> {
        let Some(agent) = &new.config.agent else {
            return Ok(());
        };
        let old_port = match old.agent.as_ref().map(|a| &a.bridge) {
            Some(config::Bridge::HermesRelay { port }) => Some(*port),
            _ => None,
        };
        let checked = match &agent.bridge {
            config::Bridge::HermesRelay { port } => {
                secret::load_or_create(&self.profile.agent_dir())
                    .map_err(BridgeError::from)
                    .and_then(|_| match old_port == Some(*port) {
                        // The running link holds its own port until it stops.
                        true => Ok(()),
                        false => relay::bind(*port)
                            .map(drop)
                            .map_err(|source| self.bind_error(*port, source)),
                    })
            }
            config::Bridge::OpenAi(spec) => self.key(spec, new.env).map(drop),
        };
        checked.map_err(|e| FrontendError::new(e, true))
    }
}

impl Bridge {
    fn bind_error(&self, port: u16, source: std::io::Error) -> BridgeError {
        BridgeError::Bind {
            port,
            config: self.profile.config_file(),
            source,
        }
    }

    /// The endpoint's key, from the variable `key-env` names, when it names one.
    fn key(
        &self,
        spec: &config::OpenAiSpec,
        vars: &crate::runtime::Env<'_>,
    ) -> Result<Option<config::Secret>, BridgeError> {
        let Some(env) = &spec.key_env else {
            return Ok(None);
        };
        match vars(env) {
            Some(v) if !v.is_empty() => Ok(Some(config::Secret::new(v))),
            _ => Err(BridgeError::NoKey {
                env: env.clone(),
                env_file: self.profile.env_file(),
            }),
        }
    }

    fn feed(&self, stores: &Stores<'_>) -> Result<feed::Feed, BridgeError> {
        Ok(feed::Feed::open(
            stores.spool.dir(),
            &self.profile.inbox_dir().join(AGENT_CURSOR),
        )?)
    }

    fn relay(
        &self,
        port: u16,
        turn_timeout: Duration,
        stores: &Stores<'_>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Started, BridgeError> {
        let secret = secret::load_or_create(&self.profile.agent_dir())?;
        let listener = relay::bind(port).map_err(|source| self.bind_error(port, source))?;
        let link = Link::new("hermes-relay", format!("ws://127.0.0.1:{port}/relay"));
        let normaliser = Normaliser::new(stores.config);
        let relay = relay::Relay {
            id: secret::relay_id(&self.profile),
            secret: secret.into_bytes(),
            label: format!("hermes-svc ({})", self.profile.name().as_str()),
            normaliser: normaliser.clone(),
            outbox: stores.outbox.clone().ok(),
            appended: stores.spool.subscribe(),
            feed: self.feed(stores)?,
            link: link.clone(),
            turn_timeout,
            media: stores.media.clone(),
            platform_ids: stores.config.agent.as_ref().is_some_and(|a| a.platform_ids),
        };
        Ok(Started {
            name: Component::Agent,
            serve: Box::pin(relay::serve(listener, relay, shutdown)),
            health: Box::new(move || FrontendHealth::Agent(link.health())),
            reload: Some(Box::new(move |config| normaliser.follow(config))),
        })
    }

    fn openai(
        &self,
        spec: &config::OpenAiSpec,
        turn_timeout: Duration,
        stores: &Stores<'_>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Started, BridgeError> {
        let key = self.key(spec, stores.env)?;
        let link = Link::new("openai", spec.url.clone());
        let normaliser = Normaliser::new(stores.config);
        let bridge = openai::OpenAi {
            spec: spec.clone(),
            turn_timeout,
            key,
            profile: self.profile.name().as_str().to_owned(),
            normaliser: normaliser.clone(),
            outbox: stores.outbox.clone().ok(),
            appended: stores.spool.subscribe(),
            feed: self.feed(stores)?,
            link: link.clone(),
            media: stores.media.clone(),
            agent_home: hermes::home(&self.profile),
        };
        Ok(Started {
            name: Component::Agent,
            serve: Box::pin(openai::serve(bridge, shutdown)),
            health: Box::new(move || FrontendHealth::Agent(link.health())),
            reload: Some(Box::new(move |config| normaliser.follow(config))),
        })
    }
}

/// The agent's cursor into the spool, in the inbox beside the spool it points into.
pub const AGENT_CURSOR: &str = "agent-cursor";

//! The agent's way in, served beside the components: a seam, so that the runtime names no
//! front end.
//!
//! The local API (`api/`) is built on the gateway's stores, and reads them; the runtime only
//! needs to start it at the right moment (the stores open, before the components, so that an
//! agent can connect as soon as `READY=1` is sent), serve it as a component, and read its
//! health for the state file. So the caller (`cli/gateway.rs`) hands the runtime a
//! [`Frontend`] and the layers stay in order: the API imports the gateway's stores, never the
//! other way round.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::watch;

use crate::gateway::adapter::whoami::Whoami;
use crate::gateway::outbox::Outbox;
use crate::gateway::spool::Spool;
use crate::gateway::state_file::FrontendHealth;
use crate::logging::Component;
use crate::media::fetch::Inbound;
use crate::platform::GatewayConfig;

/// A variable's value, as the configuration was read with it.
pub(crate) type Env<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// The run's stores, kept so that a front end a reload starts again reads the same ones.
#[derive(Clone)]
pub(super) struct StoreParts {
    pub(super) spool: Arc<Spool>,
    pub(super) outbox: Result<Arc<Outbox>, String>,
    pub(super) whoami: Whoami,
    pub(super) media: Result<Arc<Inbound>, String>,
}

impl StoreParts {
    /// The stores, with `config` as the configuration a front end starts on, read with the
    /// variables `env` gives.
    pub(super) fn on<'a>(&'a self, config: &'a GatewayConfig, env: &'a Env<'a>) -> Stores<'a> {
        Stores {
            config,
            env,
            spool: &self.spool,
            outbox: self.outbox.clone(),
            whoami: self.whoami.clone(),
            media: self.media.clone(),
        }
    }
}

/// What a front end reads: the run's stores.
#[derive(Clone)]
pub(crate) struct Stores<'a> {
    /// The configuration the run was started with (or reloaded): its adapters, their platforms.
    pub(crate) config: &'a GatewayConfig,
    /// The variables it was read with: the process's at the start, `.env` as a reload read it.
    pub(crate) env: &'a Env<'a>,
    pub(crate) spool: &'a Spool,
    /// The outbox, or why this run has none (its journal could not be opened).
    pub(crate) outbox: Result<Arc<Outbox>, String>,
    /// Who each adapter's bot is, as its connection learns it.
    pub(crate) whoami: Whoami,
    /// The media store and each adapter's way to its platform's files, or why there is none.
    pub(crate) media: Result<Arc<Inbound>, String>,
}

/// A front end that can be started on the run's stores, and started again by a reload.
pub(crate) trait Frontend: Send {
    /// Get ready to serve (bind a socket, say), so that a path that cannot be used is a
    /// start-up error naming it; then what serves until `shutdown` turns true. `None`: the
    /// configuration asks for nothing to serve.
    fn start(
        &self,
        stores: Stores<'_>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Option<Started>, FrontendError>;

    /// Whether a reload from `old` to `new` changes what it was started from, so that the run
    /// stops it and starts it again on `new` (its reload hook is for what it takes in place).
    fn restarts_on(&self, _old: &GatewayConfig, _new: &GatewayConfig) -> bool {
        false
    }

    /// What in `new` would stop it from starting again in place of the one started on `old`,
    /// found before a reload touches anything, so that such a reload is refused and the
    /// running one stays. Only asked when [`Frontend::restarts_on`] says it will be.
    fn check(&self, _old: &GatewayConfig, _new: Stores<'_>) -> Result<(), FrontendError> {
        Ok(())
    }
}

/// A started front end.
pub(crate) struct Started {
    /// Its component's name, and the `HERMES_COMPONENT` of its log lines.
    pub(crate) name: Component,
    /// Serves until shutdown; an error ends the run with a restart.
    pub(crate) serve: BoxFuture<'static, Result<(), String>>,
    /// Its health as the state file shows it, read on every tick.
    pub(crate) health: Box<dyn Fn() -> FrontendHealth + Send>,
    /// What it takes from a reload's new configuration (once the whole of it was checked),
    /// if anything: the access rules take their new rules.
    pub(crate) reload: Option<ReloadHook>,
}

/// A front end's part of a reload: called with the new configuration, once it is accepted.
pub(crate) type ReloadHook = Box<dyn Fn(&GatewayConfig) + Send>;

/// Why a front end could not start. It reads exactly as the front end's own error does,
/// causes included.
#[derive(Debug)]
pub(crate) struct FrontendError {
    source: Box<dyn std::error::Error + Send + Sync>,
    /// A restart would meet the same problem: a person must fix it first.
    pub(crate) needs_a_fix: bool,
}

impl FrontendError {
    pub(crate) fn new(
        source: impl std::error::Error + Send + Sync + 'static,
        needs_a_fix: bool,
    ) -> Self {
        Self {
            source: Box::new(source),
            needs_a_fix,
        }
    }
}

impl std::fmt::Display for FrontendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for FrontendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

//! The run's components: each on a task of its own, supervised (`component.rs`), named, with
//! a heartbeat where it has one, and all drained together at the end.
//!
//! The order they start in is the runtime's: the front end first (an agent can connect while
//! the rest starts), then the cron ticker and the adapters, then one outbox worker per adapter
//! that can send, after the adapters because each worker watches its adapter's connection.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{AbortHandle, Id, JoinError, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;

use super::component;
use crate::config::Secret;
use crate::gateway::adapter::{self, AdapterExit, Shared};
use crate::gateway::cron::{self, CronContext};
use crate::gateway::health::{ComponentKind, Heartbeat, Registry};
use crate::gateway::outbox::Outbox;
use crate::gateway::spool::Spool;
use crate::logging::Component;
use crate::platform::{AdapterSpec, CronSpec, Sender};
use futures_util::future::BoxFuture;

/// How long shutdown waits for components before giving up on them. `TimeoutStopSec=` in the
/// unit is longer, so a drain is never cut short by SIGKILL.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
/// Draining longer than this is unusual; systemd is told so with `EXTEND_TIMEOUT_USEC=`.
const DRAIN_EXPECTED: Duration = Duration::from_secs(5);

/// The jobs as the ticker runs them: each target as its platform spells it.
pub(super) fn ticker_jobs(jobs: &[CronSpec]) -> Vec<cron::CronSpec> {
    jobs.iter()
        .cloned()
        .map(|job| job.map_target(|target| target.to_string()))
        .collect()
}

/// A component's task ended: its name and how, or why the task itself ended.
pub(super) type Ended = Result<(String, AdapterExit), JoinError>;

/// Whose stop a task listens to: the run's, or one a reload can give alone (an adapter's,
/// which its outbox worker shares, or a front end's), so that it stops one and leaves the rest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Owner {
    Run,
    Adapter(String),
    Frontend(Component),
}

pub(super) struct Components {
    pub(super) registry: Registry,
    tasks: JoinSet<(String, AdapterExit)>,
    /// Each component's task, by name and owner, so that a stale one can be given up at once
    /// on stop, and a reload's stop finds its tasks.
    handles: Vec<(String, Owner, AbortHandle)>,
    shutdown: watch::Sender<bool>,
    /// The stops a reload can give alone.
    stops: HashMap<Owner, watch::Sender<bool>>,
    /// Tasks a reload stopped: how they end is no news to the run loop.
    retired: HashSet<Id>,
}

/// An adapter's tasks (its receiving side and its outbox worker) that a reload stopped.
pub(super) struct Retired(Vec<AbortHandle>);

impl Retired {
    /// Wait until each has ended, up to `grace` (a connection closes in well under a second),
    /// then abort what is left: a wedged adapter must not hold up the rest of a reload.
    pub(super) async fn ended(self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while self.0.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for h in &self.0 {
            h.abort();
        }
    }
}

impl Components {
    pub(super) fn new() -> Self {
        Self {
            registry: Registry::new(),
            tasks: JoinSet::new(),
            handles: vec![],
            shutdown: watch::Sender::new(false),
            stops: HashMap::new(),
            retired: HashSet::new(),
        }
    }

    /// What a component waits on to stop.
    pub(super) fn shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// A stop of its own for a front end about to start: it stops with the run, or alone when
    /// [`Components::stop_frontend`] is given its name.
    pub(super) fn new_stop(&self) -> watch::Sender<bool> {
        watch::Sender::new(*self.shutdown.borrow())
    }

    fn spawn<F>(
        &mut self,
        name: String,
        owner: Owner,
        hb: Option<Heartbeat>,
        span: Component,
        work: F,
    ) where
        F: std::future::Future<Output = AdapterExit> + Send + 'static,
    {
        let handle = self
            .tasks
            .spawn(component::supervised(name.clone(), hb, work).instrument(span.span()));
        self.handles.push((name, owner, handle));
    }

    /// Serve a started front end under its own name, stopped by `stop` (from
    /// [`Components::new_stop`]). A server that fails is a restart.
    pub(super) fn start_frontend(
        &mut self,
        name: Component,
        serve: BoxFuture<'static, Result<(), String>>,
        stop: watch::Sender<bool>,
    ) {
        let work = async move {
            match serve.await {
                Ok(()) => AdapterExit::Shutdown,
                Err(why) => AdapterExit::Crashed(format!("failed: {why}")),
            }
        };
        self.stops.insert(Owner::Frontend(name), stop);
        self.spawn(
            name.as_str().to_owned(),
            Owner::Frontend(name),
            None,
            name,
            work,
        );
    }

    /// The cron ticker, when there are jobs; what hands it a reload's new job list.
    pub(super) fn start_cron(
        &mut self,
        jobs: &[CronSpec],
        ctx: CronContext,
    ) -> Option<watch::Sender<Vec<cron::CronSpec>>> {
        if jobs.is_empty() {
            return None;
        }
        // One name for the heartbeat, the task and the ticker's own logs.
        let name = ctx.name.clone();
        let hb = self
            .registry
            .register(&name, ComponentKind::Cron, cron::DEADLINE);
        let (reload, jobs) = watch::channel(ticker_jobs(jobs));
        let rx = self.shutdown();
        let work = {
            let hb = hb.clone();
            async move {
                cron::run(jobs, hb, ctx, rx).await;
                AdapterExit::Shutdown
            }
        };
        self.spawn(name, Owner::Run, Some(hb), Component::Cron, work);
        Some(reload)
    }

    /// Every adapter; the time by which all should have reported in.
    pub(super) fn start_adapters(
        &mut self,
        adapters: Vec<(AdapterSpec, Vec<Secret>)>,
        spool: &std::sync::Arc<Spool>,
        shared: &Shared,
    ) -> Instant {
        let mut ready_deadline = Instant::now();
        for (spec, secret) in adapters {
            ready_deadline = ready_deadline.max(self.start_adapter(spec, secret, spool, shared));
        }
        ready_deadline
    }

    /// One adapter, with a stop of its own; the time by which it should have reported in.
    pub(super) fn start_adapter(
        &mut self,
        spec: AdapterSpec,
        secret: Vec<Secret>,
        spool: &std::sync::Arc<Spool>,
        shared: &Shared,
    ) -> Instant {
        let hb = self.registry.register(
            &spec.name,
            ComponentKind::Adapter(spec.protocol.kind()),
            adapter::retry_deadline(&spec.timing, spec.timing.backoff_max),
        );
        let ready_by = Instant::now() + spec.timing.connect_timeout + spec.timing.hello_timeout * 2;
        let stop = watch::Sender::new(*self.shutdown.borrow());
        let deps = adapter::Deps {
            spool: spool.clone(),
            heartbeat: hb.clone(),
            shared: shared.clone(),
            shutdown: stop.subscribe(),
        };
        let name = spec.name.clone();
        self.stops.insert(Owner::Adapter(name.clone()), stop);
        self.spawn(
            name.clone(),
            Owner::Adapter(name),
            Some(hb),
            Component::Adapter,
            crate::platform::receive(spec, secret, deps),
        );
        ready_by
    }

    /// `adapter`'s delivery worker, named `outbox:ADAPTER`, watching its adapter's
    /// connection, and stopped with it.
    pub(super) fn start_worker(
        &mut self,
        outbox: &std::sync::Arc<Outbox>,
        adapter: String,
        sender: Sender,
    ) {
        let name = format!("outbox:{adapter}");
        let owner = Owner::Adapter(adapter.clone());
        let rx = match self.stops.get(&owner) {
            Some(stop) => stop.subscribe(),
            None => self.shutdown(),
        };
        let outbox = outbox.clone();
        let connected = self.registry.get(&adapter).map(|hb| hb.connections());
        let work = async move {
            sender.deliver(adapter, outbox, connected, rx).await;
            AdapterExit::Shutdown
        };
        self.spawn(name, owner, None, Component::Outbox, work);
    }

    /// Stop adapter `name` and its worker, take its heartbeat out of the registry, and
    /// forget its tasks; what to wait on for them to end.
    pub(super) fn stop_adapter(&mut self, name: &str) -> Retired {
        self.registry.remove(name);
        self.retire(&Owner::Adapter(name.to_owned()))
    }

    /// Stop front end `name` and forget its task; what to wait on for it to end.
    pub(super) fn stop_frontend(&mut self, name: Component) -> Retired {
        self.retire(&Owner::Frontend(name))
    }

    fn retire(&mut self, owner: &Owner) -> Retired {
        if let Some(stop) = self.stops.remove(owner) {
            let _ = stop.send(true);
        }
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.handles)
            .into_iter()
            .partition(|(_, o, _)| o == owner);
        self.handles = kept;
        let handles: Vec<AbortHandle> = gone.into_iter().map(|(_, _, h)| h).collect();
        self.retired.extend(handles.iter().map(AbortHandle::id));
        Retired(handles)
    }

    /// The next component to end, if any still runs.
    pub(super) async fn next_ended(&mut self) -> Option<Ended> {
        loop {
            let ended = self.tasks.join_next_with_id().await?;
            let id = match &ended {
                Ok((id, _)) => *id,
                Err(e) => e.id(),
            };
            if !self.retired.remove(&id) {
                return Some(ended.map(|(_, exit)| exit));
            }
        }
    }

    /// Stop every component now, with no drain: what a fenced run does, whose connections
    /// must close before another host may take over.
    pub(super) fn abort(&mut self) {
        self.stop_all();
        self.tasks.abort_all();
    }

    /// Tell every component to stop, those with stops of their own by them too.
    fn stop_all(&self) {
        let _ = self.shutdown.send(true);
        for stop in self.stops.values() {
            let _ = stop.send(true);
        }
    }

    /// Tell every component to stop, wait for them up to [`DRAIN_TIMEOUT`] (saying so with
    /// `extend` past [`DRAIN_EXPECTED`]), then abort what is left.
    pub(super) async fn drain(&mut self, extend: impl Fn(Duration)) {
        self.stop_all();
        // A stale component has made no progress past its deadline, so it will not drain
        // either: waiting for it would only hold up the restart a person or systemd asked for.
        let snapshot = self.registry.snapshot();
        for c in snapshot.stale() {
            if let Some((_, _, handle)) = self
                .handles
                .iter()
                .find(|(n, o, _)| *n == c.name && !matches!(o, Owner::Frontend(_)))
            {
                tracing::warn!(stale = %c.name, state = %c.state, "stale: not waiting for it to drain");
                handle.abort();
            }
        }
        let started = Instant::now();
        let mut extended = false;
        while !self.tasks.is_empty() && started.elapsed() < DRAIN_TIMEOUT {
            if !extended && started.elapsed() >= DRAIN_EXPECTED {
                extend(DRAIN_TIMEOUT - started.elapsed());
                extended = true;
            }
            let _ = tokio::time::timeout(Duration::from_millis(200), self.tasks.join_next()).await;
        }
        self.tasks.abort_all();
    }
}

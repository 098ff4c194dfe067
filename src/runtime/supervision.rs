//! The run's dealings with its service manager and its own loop: `READY=1` once the
//! adapters have reported in, `STATUS=`, a cluster standby's wait, the watchdog fed from the
//! components' health on every tick (which also writes the state file), and the signals,
//! component ends and loss of ownership that end the run, each as a [`Stop`].

use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;
use tokio::time::Instant;

use super::components::{Components, Ended};
use super::frontends::Healths;
use super::outbound::{self, Outbound};
use super::ownership::{self, Ownership};
use super::reload::{self, Reloader};
use super::watchdog::Watchdog;
use super::{io, GatewayError, Plan};
use crate::cluster::{Peers, Standing};
use crate::config::ClusterSpec;
use crate::gateway::adapter::AdapterExit;
use crate::gateway::flock::Holder;
use crate::gateway::grid::Grid;
use crate::gateway::health::{Snapshot, State};
use crate::gateway::notify::{self, Notifier};
use crate::gateway::state_file::{ClusterHealth, ReloadRecord, StateFile};
use crate::logging::Component;
use crate::platform::CronSpec;

/// What woke the run loop.
enum Event {
    Signal(&'static str),
    /// A component's task ended: how, or its panic.
    Exited(Ended),
    /// The profile or a credential is no longer this run's (a cluster's lease may be gone).
    Lost(String),
    /// Time to write the state file and decide on the watchdog.
    Tick,
    /// SIGHUP: read the configuration again.
    Reload,
}

/// Why the loop ended.
pub(super) enum Stop {
    Signal(&'static str),
    Fatal {
        adapter: String,
        reason: String,
    },
    Restart(String),
    /// The cluster's lease may be gone: stop acting at once, with no drain.
    Fenced(String),
}

/// What each tick writes into the state file.
pub(super) struct Tick<'a> {
    pub(super) name: String,
    pub(super) state_path: std::path::PathBuf,
    pub(super) outbound: &'a Outbound,
    /// The cron jobs, for their deliveries: a reload may change them.
    pub(super) cron: Vec<CronSpec>,
    pub(super) frontend_health: Healths,
    /// What the file says now, and when it was written.
    pub(super) written: Option<(StateFile, Instant)>,
    /// The run's last reload, if it had one.
    pub(super) reload: Option<ReloadRecord>,
}

impl Tick<'_> {
    /// Rewrite the state file when what it says changed, and otherwise once it is half
    /// `stale_after` old: a reader never finds a live gateway's file stale, and an idle
    /// gateway writes its disk every other tick instead of every tick.
    fn write(
        &mut self,
        snapshot: &Snapshot,
        stale_after: Duration,
        cluster: Option<ClusterHealth>,
    ) {
        let state = StateFile::from_snapshot(snapshot, &self.name, stale_after)
            .with_outbox(self.outbound.stats())
            .with_deliveries(outbound::cron_deliveries(self.outbound, &self.cron))
            .with_frontends(self.frontend_health.read())
            .with_cluster(cluster)
            .with_reload(self.reload.clone());
        let now = Instant::now();
        if let Some((last, at)) = &self.written {
            if state.says_the_same_as(last) && now.duration_since(*at) < stale_after / 2 {
                return;
            }
        }
        match state.write(&self.state_path) {
            Ok(()) => self.written = Some((state, now)),
            Err(e) => tracing::warn!(error = %e, "failed to write the state file"),
        }
    }
}

/// The run's dealings with its service manager: `READY=1`, `STATUS=`, the watchdog, and the
/// signals it stops on.
pub(super) struct Supervision {
    notifier: Notifier,
    sigterm: Signal,
    sigint: Signal,
    /// Installed with the others, so that a SIGHUP while starting is held for the run loop
    /// (which reloads) instead of killing the gateway, SIGHUP's default.
    sighup: Signal,
    watchdog: Option<Duration>,
    self_watchdog: Duration,
    max_outage: Duration,
    tick_every: Duration,
}

impl Supervision {
    pub(super) fn new(plan: &Plan) -> Result<Self, GatewayError> {
        Ok(Self {
            notifier: Notifier::from_env().map_err(io("open NOTIFY_SOCKET"))?,
            sigterm: signal(SignalKind::terminate()).map_err(io("install SIGTERM handler"))?,
            sigint: signal(SignalKind::interrupt()).map_err(io("install SIGINT handler"))?,
            sighup: signal(SignalKind::hangup()).map_err(io("install SIGHUP handler"))?,
            watchdog: plan.watchdog,
            self_watchdog: plan.self_watchdog,
            max_outage: plan.config.max_outage,
            tick_every: plan.tick_every(),
        })
    }

    pub(super) fn send(&self, state: &str) {
        if let Err(e) = self.notifier.send(state) {
            tracing::warn!(error = %e, "failed to notify systemd");
        }
    }

    /// Wait until every adapter has reported in (connected, retrying or failed) or
    /// `deadline` (never more than 60 s away) passes, then send `READY=1`. Meanwhile
    /// `STATUS=` says what the start waits for, for `start` (and `systemctl status`) to show,
    /// twice a second at most and only when it changed. A signal meanwhile is a stop, at once.
    pub(super) async fn wait_ready(
        &mut self,
        components: &Components,
        deadline: Instant,
        me: &Holder,
    ) -> Option<&'static str> {
        let deadline = deadline.min(Instant::now() + Duration::from_secs(60));
        let (mut told, mut next_status) = (String::new(), Instant::now());
        let registry = &components.registry;
        loop {
            let snapshot = registry.snapshot();
            let starting = snapshot.components.iter().any(|c| {
                c.kind.is_adapter()
                    && matches!(
                        c.state,
                        State::Starting | State::Connecting | State::Identifying | State::Resuming
                    )
            });
            if !starting || Instant::now() >= deadline {
                break;
            }
            if Instant::now() >= next_status {
                let summary = format!("starting: {}", snapshot.summary());
                if summary != told {
                    self.send(&notify::status_line(&summary));
                    told = summary;
                }
                next_status = Instant::now() + Duration::from_millis(500);
            }
            tokio::select! {
                _ = self.sigterm.recv() => return Some("SIGTERM"),
                _ = self.sigint.recv() => return Some("SIGINT"),
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
        let summary = registry.snapshot().summary();
        self.send(&format!("READY=1\n{}", notify::status_line(&summary)));
        let (watchdog, self_watchdog) = (self.watchdog, self.self_watchdog);
        tracing::info!(profile = %me.profile, pid = me.pid, ?watchdog, ?self_watchdog, %summary, "gateway ready");
        None
    }

    /// In a cluster, campaign until this run is the active: meanwhile it is a standby, ready
    /// (`READY=1`, `STATUS=standby (active: NODE since TIME)`), feeding the watchdog and
    /// writing the state file, with nothing connected. A signal meanwhile is a stop.
    ///
    /// A SIGHUP meanwhile is a reload like the active's, answered the same way: the standby
    /// takes the new configuration (starting nothing) and runs it if it becomes the active.
    /// A new `[cluster]` starts the campaign again with it (a standby holds nothing in etcd
    /// but its presence record, and a take in flight is let go).
    pub(super) async fn stand_by(
        &mut self,
        ownership: &mut dyn Ownership,
        components: &mut Components,
        tick: &mut Tick<'_>,
        grid: &Grid,
        reloader: &mut Reloader,
    ) -> Result<Option<&'static str>, GatewayError> {
        let Some(mut spec) = reloader.cluster().cloned() else {
            return Ok(None);
        };
        let (report, mut standing) = watch::channel(None);
        let mut ready = false;
        loop {
            let peers = ownership.peers();
            let campaign = ownership.campaign(&report);
            let mut round = Round {
                spec: &spec,
                peers: peers.as_ref(),
                standing: &mut standing,
                ready: &mut ready,
            };
            match self
                .campaign_round(campaign, &mut round, components, tick, grid, reloader)
                .await
            {
                RoundEnd::Won => return Ok(None),
                RoundEnd::Failed(e) => return Err(e),
                RoundEnd::Signal(signal) => return Ok(Some(signal)),
                RoundEnd::Reconfigured => {}
            }
            let new = reloader.cluster().cloned().unwrap_or(spec);
            if let Err(why) = ownership.reconfigure(&new).await {
                tracing::warn!(reason = %why, "the standby could not take the new [cluster]");
            }
            spec = new;
        }
    }

    /// One campaign of a standby, until it is won, fails, a signal stops the run, or a reload
    /// changes `[cluster]`.
    async fn campaign_round(
        &mut self,
        mut campaign: BoxFuture<'_, Result<(), GatewayError>>,
        round: &mut Round<'_>,
        components: &mut Components,
        tick: &mut Tick<'_>,
        grid: &Grid,
        reloader: &mut Reloader,
    ) -> RoundEnd {
        let stale_after = self.tick_every * 3 + Duration::from_secs(1);
        let mut ticks = grid.ticker(self.tick_every);
        let health = |now: &Standing| ownership::standby_health(round.spec, now, round.peers);
        loop {
            tokio::select! {
                biased;
                _ = self.sigterm.recv() => return RoundEnd::Signal("SIGTERM"),
                _ = self.sigint.recv() => return RoundEnd::Signal("SIGINT"),
                won = &mut campaign => return match won {
                    Ok(()) => RoundEnd::Won,
                    Err(e) => RoundEnd::Failed(e),
                },
                Ok(()) = round.standing.changed() => {
                    let Some(now) = round.standing.borrow_and_update().clone() else { continue };
                    let line = notify::status_line(&now.describe());
                    if *round.ready {
                        self.send(&line);
                    } else {
                        self.send(&format!("READY=1\n{line}"));
                        *round.ready = true;
                    }
                    tick.write(&components.registry.snapshot(), stale_after, Some(health(&now)));
                }
                // Held until the standby is ready: its READY=1 must not come from a reload.
                _ = self.sighup.recv(), if *round.ready => {
                    let now = round.standing.borrow().clone().map(|now| health(&now));
                    self.reload(reloader, components, None, tick, stale_after, now).await;
                    if reloader.cluster() != Some(round.spec) {
                        return RoundEnd::Reconfigured;
                    }
                }
                _ = ticks.tick() => {
                    if *round.ready && self.watchdog.is_some() {
                        self.send("WATCHDOG=1");
                    }
                    if let Some(now) = round.standing.borrow().clone() {
                        tick.write(&components.registry.snapshot(), stale_after, Some(health(&now)));
                    }
                }
            }
        }
    }

    /// The run loop: until a signal, a component's fatal end or crash, the loss of
    /// ownership, or a tick's decision to restart.
    pub(super) async fn run_loop(
        &mut self,
        components: &mut Components,
        ownership: &mut dyn Ownership,
        tick: &mut Tick<'_>,
        grid: &Grid,
        reloader: &mut Reloader,
    ) -> Stop {
        let stale_after = self.tick_every * 3 + Duration::from_secs(1);
        let mut ticks = grid.ticker(self.tick_every);
        let mut dog = Watchdog::new(
            self.watchdog.is_some(),
            self.self_watchdog,
            self.max_outage,
            components.registry.snapshot().summary(),
        );
        loop {
            let event = tokio::select! {
                biased;
                _ = self.sigterm.recv() => Event::Signal("SIGTERM"),
                _ = self.sigint.recv() => Event::Signal("SIGINT"),
                why = ownership.lost() => Event::Lost(why),
                Some(ended) = components.next_ended() => Event::Exited(ended),
                _ = ticks.tick() => Event::Tick,
                _ = self.sighup.recv() => Event::Reload,
            };
            let stop = match event {
                Event::Signal(signal) => Some(Stop::Signal(signal)),
                Event::Lost(why) => {
                    // Tests hold the loop here, to see that nothing else acts meanwhile.
                    crate::test_hook::stall("fence-noticed").await;
                    Some(Stop::Fenced(why))
                }
                Event::Exited(Ok((adapter, AdapterExit::Fatal(reason)))) => {
                    Some(Stop::Fatal { adapter, reason })
                }
                Event::Exited(Ok((_, AdapterExit::Shutdown))) => None,
                Event::Exited(Ok((component, AdapterExit::Crashed(what)))) => {
                    Some(Stop::Restart(format!("component {component} {what}")))
                }
                // Only an abort, which the run does only once it is stopping, ends a task
                // this way: a panic was caught by `component::supervised`.
                Event::Exited(Err(e)) => Some(Stop::Restart(format!("a component ended: {e}"))),
                Event::Tick => {
                    self.on_tick(components, &mut dog, tick, stale_after, ownership.health())
                }
                Event::Reload => {
                    self.reload(
                        reloader,
                        components,
                        Some(ownership),
                        tick,
                        stale_after,
                        None,
                    )
                    .await;
                    None
                }
            };
            if let Some(stop) = stop {
                return stop;
            }
        }
    }

    /// One reload, as sd_notify(3) describes it for systemd: `RELOADING=1` with the
    /// monotonic time, then the reload, its record in the state file (what `reload` waits
    /// for), and `READY=1` with what came of it. `standby`: a standby's place in its
    /// cluster; the active's is asked of `ownership` once the reload is done.
    async fn reload(
        &self,
        reloader: &mut Reloader,
        components: &mut Components,
        mut ownership: Option<&mut dyn Ownership>,
        tick: &mut Tick<'_>,
        stale_after: Duration,
        standby: Option<ClusterHealth>,
    ) {
        let began = reload::monotonic_usec();
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={began}"));
        let record = match &mut ownership {
            Some(o) => reloader.reload(began, components, Some(&mut **o)).await,
            None => reloader.reload(began, components, None).await,
        };
        let cluster = ownership.map_or(standby, |o| o.health());
        tick.cron = reloader.cron_jobs().to_vec();
        let told = format!("reload {}: {}", record.outcome.as_str(), record.reason);
        tick.reload = Some(record);
        tick.write(&components.registry.snapshot(), stale_after, cluster);
        self.send(&format!("READY=1\n{}", notify::status_line(&told)));
    }

    /// Write the state file and decide on the watchdog; a restart when it says so.
    fn on_tick(
        &self,
        components: &Components,
        dog: &mut Watchdog,
        tick: &mut Tick<'_>,
        stale_after: Duration,
        cluster: Option<ClusterHealth>,
    ) -> Option<Stop> {
        let _watchdog = Component::Watchdog.span().entered();
        let snapshot = components.registry.snapshot();
        tick.write(&snapshot, stale_after, cluster);
        let decision = dog.on_tick(&snapshot);
        if decision.feed {
            self.send("WATCHDOG=1");
        }
        if !decision.stale.is_empty() {
            let (stale, summary) = (&decision.stale, &decision.summary);
            tracing::warn!(?stale, %summary, "component stale; not feeding the watchdog");
        }
        if decision.send_status {
            self.send(&notify::status_line(&decision.summary));
        }
        decision.restart.map(Stop::Restart)
    }
}

/// What a standby's campaign round reads and keeps across rounds.
struct Round<'a> {
    spec: &'a ClusterSpec,
    peers: Option<&'a Peers>,
    standing: &'a mut watch::Receiver<Option<Standing>>,
    /// Whether `READY=1` was sent: once, by the first round that knew how it stood.
    ready: &'a mut bool,
}

/// How a standby's campaign round ended.
enum RoundEnd {
    Won,
    Failed(GatewayError),
    Signal(&'static str),
    /// A reload changed `[cluster]`: campaign again with it.
    Reconfigured,
}

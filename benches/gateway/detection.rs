//! Detection trials, shared by the sections of the wings with a long connection: one adapter
//! in this process against a mock platform, a fault injected at a random phase of its probe
//! schedule, and the time until the adapter drops the connection and until it is connected
//! again. In process, so the figure is the adapter's own timing, not a process's start-up or a
//! state file's refresh; the registry is polled every millisecond.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::config::{self, Secret};
use hermes_svc::gateway::adapter::{self, Deps};
use hermes_svc::gateway::health::{ComponentKind, ComponentView, Registry, State};
use hermes_svc::gateway::spool::Spool;
use tokio::sync::watch;

/// What one trial saw.
pub(crate) struct Detection {
    /// From the fault to the adapter dropping the connection (its reconnect count moving).
    pub(crate) detected: Duration,
    /// From that drop to the adapter being connected again, as `back` judged it.
    pub(crate) back: Duration,
    /// The component's last error once it was back: the reason it gave for the drop.
    pub(crate) error: String,
}

/// The first adapter of a `gateway.toml` running in this process, with a spool in its
/// directory and a health registry of its own to watch.
pub(crate) struct Running {
    registry: Registry,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<adapter::AdapterExit>,
}

impl Running {
    /// Start the first adapter of `toml` with its `secrets`, read as `dir/gateway.toml` (so
    /// that paths it derives, such as a Weixin login file, are in `dir`).
    pub(crate) fn start(toml: &str, secrets: &[&str], dir: &Path) -> Running {
        std::fs::create_dir_all(dir).unwrap();
        let spec: hermes_svc::platform::AdapterSpec =
            config::parse::<hermes_svc::platform::Protocol>(&dir.join("gateway.toml"), toml)
                .unwrap()
                .adapters[0]
                .clone();
        let registry = Registry::new();
        let hb = registry.register(
            &spec.name,
            ComponentKind::Adapter(spec.protocol.kind()),
            Duration::from_secs(30),
        );
        let (stop, rx) = watch::channel(false);
        let spool = Arc::new(Spool::open(&dir.join("inbox")).unwrap());
        let task = tokio::spawn(hermes_svc::platform::receive(
            spec,
            secrets.iter().map(|s| Secret::new((*s).into())).collect(),
            Deps {
                spool,
                heartbeat: hb,
                shared: adapter::Shared::new(Default::default()).unwrap(),
                shutdown: rx,
            },
        ));
        Running {
            registry,
            stop,
            task,
        }
    }

    pub(crate) fn view(&self) -> ComponentView {
        self.registry.snapshot().components[0].clone()
    }

    /// When `done` first holds of the component, looked at every millisecond.
    pub(crate) async fn until(&self, done: impl Fn(&ComponentView) -> bool) -> Instant {
        loop {
            if done(&self.view()) {
                return Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Run the first adapter of `toml` with `secret` until it is connected, wait one to two
/// `interval`s (a random phase against its probes), call `inject`, and time the drop and the
/// return. `back(now, before)` says when the adapter is connected again, given the component
/// as it was just before the fault.
pub(crate) async fn trial(
    toml: &str,
    secret: &str,
    dir: &Path,
    interval: Duration,
    inject: impl FnOnce(),
    back: impl Fn(&ComponentView, &ComponentView) -> bool,
) -> Detection {
    let run = Running::start(toml, &[secret], dir);
    run.until(|v| v.state == State::Connected).await;
    tokio::time::sleep(interval + interval.mul_f64(fastrand::f64())).await;
    let before = run.view();
    let fault = Instant::now();
    inject();
    let detected = run.until(|v| v.reconnects > before.reconnects).await;
    let returned = run.until(|v| back(v, &before)).await;
    let error = run.view().last_error.unwrap_or_default();
    run.stop().await;
    Detection {
        detected: detected - fault,
        back: returned - detected,
        error,
    }
}

/// One Markdown row of a figure's p50, p99 and maximum, with `decimals` places.
pub(crate) fn row(figure: &str, samples: &[f64], decimals: usize, target: &str) {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let pct = |p: f64| sorted[((sorted.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "| {figure} | {:.decimals$} | {:.decimals$} | {:.decimals$} | {target} |",
        pct(0.5),
        pct(0.99),
        sorted[sorted.len() - 1]
    );
}

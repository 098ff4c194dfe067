//! Detection trials, shared by the zombie and Feishu sections: one adapter in this process
//! against a mock platform, a fault injected at a random phase of its probe schedule, and the
//! time until the adapter drops the connection and until it is connected again. In process,
//! so the figure is the adapter's own timing, not a process's start-up or a state file's
//! refresh; the registry is polled every millisecond.

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
    let spec = config::parse(Path::new("bench.toml"), toml)
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
    let spool = Arc::new(Spool::open(dir).unwrap());
    let task = tokio::spawn(adapter::run(
        spec,
        Some(Secret::new(secret.into())),
        Deps {
            spool,
            heartbeat: hb,
            shared: adapter::Shared::new(Default::default()).unwrap(),
            shutdown: rx,
        },
    ));
    let view = || registry.snapshot().components[0].clone();
    while view().state != State::Connected {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(interval + interval.mul_f64(fastrand::f64())).await;
    let before = view();
    let fault = Instant::now();
    inject();
    let detected = loop {
        if view().reconnects > before.reconnects {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let returned = loop {
        if back(&view(), &before) {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let error = view().last_error.unwrap_or_default();
    let _ = stop.send(true);
    let _ = task.await;
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

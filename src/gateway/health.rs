//! The health registry: one heartbeat per component (each adapter and the cron ticker).
//!
//! A component beats only on proof of progress: a connected adapter on proof of life from the
//! platform, a reconnecting adapter on each attempt that starts and ends on schedule, the cron
//! ticker on each tick. So a component wedged in any state goes stale by itself, and the
//! watchdog gate only has to read the registry to know whether to feed systemd.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

/// Where a component's state machine is. Shown in `STATUS=`, the state file and `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Starting,
    Connecting,
    Identifying,
    Resuming,
    Connected,
    /// Waiting to reconnect after a failure (backing off).
    Retrying,
    /// The cron ticker between jobs.
    Idle,
    /// A cron job is running.
    Running,
    /// A non-retryable failure (bad credentials, a fatal close code): the gateway exits 78.
    Fatal,
    /// The component's task panicked (a bug): the gateway restarts at once (exit 75).
    Crashed,
    /// The platform ended the bot's login (an expired session): nothing but a person
    /// scanning a new QR code helps, so the adapter waits for a new login, visibly degraded,
    /// and a restart would change nothing.
    NeedsLogin,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_value(self).expect("state serialises");
        f.write_str(s.as_str().unwrap_or("?"))
    }
}

/// What a component is. The summary counts adapters and reports the cron ticker on its own,
/// and only an adapter has outages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComponentKind {
    /// A platform connection, with its platform as the config names it (its `kind`), which
    /// `status` and the state file show.
    Adapter(&'static str),
    Cron,
}

impl ComponentKind {
    #[must_use]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ComponentKind::Adapter(platform) => platform,
            ComponentKind::Cron => "cron",
        }
    }

    #[must_use]
    pub(crate) fn is_adapter(self) -> bool {
        matches!(self, ComponentKind::Adapter(_))
    }
}

impl fmt::Display for ComponentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug)]
struct Component {
    name: String,
    kind: ComponentKind,
    state: State,
    deadline: Duration,
    last_beat: Instant,
    last_error: Option<String>,
    reconnects: u64,
    attempts: u64,
    /// When the component last stopped being connected (adapters only).
    outage_since: Option<Instant>,
    /// Counts each entry into `Connected`, for whoever waits on the connection coming back
    /// (the adapter's outbox worker).
    connected: watch::Sender<u64>,
}

/// A component's handle on its own heartbeat. Cheap to clone; all clones are one component.
#[derive(Clone, Debug)]
pub struct Heartbeat(Arc<Mutex<Component>>);

/// All components of one gateway.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    components: Arc<Mutex<Vec<Heartbeat>>>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a component. It starts fresh, in `Starting`, with `deadline` to make progress.
    pub fn register(&self, name: &str, kind: ComponentKind, deadline: Duration) -> Heartbeat {
        let hb = Heartbeat(Arc::new(Mutex::new(Component {
            name: name.to_owned(),
            kind,
            state: State::Starting,
            deadline,
            last_beat: Instant::now(),
            last_error: None,
            reconnects: 0,
            attempts: 0,
            outage_since: Some(Instant::now()),
            connected: watch::Sender::new(0),
        })));
        lock(&self.components).push(hb.clone());
        hb
    }

    /// Take component `name` out: a reload stopped it, so its heartbeat no longer counts
    /// toward the watchdog, `STATUS=` or the state file.
    pub(crate) fn remove(&self, name: &str) {
        lock(&self.components).retain(|hb| lock(&hb.0).name != name);
    }

    /// Component `name`'s heartbeat, if it is registered.
    pub(crate) fn get(&self, name: &str) -> Option<Heartbeat> {
        lock(&self.components)
            .iter()
            .find(|hb| lock(&hb.0).name == name)
            .cloned()
    }

    /// A consistent copy of every component at `now`.
    pub fn snapshot(&self) -> Snapshot {
        let now = Instant::now();
        let components = lock(&self.components)
            .iter()
            .map(|hb| hb.view(now))
            .collect();
        Snapshot { components }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a heartbeat half-updated in a way that
    // matters (every field is written whole), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Heartbeat {
    /// Proof of progress.
    pub(crate) fn beat(&self) {
        lock(&self.0).last_beat = Instant::now();
    }

    /// Move to `state`, which is itself progress. Leaving `Connected` starts an outage;
    /// entering it ends one. Leaving `NeedsLogin` starts one afresh: the wait for a person is
    /// not counted against `max-outage`, so an adapter logged in again after an hour must not
    /// find that hour charged to it the moment it polls.
    pub(crate) fn enter(&self, state: State) {
        let mut c = lock(&self.0);
        let now = Instant::now();
        let leaves_login = c.state == State::NeedsLogin && state != State::NeedsLogin;
        if state == State::Connected || !is_adapter_state(state) {
            c.outage_since = None;
        } else if c.outage_since.is_none() || leaves_login {
            c.outage_since = Some(now);
        }
        if state == State::Connected && c.state != State::Connected {
            c.connected.send_modify(|n| *n += 1);
        }
        c.state = state;
        c.last_beat = now;
    }

    /// Changes each time the component enters `Connected` from another state.
    pub(crate) fn connections(&self) -> watch::Receiver<u64> {
        lock(&self.0).connected.subscribe()
    }

    /// Change how long this component may go without a beat (e.g. once the platform's
    /// heartbeat interval is known).
    pub(crate) fn set_deadline(&self, deadline: Duration) {
        lock(&self.0).deadline = deadline;
    }

    /// Record the latest error, shown until the next one in `STATUS=`, the state file and
    /// `status`. Any secret in it is taken out here too, whatever its way in.
    pub(crate) fn error(&self, error: impl fmt::Display) {
        let error = error.to_string();
        lock(&self.0).last_error = Some(crate::redact::scrub(&error).into_owned());
    }

    pub(crate) fn reconnected(&self) {
        lock(&self.0).reconnects += 1;
    }

    /// When the current outage began, if there is one.
    pub(crate) fn outage_since(&self) -> Option<Instant> {
        lock(&self.0).outage_since
    }

    /// A connection that did not last ends no outage: a platform that accepts every resume
    /// and closes again at once must still reach `max-outage`. Puts back an outage that began
    /// at `since`, unless one that began earlier is already running.
    pub(crate) fn continue_outage(&self, since: Option<Instant>) {
        let Some(since) = since else { return };
        let mut c = lock(&self.0);
        if c.outage_since.is_none_or(|t| t > since) {
            c.outage_since = Some(since);
        }
    }

    /// A connection attempt starts (successful or not). Counting them shows whether backoff
    /// keeps a failing endpoint from being hammered.
    pub(crate) fn attempt(&self) {
        let mut c = lock(&self.0);
        c.attempts += 1;
        c.last_beat = Instant::now();
    }

    fn view(&self, now: Instant) -> ComponentView {
        let c = lock(&self.0);
        let age = now.saturating_duration_since(c.last_beat);
        ComponentView {
            name: c.name.clone(),
            kind: c.kind,
            state: c.state,
            fresh: age <= c.deadline,
            last_beat_age: age,
            deadline: c.deadline,
            reconnects: c.reconnects,
            attempts: c.attempts,
            last_error: c.last_error.clone(),
            outage: c.outage_since.map(|t| now.saturating_duration_since(t)),
        }
    }
}

fn is_adapter_state(state: State) -> bool {
    !matches!(state, State::Idle | State::Running)
}

/// One component as the watchdog sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ComponentView {
    pub(crate) name: String,
    pub(crate) kind: ComponentKind,
    pub state: State,
    pub fresh: bool,
    pub(crate) last_beat_age: Duration,
    pub(crate) deadline: Duration,
    pub reconnects: u64,
    pub attempts: u64,
    pub last_error: Option<String>,
    /// How long the adapter has been without a connection, if it is.
    pub outage: Option<Duration>,
}

/// Every component at one instant.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub components: Vec<ComponentView>,
}

impl Snapshot {
    pub(crate) fn all_fresh(&self) -> bool {
        self.components.iter().all(|c| c.fresh)
    }

    pub(crate) fn stale(&self) -> impl Iterator<Item = &ComponentView> {
        self.components.iter().filter(|c| !c.fresh)
    }

    pub(crate) fn adapters(&self) -> impl Iterator<Item = &ComponentView> {
        self.components.iter().filter(|c| c.kind.is_adapter())
    }

    /// The longest current outage among adapters that a restart might end: one waiting for a
    /// person to log in again is left out.
    pub(crate) fn longest_outage(&self) -> Option<(&ComponentView, Duration)> {
        self.adapters()
            .filter(|c| c.state != State::NeedsLogin)
            .filter_map(|c| c.outage.map(|o| (c, o)))
            .max_by_key(|(_, o)| *o)
    }

    /// The one-line `STATUS=` summary: "2/2 adapters ready; cron ok", or what is wrong.
    pub(crate) fn summary(&self) -> String {
        let adapters: Vec<_> = self.adapters().collect();
        let ready = adapters
            .iter()
            .filter(|c| c.state == State::Connected && c.fresh)
            .count();
        let mut parts = vec![if adapters.is_empty() {
            "no adapters configured".to_owned()
        } else {
            format!("{ready}/{} adapters ready", adapters.len())
        }];
        for c in self.components.iter() {
            if !c.fresh {
                parts.push(format!(
                    "{}: stale in {} for {}",
                    c.name,
                    c.state,
                    short(c.last_beat_age)
                ));
            } else if c.kind.is_adapter() && c.state != State::Connected {
                let mut s = format!("{}: {}", c.name, c.state);
                if let Some(o) = c.outage.filter(|o| *o >= Duration::from_secs(1)) {
                    s.push_str(&format!(" {}", short(o)));
                }
                if let Some(e) = &c.last_error {
                    s.push_str(&format!(", last error: {e}"));
                }
                parts.push(s);
            }
        }
        if let Some(cron) = self
            .components
            .iter()
            .find(|c| c.kind == ComponentKind::Cron)
        {
            if cron.fresh {
                parts.push("cron ok".into());
            }
        }
        parts.join("; ")
    }
}

/// "850ms", "42s", "12m", "3h": coarse enough for a status line.
pub(crate) fn short(d: Duration) -> String {
    let s = d.as_secs();
    if s == 0 {
        format!("{}ms", d.as_millis())
    } else if s < 120 {
        format!("{s}s")
    } else if s < 7200 {
        format!("{}m", s / 60)
    } else {
        format!("{}h", s / 3600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn components_go_stale_without_beats_and_summary_names_them() {
        let r = Registry::new();
        let qq = r.register(
            "qq",
            ComponentKind::Adapter("websocket"),
            Duration::from_secs(10),
        );
        let cron = r.register("cron", ComponentKind::Cron, Duration::from_secs(3));
        qq.enter(State::Connected);
        cron.enter(State::Idle);
        assert!(r.snapshot().all_fresh());
        assert_eq!(r.snapshot().summary(), "1/1 adapters ready; cron ok");

        tokio::time::advance(Duration::from_secs(5)).await;
        cron.beat();
        let s = r.snapshot();
        assert!(s.all_fresh());

        tokio::time::advance(Duration::from_secs(6)).await;
        cron.beat();
        let s = r.snapshot();
        assert!(!s.all_fresh());
        assert_eq!(
            s.stale().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["qq"]
        );
        assert!(
            s.summary().contains("qq: stale in connected for 11s"),
            "{}",
            s.summary()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_for_a_login_is_not_charged_to_the_outage_after_it() {
        let r = Registry::new();
        let wx = r.register(
            "wx",
            ComponentKind::Adapter("websocket"),
            Duration::from_secs(10),
        );
        wx.enter(State::Connected);
        wx.enter(State::Retrying);
        tokio::time::advance(Duration::from_secs(30)).await;
        wx.enter(State::NeedsLogin);
        tokio::time::advance(Duration::from_secs(3600)).await;
        let s = r.snapshot();
        assert!(
            s.longest_outage().is_none(),
            "a wait for a person is no outage"
        );
        assert_eq!(s.components[0].outage, Some(Duration::from_secs(3630)));
        wx.enter(State::Connecting);
        tokio::time::advance(Duration::from_secs(2)).await;
        let s = r.snapshot();
        let (c, outage) = s.longest_outage().unwrap();
        assert_eq!((c.name.as_str(), outage), ("wx", Duration::from_secs(2)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_outage_is_reported_while_retries_stay_fresh() {
        let r = Registry::new();
        let qq = r.register(
            "qq",
            ComponentKind::Adapter("websocket"),
            Duration::from_secs(10),
        );
        qq.enter(State::Connected);
        qq.enter(State::Retrying);
        qq.error("dns: no such host");
        for _ in 0..72 {
            tokio::time::advance(Duration::from_secs(10)).await;
            qq.beat();
        }
        let s = r.snapshot();
        assert!(s.all_fresh());
        let (c, outage) = s.longest_outage().unwrap();
        assert_eq!((c.name.as_str(), outage), ("qq", Duration::from_secs(720)));
        assert_eq!(
            s.summary(),
            "0/1 adapters ready; qq: retrying 12m, last error: dns: no such host"
        );
    }
}

//! What the gateway does on each watchdog tick, decided from a snapshot of the registry alone,
//! so that the feed, self-watchdog and max-outage rules are tested without a clock or systemd.

use std::ffi::OsStr;
use std::time::Duration;

use crate::gateway::health::{self, Snapshot};
use crate::launchd::plist::WATCHDOG_ENV;
use crate::service::settings::MAX_SECONDS;

/// `HERMES_WATCHDOG_SEC` holds something other than a self-watchdog deadline.
#[derive(Debug, thiserror::Error)]
#[error(
    "{WATCHDOG_ENV}={value:?} is not a self-watchdog deadline: use whole seconds from 1 to \
     {MAX_SECONDS}, like 30, or unset it (the LaunchAgent sets it from WatchdogSec: \
     `hermes-svc set --profile NAME WatchdogSec=30`)"
)]
pub(crate) struct BadWatchdogEnv {
    value: String,
}

/// How long past its deadline a stale component may stay before the self-watchdog exits, when
/// systemd runs no watchdog for the process.
///
/// launchd has no watchdog, so the plist passes `WatchdogSec` as `HERMES_WATCHDOG_SEC` (`env`)
/// and the gateway enforces it. Like systemd's `WatchdogSec=`, it is the service's setting and
/// wins over `[gateway] watchdog` in `gateway.toml` (`configured`), which is the default for a
/// foreground run. Unset or empty, `configured` applies.
pub(crate) fn self_watchdog(
    env: Option<&OsStr>,
    configured: Duration,
) -> Result<Duration, BadWatchdogEnv> {
    let Some(raw) = env.filter(|v| !v.is_empty()) else {
        return Ok(configured);
    };
    let value = raw.to_string_lossy();
    match value.parse::<u64>() {
        Ok(secs) if (1..=MAX_SECONDS).contains(&secs) => Ok(Duration::from_secs(secs)),
        _ => Err(BadWatchdogEnv {
            value: value.into_owned(),
        }),
    }
}

/// The rules, fixed at start.
#[derive(Debug)]
pub(crate) struct Watchdog {
    /// systemd runs a watchdog for us (`WATCHDOG_USEC`); without one, the self-watchdog rule
    /// exits instead.
    systemd: bool,
    /// How long past its deadline a stale component is given before the self-watchdog exits.
    self_watchdog: Duration,
    max_outage: Duration,
    /// The `STATUS=` summary last sent, so that an unchanged one is not sent again.
    last_status: String,
}

/// What one tick calls for, in the order the loop carries it out: feed, warn, status, stop.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) summary: String,
    /// Send `WATCHDOG=1`.
    pub(crate) feed: bool,
    /// The stale components, named in a warning; empty while every one is fresh.
    pub(crate) stale: Vec<String>,
    /// The summary changed: send it as `STATUS=`.
    pub(crate) send_status: bool,
    /// Exit 75 for this reason.
    pub(crate) restart: Option<String>,
}

impl Watchdog {
    pub(crate) fn new(
        systemd: bool,
        self_watchdog: Duration,
        max_outage: Duration,
        status: String,
    ) -> Self {
        Self {
            systemd,
            self_watchdog,
            max_outage,
            last_status: status,
        }
    }

    #[must_use]
    pub(crate) fn on_tick(&mut self, snapshot: &Snapshot) -> Decision {
        let summary = snapshot.summary();
        let mut decision = Decision {
            feed: false,
            stale: vec![],
            send_status: false,
            restart: None,
            summary,
        };
        if snapshot.all_fresh() {
            decision.feed = self.systemd;
        } else {
            decision.stale = snapshot.stale().map(|c| c.name.clone()).collect();
            if !self.systemd {
                if let Some(c) = snapshot
                    .stale()
                    .find(|c| c.last_beat_age > c.deadline + self.self_watchdog)
                {
                    // Nothing else is worth saying on the way out.
                    decision.restart = Some(format!(
                        "{} stale in {} for {} (self-watchdog)",
                        c.name,
                        c.state,
                        health::short(c.last_beat_age)
                    ));
                    return decision;
                }
            }
        }
        if decision.summary != self.last_status {
            decision.send_status = true;
            self.last_status.clone_from(&decision.summary);
        }
        if let Some((c, outage)) = snapshot.longest_outage() {
            if outage > self.max_outage {
                decision.restart = Some(format!(
                    "{} without a connection for {} (max-outage {})",
                    c.name,
                    health::short(outage),
                    health::short(self.max_outage)
                ));
            }
        }
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::health::{ComponentKind, Heartbeat, Registry, State};
    use tokio::time::advance;

    const SECOND: Duration = Duration::from_secs(1);

    fn gateway() -> (Registry, Heartbeat, Heartbeat) {
        let r = Registry::new();
        let qq = r.register("qq", ComponentKind::Adapter("websocket"), SECOND * 10);
        let cron = r.register("cron", ComponentKind::Cron, SECOND * 3600);
        qq.enter(State::Connected);
        cron.enter(State::Idle);
        (r, qq, cron)
    }

    #[tokio::test(start_paused = true)]
    async fn feeds_systemd_only_while_all_are_fresh_and_sends_a_status_only_when_it_changes() {
        let (r, qq, _cron) = gateway();
        let mut w = Watchdog::new(true, SECOND * 30, SECOND * 1800, String::new());
        let d = w.on_tick(&r.snapshot());
        assert_eq!(
            d,
            Decision {
                summary: "1/1 adapters ready; cron ok".into(),
                feed: true,
                stale: vec![],
                send_status: true,
                restart: None,
            }
        );
        advance(SECOND * 5).await;
        qq.beat();
        let d = w.on_tick(&r.snapshot());
        assert!(d.feed && !d.send_status && d.restart.is_none(), "{d:?}");

        // Stale: named, not fed, and left to systemd however long it lasts.
        advance(SECOND * 11).await;
        let d = w.on_tick(&r.snapshot());
        assert!(!d.feed && d.send_status && d.restart.is_none(), "{d:?}");
        assert_eq!(d.stale, ["qq"]);
        assert_eq!(
            d.summary,
            "0/1 adapters ready; qq: stale in connected for 11s; cron ok"
        );
        advance(SECOND * 3600).await;
        assert_eq!(w.on_tick(&r.snapshot()).restart, None);
    }

    #[tokio::test(start_paused = true)]
    async fn without_systemd_a_component_stale_past_the_grace_exits() {
        let (r, _qq, _cron) = gateway();
        let mut w = Watchdog::new(false, SECOND * 30, SECOND * 1800, String::new());
        assert!(!w.on_tick(&r.snapshot()).feed);
        advance(SECOND * 40).await;
        let d = w.on_tick(&r.snapshot());
        assert_eq!((d.stale.len(), d.restart), (1, None));
        advance(SECOND).await;
        let d = w.on_tick(&r.snapshot());
        assert_eq!(
            d.restart.as_deref(),
            Some("qq stale in connected for 41s (self-watchdog)")
        );
        assert!(!d.send_status, "nothing else is said on the way out");
    }

    #[test]
    fn hermes_watchdog_sec_overrides_the_config_and_a_bad_value_names_the_variable() {
        let configured = SECOND * 30;
        let env = |v: &str| self_watchdog(Some(OsStr::new(v)), configured);
        assert_eq!(self_watchdog(None, configured).unwrap(), configured);
        assert_eq!(env("").unwrap(), configured, "empty is unset");
        assert_eq!(env("2").unwrap(), SECOND * 2);
        assert_eq!(env("86400").unwrap(), SECOND * 86400);
        for bad in ["0", "86401", "-5", "2s", " 2", "1.5", "lots"] {
            let e = env(bad).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("HERMES_WATCHDOG_SEC={bad:?} is not")),
                "{e}"
            );
            assert!(e.contains("WatchdogSec=30"), "names the fix: {e}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_outage_past_max_outage_restarts_even_while_fresh() {
        let (r, qq, _cron) = gateway();
        let mut w = Watchdog::new(true, SECOND * 30, SECOND * 1800, String::new());
        qq.enter(State::Retrying);
        for _ in 0..180 {
            advance(SECOND * 10).await;
            qq.beat();
        }
        let d = w.on_tick(&r.snapshot());
        assert!(d.feed && d.restart.is_none(), "exactly max-outage: {d:?}");
        advance(SECOND * 5).await;
        qq.beat();
        let d = w.on_tick(&r.snapshot());
        assert!(d.feed, "{d:?}");
        assert_eq!(
            d.restart.as_deref(),
            Some("qq without a connection for 30m (max-outage 30m)")
        );
    }
}

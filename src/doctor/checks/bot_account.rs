//! Findings about a bot's standing with its platform, which no unit property shows: a login the
//! platform ended (the gateway's own state file says so) and a setting on the platform that
//! keeps the adapter deaf (the platform says so, asked by its wing: `platform::standing`).
//! Both leave a gateway that runs, looks healthy to its manager, and hears nothing. They do
//! not depend on the manager, so launchd's doctor runs them too, and `--fix` changes neither:
//! one needs a person with the bot's account at hand, the other a decision about the bot's
//! setup.

use crate::doctor::checks::{profile_finding, Check};
use crate::doctor::homes::{Homes, ProfileSnap};
use crate::doctor::{Finding, Severity};
use crate::gateway::health::State;
use crate::platform::standing::Standing;
use crate::service::served_profile::same_home;
use crate::systemd::scope::Scope;

/// HSV019: an adapter waits for a person to log it in again (the platform ended its session).
pub(crate) const NEEDS_LOGIN: Check<Homes> = Check {
    id: "HSV019",
    find: needs_login,
    // What the login needs is in the finding's message, said by the platform.
    fix: |p, f| p.skip(f, "a new login needs a person, as the finding says"),
};

fn needs_login(s: &Homes) -> Vec<Finding> {
    let waiting = State::NeedsLogin.to_string();
    let mut out = vec![];
    for p in &s.profiles {
        let Some(state) = &p.state else { continue };
        // The gateway rewrites its state file on every tick: a current one means it runs now,
        // under whichever manager (or none), and its adapters' states are today's.
        if state.is_stale(s.now) {
            continue;
        }
        for c in state.components.iter().filter(|c| c.state == waiting) {
            let last = c
                .last_error
                .as_deref()
                .map(|e| format!(" Last error: {e}."))
                .unwrap_or_default();
            out.push(profile_finding(
                NEEDS_LOGIN.id,
                Severity::Error,
                p,
                format!(
                    "Adapter {} ({}) needs a new login: the platform ended its session, so it hears and sends nothing until someone logs it in again (a new login needs {}).{last}",
                    c.name,
                    c.kind,
                    crate::platform::login_needs(&c.kind).unwrap_or("a person")
                ),
                format!(
                    "hermes-svc login {} --profile {} --adapter {}{}",
                    c.kind,
                    p.name,
                    c.name,
                    system_flag(s, p)
                ),
            ));
        }
    }
    out
}

/// ` --system` when the unit that runs the profile is a system unit: `login` then finds the
/// unit it may restart in that manager. A launchd job is always the user's.
fn system_flag(s: &Homes, p: &ProfileSnap) -> &'static str {
    let serving: Vec<_> = s
        .services
        .iter()
        .filter(|svc| {
            svc.serves.as_ref() == Some(&p.name) && same_home(&svc.hermes_home, &p.hermes_home)
        })
        .collect();
    let service = serving.iter().find(|svc| svc.active).or(serving.first());
    match service.map(|svc| svc.scope) {
        Some(Scope::System) => " --system",
        _ => "",
    }
}

/// HSV020: the platform says an adapter cannot work as configured (a webhook that blocks
/// polling, say); or (info) doctor could not ask it.
pub(crate) const PLATFORM_REFUSES: Check<Homes> = Check {
    id: "HSV020",
    find: platform_refuses,
    fix: |p, f| {
        match f.severity {
        Severity::Info => p.skip(f, "doctor could not ask the platform; nothing to fix until it can"),
        _ => p.skip(
            f,
            "doctor changes neither gateway.toml nor a bot's settings on its platform; whether the setting is still someone's is for a person to decide",
        ),
    }
    },
};

fn platform_refuses(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        for (_, standing) in &p.standing {
            let (severity, message, fix) = match standing {
                Standing::Blocked(b) => (Severity::Error, b.problem.clone(), b.fix.clone()),
                Standing::CouldNotAsk { message, fix } => {
                    (Severity::Info, message.clone(), fix.clone())
                }
                Standing::Fine => continue,
            };
            out.push(profile_finding(
                PLATFORM_REFUSES.id,
                severity,
                p,
                message,
                fix,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::checks::fixtures::*;
    use crate::doctor::snapshot::Snapshot;
    use crate::gateway::state_file::{ComponentState, StateFile};
    use crate::platform::standing::Blocked;
    use std::time::{Duration, SystemTime};

    fn component(name: &str, kind: &str, state: &str, last_error: Option<&str>) -> ComponentState {
        ComponentState {
            name: name.into(),
            kind: kind.into(),
            state: state.into(),
            fresh: true,
            last_beat_age_ms: 0,
            deadline_ms: 0,
            reconnects: 0,
            attempts: 0,
            last_error: last_error.map(str::to_owned),
            outage_ms: None,
        }
    }

    fn state(updated: SystemTime, components: Vec<ComponentState>) -> StateFile {
        StateFile {
            updated_at: humantime::format_rfc3339_millis(updated).to_string(),
            pid: 4242,
            profile: "a".into(),
            stale_after_ms: 10_000,
            summary: "1/2 adapters ready".into(),
            components,
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: None,
        }
    }

    fn waiting(now: SystemTime) -> Snapshot {
        let mut p = profile("a");
        p.state = Some(state(
            now,
            vec![
                component("qq", "websocket", "connected", None),
                component(
                    "wx",
                    "chat",
                    "needs-login",
                    Some("session expired (errcode -14)"),
                ),
            ],
        ));
        let mut s = snap(vec![ours("a")], vec![p]);
        s.homes.now = now;
        s
    }

    #[test]
    fn hsv019_an_adapter_waiting_for_a_login() {
        let now = SystemTime::now();
        let s = waiting(now);
        let f = needs_login(&s.homes);
        assert_eq!(ids(&f), [("HSV019", Severity::Error)]);
        assert_eq!(f[0].subject, "a");
        assert!(
            f[0].message.contains("Adapter wx (chat)")
                && f[0].message.contains("session expired (errcode -14)"),
            "{f:?}"
        );
        assert_eq!(f[0].fix, "hermes-svc login chat --profile a --adapter wx");
        // A system unit runs the profile: login is told so.
        let mut system = s.clone();
        let mut unit = ours("a");
        unit.scope = Some(Scope::System);
        system.homes.services = vec![unit.as_service()];
        assert_eq!(
            needs_login(&system.homes)[0].fix,
            "hermes-svc login chat --profile a --adapter wx --system"
        );
        // No unit at all (a gateway run by hand, or a launchd job): still found, user scope.
        let mut by_hand = s.clone();
        by_hand.homes.services.clear();
        assert_eq!(
            ids(&needs_login(&by_hand.homes)),
            [("HSV019", Severity::Error)]
        );
        // Near misses: a stale state file (the gateway is not running now) and a connected one.
        let mut old = s.clone();
        old.homes.now = now + Duration::from_secs(60);
        assert!(needs_login(&old.homes).is_empty());
        let mut back = s.clone();
        let st = back.homes.profiles[0].state.as_mut().unwrap();
        st.components[1].state = "connected".into();
        assert!(needs_login(&back.homes).is_empty());
    }

    fn standing(standing: Standing) -> Snapshot {
        let mut p = profile("a");
        p.standing = vec![("tg".into(), standing)];
        snap(vec![ours("a")], vec![p])
    }

    fn blocked(host: &str) -> Standing {
        Standing::Blocked(Blocked {
            problem: format!("Adapter tg polls, but a webhook is set (to {host}): 409."),
            fix: format!(
                "set delete-webhook = true for adapter tg in {HOME}/profiles/a/gateway.toml"
            ),
        })
    }

    #[test]
    fn hsv020_the_platform_says_an_adapter_cannot_work() {
        let f = platform_refuses(&standing(blocked("hooks.example.com")).homes);
        assert_eq!(ids(&f), [("HSV020", Severity::Error)]);
        assert!(
            f[0].message.contains("hooks.example.com") && f[0].message.contains("409"),
            "{f:?}"
        );
        assert_eq!(
            f[0].fix,
            format!("set delete-webhook = true for adapter tg in {HOME}/profiles/a/gateway.toml")
        );
        // Could not ask: said, as a note that does not fail the run.
        let unknown = Standing::CouldNotAsk {
            message: "Could not ask (no answer within 3 s); not checked.".into(),
            fix: "curl".into(),
        };
        let f = platform_refuses(&standing(unknown).homes);
        assert_eq!(ids(&f), [("HSV020", Severity::Info)]);
        assert!(f[0].message.contains("no answer within 3 s"), "{f:?}");
        // Near miss: nothing wrong.
        assert!(platform_refuses(&standing(Standing::Fine).homes).is_empty());
    }

    #[test]
    fn neither_is_fixed_and_each_says_why() {
        let mut s = waiting(SystemTime::now());
        s.homes.profiles[0].standing = vec![("tg".into(), blocked("h.example"))];
        let p = planned(&s);
        assert!(p.fixes.is_empty(), "{p:?}");
        let why: Vec<_> = p.skipped.iter().map(|k| (k.id, k.why.as_str())).collect();
        assert!(
            why.iter()
                .any(|(id, w)| *id == "HSV019" && w.contains("a new login needs a person")),
            "{why:?}"
        );
        assert!(why.iter().any(|(id, _)| *id == "HSV020"), "{why:?}");
        let login = p.skipped.iter().find(|k| k.id == "HSV019").unwrap();
        assert_eq!(
            login.manual,
            "hermes-svc login chat --profile a --adapter wx"
        );
    }
}

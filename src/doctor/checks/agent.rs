//! Findings about the agent behind the gateway, from the gateway's state file: messages that
//! have waited for the agent longer than the profile's `[agent] idle-alarm`. The gateway is
//! healthy and receives everything, and its manager sees nothing wrong, but nobody answers.
//! Like the outbox's, this does not depend on the manager, and launchd's doctor runs it too.

use std::time::SystemTime;

use crate::doctor::checks::{profile_finding, Check};
use crate::doctor::homes::Homes;
use crate::doctor::{Finding, Severity};
use crate::gateway::health::short;

/// HSV023: the agent has not taken a message that waited longer than `idle-alarm`.
pub(crate) const AGENT_IDLE: Check<Homes> = Check {
    id: "HSV023",
    find: agent_idle,
    fix: |p, f| {
        p.skip(
            f,
            "the agent is a program of its own: start it, or see why it stopped",
        )
    },
};

fn agent_idle(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        let (Some(state), Some(alarm)) = (&p.state, p.agent_idle_alarm) else {
            continue;
        };
        if state.is_stale(s.now) {
            continue;
        }
        let Some(agent) = &state.agent else { continue };
        let Some(waited) = agent
            .oldest_waiting
            .as_deref()
            .and_then(|t| humantime::parse_rfc3339(t).ok())
            .and_then(|t| s.now.duration_since(t).ok())
        else {
            continue;
        };
        if waited < alarm {
            continue;
        }
        let there = if agent.connected {
            "it is connected but has not answered"
        } else {
            "it is not connected"
        };
        let last = agent.last_taken.as_ref().map_or_else(
            || "it has taken no message since the gateway started".to_owned(),
            |t| {
                let ago = humantime::parse_rfc3339(&t.at)
                    .ok()
                    .and_then(|at| SystemTime::now().duration_since(at).ok())
                    .map_or_else(|| "?".into(), short);
                format!("it took its last message {ago} ago")
            },
        );
        let fix = match agent.kind.as_str() {
            "hermes-relay" => format!(
                "start the Hermes gateway with GATEWAY_RELAY_URL=http://{} (docs/agent.md), and read its log",
                agent.endpoint.trim_start_matches("ws://").trim_end_matches("/relay")
            ),
            _ => format!("start the agent's API server at {} (docs/agent.md), and read its log", agent.endpoint),
        };
        out.push(profile_finding(
            AGENT_IDLE.id,
            Severity::Warn,
            p,
            format!(
                "A message has waited {} for the agent ({} {}, idle-alarm {}): {there}; {last}",
                short(waited),
                agent.kind,
                agent.endpoint,
                short(alarm)
            ),
            fix,
        ));
    }
    out
}

/// HSV024: a Hermes gateway of the profile connects a platform the profile's gateway holds.
pub(crate) const HERMES_HOLDS_PLATFORM: Check<Homes> = Check {
    id: "HSV024",
    find: hermes_holds_platform,
    fix: |p, f| {
        p.skip(
            f,
            "Hermes's configuration is a person's: they remove the credential, then restart it",
        )
    },
};

fn hermes_holds_platform(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        for seen in &p.hermes {
            for platform in seen.platforms() {
                let adapters: Vec<&str> = p
                    .held
                    .iter()
                    .filter(|(_, kind)| *kind == platform)
                    .map(|(name, _)| name.as_str())
                    .collect();
                if adapters.is_empty() {
                    continue;
                }
                let vars: Vec<&str> = seen
                    .env_credentials
                    .iter()
                    .filter(|(p, _)| p == platform)
                    .map(|(_, v)| v.as_str())
                    .collect();
                let running = seen
                    .connecting
                    .iter()
                    .find(|(p, _)| p == platform)
                    .map(|(_, state)| state.as_str());
                let keys: Vec<&str> = seen
                    .config_credentials
                    .iter()
                    .filter(|(p, _)| p == platform)
                    .map(|(_, k)| k.as_str())
                    .collect();
                // Where the credential is, file by file: what to remove.
                let places: Vec<String> = [(".env", &vars), ("config.yaml", &keys)]
                    .into_iter()
                    .filter(|(_, found)| !found.is_empty())
                    .map(|(file, found)| {
                        format!("{} in {}", found.join(", "), seen.home.join(file).display())
                    })
                    .collect();
                let how = match running {
                    Some(state) => format!(
                        "its running gateway (pid {}) reports {platform} {state}",
                        seen.pid.unwrap_or(0)
                    ),
                    None => format!(
                        "{} makes it connect {platform} when it starts",
                        places.join(" and ")
                    ),
                };
                let fix = if places.is_empty() {
                    format!(
                        "remove the {platform} credential from that Hermes's environment and config, and restart it; it reaches {platform} through the gateway's [agent] (docs/agent.md)"
                    )
                } else {
                    format!(
                        "remove {}, and restart that Hermes; it reaches {platform} through the gateway's [agent] (docs/agent.md)",
                        places.join(" and ")
                    )
                };
                out.push(profile_finding(
                    HERMES_HOLDS_PLATFORM.id,
                    Severity::Error,
                    p,
                    format!(
                        "The Hermes agent at {} connects {platform} itself, which adapter {} of this gateway holds: {how}; two sessions of one bot answer twice or take each other's messages",
                        seen.home.display(),
                        adapters.join(", ")
                    ),
                    fix,
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::doctor::checks::fixtures::*;
    use crate::gateway::state_file::{AgentHealth, StateFile};

    fn with_agent(connected: bool, waited: Option<Duration>) -> Homes {
        let now = SystemTime::now();
        let at = |d: Duration| humantime::format_rfc3339_millis(now - d).to_string();
        let mut p = profile("coder");
        p.agent_idle_alarm = Some(Duration::from_secs(15 * 60));
        p.state = Some(StateFile {
            updated_at: at(Duration::ZERO),
            pid: 4242,
            profile: "coder".into(),
            stale_after_ms: 10_000,
            summary: "1/1 adapters ready".into(),
            components: vec![],
            outbox: None,
            deliveries: vec![],
            api: None,
            cluster: None,
            reload: None,
            access: None,
            agent: Some(AgentHealth {
                kind: "hermes-relay".into(),
                endpoint: "ws://127.0.0.1:8765/relay".into(),
                connected,
                since: at(Duration::from_secs(3600)),
                last_taken: None,
                oldest_waiting: waited.map(at),
                last_error: None,
            }),
        });
        let mut s = homes(&[], vec![p]);
        s.now = now;
        s
    }

    #[test]
    fn hsv023_messages_waiting_longer_than_the_alarm() {
        let found = agent_idle(&with_agent(false, Some(Duration::from_secs(20 * 60))));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Warn);
        assert!(
            found[0].message.contains("waited 20m"),
            "{}",
            found[0].message
        );
        assert!(
            found[0].message.contains("not connected"),
            "{}",
            found[0].message
        );
        assert!(
            found[0]
                .fix
                .contains("GATEWAY_RELAY_URL=http://127.0.0.1:8765"),
            "{}",
            found[0].fix
        );
        assert!(agent_idle(&with_agent(true, Some(Duration::from_secs(60)))).is_empty());
        assert!(agent_idle(&with_agent(true, None)).is_empty());
    }

    fn with_hermes(seen: crate::agent::hermes::Seen) -> Homes {
        let mut p = profile("coder");
        p.held = vec![("tg".into(), "telegram"), ("dc".into(), "discord")];
        p.hermes = vec![seen];
        homes(&[], vec![p])
    }

    #[test]
    fn hsv024_a_hermes_that_holds_a_platform_of_the_gateway() {
        use crate::agent::hermes::Seen;
        let home = std::path::PathBuf::from("/h/profiles/coder/agent/hermes");
        let by_env = with_hermes(Seen {
            home: home.clone(),
            env_credentials: vec![("telegram".into(), "TELEGRAM_BOT_TOKEN".into())],
            ..Seen::default()
        });
        let found = hermes_holds_platform(&by_env);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Error);
        assert!(
            found[0].message.contains("adapter tg"),
            "{}",
            found[0].message
        );
        assert!(
            found[0]
                .fix
                .contains("remove TELEGRAM_BOT_TOKEN in /h/profiles/coder/agent/hermes/.env"),
            "{}",
            found[0].fix
        );
        let running = with_hermes(Seen {
            home: home.clone(),
            connecting: vec![("discord".into(), "connected".into())],
            pid: Some(77),
            ..Seen::default()
        });
        let found = hermes_holds_platform(&running);
        assert!(
            found[0]
                .message
                .contains("pid 77) reports discord connected"),
            "{}",
            found[0].message
        );
        // A token in Hermes's config.yaml, beside one in its .env: both named.
        let by_config = with_hermes(Seen {
            home: home.clone(),
            env_credentials: vec![("telegram".into(), "TELEGRAM_BOT_TOKEN".into())],
            config_credentials: vec![("telegram".into(), "platforms.telegram.token".into())],
            ..Seen::default()
        });
        let found = hermes_holds_platform(&by_config);
        assert_eq!(found.len(), 1);
        assert!(
            found[0].fix.contains(
                "remove TELEGRAM_BOT_TOKEN in /h/profiles/coder/agent/hermes/.env and platforms.telegram.token in /h/profiles/coder/agent/hermes/config.yaml"
            ),
            "{}",
            found[0].fix
        );
        // A platform the gateway does not hold is Hermes's business.
        let other = with_hermes(Seen {
            home,
            env_credentials: vec![("slack".into(), "SLACK_BOT_TOKEN".into())],
            ..Seen::default()
        });
        assert!(hermes_holds_platform(&other).is_empty());
    }
}

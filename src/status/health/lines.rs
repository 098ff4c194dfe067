//! The lines of a health section, one per part of a gateway's report: a component, the
//! outbox, the agent API, the agent link, a cron job's last delivery. Every string from the
//! state file goes through [`visible`], so none can drive the reader's terminal.

use std::time::SystemTime;

use crate::gateway::outbox::Stats;
use crate::gateway::state_file::{
    AccessHealth, AgentHealth, ApiCondition, ApiHealth, ClusterHealth, ComponentState, Delivery,
};
use crate::safe_text::visible;

/// One line on a component: its state (marked when it, or the whole snapshot, is not
/// current), its last proof of life, reconnects and last error.
pub(super) fn component_line(c: &ComponentState, snapshot_stale: bool) -> String {
    let state = visible(&c.state);
    let state = if snapshot_stale {
        format!("{state} (stale)")
    } else if !c.fresh {
        format!("{state} STALE")
    } else {
        state.into_owned()
    };
    let mut line = format!(
        "{:<10} {:<9} {:<16} last proof of life {} ago, reconnects {}",
        visible(&c.name),
        visible(&c.kind),
        state,
        crate::gateway::health::short(std::time::Duration::from_millis(c.last_beat_age_ms)),
        c.reconnects
    );
    if let Some(e) = &c.last_error {
        line.push_str(&format!(", last error: {}", visible(e)));
    }
    line
}

/// One line on the gateway's place in its cluster: active, with its lease's age, or standby,
/// with who is active (or why it cannot tell).
pub(super) fn cluster_line(c: &ClusterHealth) -> String {
    let ttl = crate::gateway::health::short(std::time::Duration::from_millis(c.lease_ttl_ms));
    match (c.role.as_str(), c.lease_age_ms) {
        ("active", Some(age)) => format!(
            "cluster    {}: active, lease renewed {:.1}s ago (ttl {ttl})",
            visible(&c.node),
            age as f64 / 1000.0,
        ),
        _ => format!(
            "cluster    {}: {}",
            visible(&c.node),
            visible(c.standing.as_deref().unwrap_or(&c.role)),
        ),
    }
}

/// One line on a delivering cron job: how its last delivery ended, or that it has none yet.
pub(super) fn delivery_line(d: &Delivery) -> String {
    let last = match (&d.message, d.state) {
        (Some(id), Some(state)) => {
            let state = serde_json::to_value(state).ok();
            let state = state.as_ref().and_then(|v| v.as_str()).unwrap_or("?");
            let at = d.updated_at.as_deref().unwrap_or("?");
            let mut text = format!("{state} at {} (message {})", visible(at), visible(id));
            if let Some(e) = &d.last_error {
                text.push_str(&format!(", {}", visible(e)));
            }
            text
        }
        _ => "none yet".to_owned(),
    };
    format!("cron {:<10} last delivery: {last}", visible(&d.job))
}

/// One line on the agent API: how many connections, and in capitals when it could not take
/// a new one at once (saturated) or at all (an accept failing).
pub(super) fn api_line(api: &ApiHealth) -> String {
    let open = match api.long_polls {
        0 => format!("{}/{} connections", api.connections, api.max_connections),
        n => format!(
            "{}/{} connections ({n} long-polls)",
            api.connections, api.max_connections
        ),
    };
    let shed = match api.shed {
        0 => String::new(),
        n => format!(", {n} idle or slow ones closed to admit new ones since the start"),
    };
    match api.state {
        ApiCondition::Serving => format!("api        serving, {open}{shed}"),
        ApiCondition::Saturated => {
            format!("api        SATURATED: every place taken in the last seconds, {open}{shed}")
        }
        ApiCondition::AcceptFailing => format!(
            "api        NOT ACCEPTING connections: {}, {open}",
            visible(api.last_error.as_deref().unwrap_or("unknown error"))
        ),
        ApiCondition::Unknown => format!("api        {open}{shed}"),
    }
}

/// One line on the agent link: there or not and since when, what it took last, and the age
/// of the oldest message waiting for it.
pub(super) fn agent_line(a: &AgentHealth, now: SystemTime) -> String {
    let ago = |at: &str| {
        humantime::parse_rfc3339(at)
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .map_or_else(|| "?".to_owned(), crate::gateway::health::short)
    };
    let state = if a.connected {
        "connected"
    } else {
        "NOT CONNECTED"
    };
    let mut line = format!(
        "agent      {} {}: {state} for {}",
        visible(&a.kind),
        visible(&a.endpoint),
        ago(&a.since)
    );
    match &a.last_taken {
        Some(t) => line.push_str(&format!(", last message taken {} ago", ago(&t.at))),
        None => line.push_str(", no message taken yet"),
    }
    if let Some(oldest) = &a.oldest_waiting {
        line.push_str(&format!(", oldest waiting {} old", ago(oldest)));
    }
    if let Some(e) = &a.last_error {
        line.push_str(&format!(" (last error: {})", visible(e)));
    }
    line
}

/// One line on the access rules: how many chat messages were admitted and refused, and the
/// refusals by rule, most first.
pub(super) fn access_line(a: &AccessHealth) -> String {
    let admitted: u64 = a.admitted.values().sum();
    let refused: u64 = a.refused.values().sum();
    let mut line = format!("access     {admitted} admitted, {refused} refused");
    let mut by_rule: Vec<(&String, &u64)> = a.refused.iter().collect();
    by_rule.sort_by(|x, y| y.1.cmp(x.1).then(x.0.cmp(y.0)));
    if !by_rule.is_empty() {
        let each: Vec<String> = by_rule
            .iter()
            .map(|(rule, n)| format!("{} {n}", visible(rule)))
            .collect();
        line.push_str(&format!(" ({})", each.join(", ")));
    }
    line
}

/// One line on the outbox. Messages whose outcome is unknown are said in words: they may or
/// may not have been posted, and nobody should have to find that in a log.
pub(super) fn outbox_line(o: &Stats) -> String {
    if let Some(why) = &o.unavailable {
        return format!(
            "outbox     UNAVAILABLE (nothing is sent; receiving goes on): {}",
            visible(why)
        );
    }
    let mut line = format!("outbox     {} waiting", o.depth);
    if let Some(age) = o.oldest_queued_secs {
        let age = crate::gateway::health::short(std::time::Duration::from_secs(age));
        line.push_str(&format!(" (oldest {age})"));
    }
    line.push_str(&format!(", {} sent, {} failed", o.sent, o.failed));
    if o.unknown > 0 {
        line.push_str(&format!(
            ", {} UNKNOWN (sent without an answer; may or may not be posted)",
            o.unknown
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_line_says_the_role_and_the_active() {
        let mut c = ClusterHealth {
            role: "active".into(),
            node: "server-1".into(),
            active: Some("server-1 since 2026-12-03T09:00:00Z".into()),
            lease_age_ms: Some(1_200),
            lease_ttl_ms: 10_000,
            standing: None,
            name_clash: false,
            peers: vec![],
        };
        assert_eq!(
            cluster_line(&c),
            "cluster    server-1: active, lease renewed 1.2s ago (ttl 10s)"
        );
        c.role = "standby".into();
        c.node = "laptop".into();
        c.lease_age_ms = None;
        c.standing = Some("standby (active: server-1 since 2026-12-03T09:00:00Z)".into());
        assert_eq!(
            cluster_line(&c),
            "cluster    laptop: standby (active: server-1 since 2026-12-03T09:00:00Z)"
        );
    }

    #[test]
    fn the_agent_line_says_whether_it_is_there_and_what_waits() {
        let now = humantime::parse_rfc3339("2026-12-03T09:10:00Z").unwrap();
        let mut a = AgentHealth {
            kind: "hermes-relay".into(),
            endpoint: "ws://127.0.0.1:8765/relay".into(),
            connected: false,
            since: "2026-12-03T09:00:00.000Z".into(),
            last_taken: None,
            oldest_waiting: Some("2026-12-03T09:05:00.000Z".into()),
            last_error: Some("refused a dial: the token has expired".into()),
        };
        assert_eq!(
            agent_line(&a, now),
            "agent      hermes-relay ws://127.0.0.1:8765/relay: NOT CONNECTED for 10m, no message \
             taken yet, oldest waiting 5m old (last error: refused a dial: the token has expired)"
        );
        a.connected = true;
        a.oldest_waiting = None;
        a.last_error = None;
        a.last_taken = Some(crate::gateway::state_file::Taken {
            event: "e1".into(),
            at: "2026-12-03T09:09:48.000Z".into(),
        });
        assert_eq!(
            agent_line(&a, now),
            "agent      hermes-relay ws://127.0.0.1:8765/relay: connected for 10m, last message \
             taken 12s ago"
        );
    }

    #[test]
    fn the_api_line_says_when_it_could_not_take_a_connection() {
        let api = |state, shed, last_error: Option<&str>| ApiHealth {
            state,
            connections: 512,
            max_connections: 512,
            long_polls: 0,
            shed,
            last_error: last_error.map(str::to_owned),
        };
        assert_eq!(
            api_line(&api(ApiCondition::Serving, 0, None)),
            "api        serving, 512/512 connections"
        );
        let polls = ApiHealth {
            long_polls: 500,
            ..api(ApiCondition::Serving, 0, None)
        };
        assert_eq!(
            api_line(&polls),
            "api        serving, 512/512 connections (500 long-polls)"
        );
        assert_eq!(
            api_line(&api(ApiCondition::Saturated, 7, None)),
            "api        SATURATED: every place taken in the last seconds, 512/512 connections, \
             7 idle or slow ones closed to admit new ones since the start"
        );
        assert_eq!(
            api_line(&api(
                ApiCondition::AcceptFailing,
                0,
                Some("Too many open files\x1b[2J")
            )),
            "api        NOT ACCEPTING connections: Too many open files\\x1b[2J, 512/512 connections"
        );
    }
}

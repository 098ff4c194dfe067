//! Staleness that a state file cannot fake: `status` never shows a unit whose gateway is not
//! running as "connected", whatever its `state/gateway.json` claims (a timestamp in the year
//! 2999, a deadline of 584 million years, or a perfectly current-looking snapshot). Profile
//! names start with `fh`.

use crate::harness::Manager;

fn forged_state(updated_at: &str, pid: u32, stale_after_ms: u64) -> String {
    serde_json::json!({
        "updated_at": updated_at,
        "pid": pid,
        "profile": "fhdead",
        "stale_after_ms": stale_after_ms,
        "summary": "1/1 adapters ready",
        "components": [{
            "name": "qq", "kind": "qqbot", "state": "connected", "fresh": true,
            "last_beat_age_ms": 10, "deadline_ms": 66000, "reconnects": 0, "attempts": 1,
            "last_error": null, "outage_ms": null
        }]
    })
    .to_string()
}

#[test]
fn a_forged_state_file_never_shows_a_dead_unit_as_connected() {
    let m = Manager::boot();
    m.hermes_ok(&["install", "--profile", "fhdead", "--no-start"]);
    let state = m.profile_home("fhdead").join("state/gateway.json");
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    for (what, updated_at, stale_after_ms) in [
        (
            "from the year 2999 with a huge deadline",
            "2999-01-01T00:00:00.000Z",
            u64::MAX,
        ),
        ("that looks current", now.as_str(), 16_000),
    ] {
        // Written by a process that is alive (this test), which proves nothing either.
        std::fs::write(
            &state,
            forged_state(updated_at, std::process::id(), stale_after_ms),
        )
        .unwrap();

        let text = m.hermes_ok(&["status", "--profile", "fhdead"]);
        assert!(
            text.contains(&format!("health: STALE snapshot from {updated_at}"))
                && text.contains("the unit is inactive, so no gateway is running"),
            "a state file {what}:\n{text}"
        );
        assert!(text.contains("connected (stale)"), "{what}:\n{text}");
        assert!(
            !text
                .lines()
                .any(|l| l.contains("connected") && !l.contains("stale")),
            "a state file {what} shows as connected:\n{text}"
        );

        let report: serde_json::Value =
            serde_json::from_str(&m.hermes_ok(&["status", "--profile", "fhdead", "--json"]))
                .unwrap();
        let health = &report["units"][0]["health"];
        assert_eq!(health["stale"], true, "{what}: {health}");
        assert_eq!(health["stale_reason"], "not_running", "{what}: {health}");
    }
}

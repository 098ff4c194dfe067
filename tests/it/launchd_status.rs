//! `status` under launchd shows each job's gateway health (components, outbox, agent API, cron
//! deliveries) as under systemd, judged by what `launchctl print` says of the job: current only
//! while the job runs with the pid that wrote `state/gateway.json`. The real binary runs with
//! `HERMES_SERVICE_MANAGER=launchd` against the fake `launchctl` of `launchd_cli.rs`, whose
//! loaded jobs all run as [`JOB_PID`].

use serde_json::{json, Value};

use crate::launchd_cli::{Mac, JOB_PID};

/// A gateway's state file for profile `coder`, written now by `pid`: one connected QQ adapter,
/// an outbox with one message of unknown outcome, the agent API, and a cron job's delivery.
fn write_state(mac: &Mac, pid: u32) {
    let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let state = json!({
        "updated_at": now,
        "pid": pid,
        "profile": "coder",
        "stale_after_ms": 16000,
        "summary": "1/1 adapters ready",
        "components": [{
            "name": "qq", "kind": "qqbot", "state": "connected", "fresh": true,
            "last_beat_age_ms": 10, "deadline_ms": 66000, "reconnects": 2, "attempts": 3,
            "last_error": null, "outage_ms": null
        }],
        "outbox": {
            "depth": 3, "oldest_queued_secs": 42, "sent": 17, "failed": 1, "unknown": 1
        },
        "deliveries": [{
            "job": "digest", "message": "m-7", "state": "sent",
            "updated_at": "2026-03-01T10:00:00.000Z", "last_error": null
        }],
        "api": {
            "state": "serving", "connections": 3, "max_connections": 512, "long_polls": 1,
            "shed": 0, "last_error": null
        }
    });
    let path = mac
        .home
        .path()
        .join(".hermes/profiles/coder/state/gateway.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, state.to_string()).unwrap();
}

fn status_json(mac: &Mac) -> Value {
    let report: Value = serde_json::from_str(&mac.ok(&["status", "--json"])).unwrap();
    let agents = report.as_array().unwrap();
    assert_eq!(agents.len(), 1, "{report:#}");
    agents[0].clone()
}

#[test]
fn a_running_jobs_own_snapshot_is_shown_with_its_components_outbox_api_and_deliveries() {
    let mac = Mac::new();
    mac.ok(&["install", "--profile", "coder"]);
    write_state(&mac, JOB_PID);

    let text = mac.ok(&["status"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("coder (ai.hermes.gateway.coder): running, pid 4242"),
        "{text}"
    );
    let section: Vec<&str> = lines[1..].iter().map(|l| l.trim_start()).collect();
    assert_eq!(section.len(), 4, "{text}");
    assert!(
        section[0].starts_with("qq         qqbot     connected        last proof of life ")
            && section[0].ends_with(", reconnects 2"),
        "{text}"
    );
    assert_eq!(
        section[1],
        "outbox     3 waiting (oldest 42s), 17 sent, 1 failed, 1 UNKNOWN (sent without an answer; may or may not be posted)",
        "{text}"
    );
    assert_eq!(
        section[2], "api        serving, 3/512 connections (1 long-polls)",
        "{text}"
    );
    assert_eq!(
        section[3], "cron digest     last delivery: sent at 2026-03-01T10:00:00.000Z (message m-7)",
        "{text}"
    );
    assert!(!text.contains("STALE") && !text.contains("stale"), "{text}");
    // Indented as under systemd, under the row it belongs to.
    assert!(
        lines[1..].iter().all(|l| l.starts_with(&" ".repeat(17))),
        "{text}"
    );

    let agent = status_json(&mac);
    let health = &agent["health"];
    assert_eq!(agent["health_error"], Value::Null, "{agent:#}");
    assert_eq!(health["stale"], false, "{health:#}");
    assert_eq!(health["stale_reason"], Value::Null, "{health:#}");
    assert_eq!(health["pid"], JOB_PID, "{health:#}");
    assert_eq!(health["summary"], "1/1 adapters ready", "{health:#}");
    assert_eq!(health["components"][0]["name"], "qq", "{health:#}");
    assert_eq!(health["components"][0]["state"], "connected", "{health:#}");
    assert_eq!(
        health["outbox"],
        json!({"depth": 3, "oldest_queued_secs": 42, "sent": 17, "failed": 1, "unknown": 1}),
        "{health:#}"
    );
    assert_eq!(health["api"]["state"], "serving", "{health:#}");
    assert_eq!(health["deliveries"][0]["job"], "digest", "{health:#}");
    assert_eq!(health["deliveries"][0]["state"], "sent", "{health:#}");
    // The fields launchd's status always had are still there.
    assert_eq!(agent["state"], "running", "{agent:#}");
    assert_eq!(agent["pid"], JOB_PID, "{agent:#}");
}

#[test]
fn a_snapshot_the_jobs_process_did_not_write_or_of_a_job_not_loaded_is_stale() {
    let mac = Mac::new();
    mac.ok(&["install", "--profile", "coder"]);
    // Current by its clock, but another process wrote it: not the job's gateway.
    write_state(&mac, JOB_PID + 1);

    let text = mac.ok(&["status", "--profile", "coder"]);
    assert!(
        text.contains(&format!(
            "it was written by PID {}, not by the job's PID {JOB_PID}; states below are not current",
            JOB_PID + 1
        )),
        "{text}"
    );
    assert!(text.contains("connected (stale)"), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.contains("connected") && !l.contains("stale")),
        "a snapshot another process wrote shows as connected:\n{text}"
    );
    // The outbox is still shown: its numbers are the last the gateway wrote.
    assert!(text.contains("outbox     3 waiting"), "{text}");
    let health = &status_json(&mac)["health"];
    assert_eq!(health["stale"], true, "{health:#}");
    assert_eq!(health["stale_reason"], "other_process", "{health:#}");

    // Its own pid, but the job is no longer loaded: no gateway of its runs.
    write_state(&mac, JOB_PID);
    mac.ok(&["stop", "--profile", "coder"]);
    let text = mac.ok(&["status"]);
    assert!(
        text.starts_with("coder (ai.hermes.gateway.coder): not loaded\n"),
        "{text}"
    );
    assert!(
        text.contains("the job is not loaded, so no gateway is running"),
        "{text}"
    );
    assert!(text.contains("connected (stale)"), "{text}");
    let health = &status_json(&mac)["health"];
    assert_eq!(health["stale_reason"], "not_running", "{health:#}");
}

#[test]
fn no_state_file_shows_nothing_and_one_that_cannot_be_read_says_why() {
    let mac = Mac::new();
    mac.ok(&["install", "--profile", "coder"]);
    let text = mac.ok(&["status"]);
    assert_eq!(text.lines().count(), 1, "{text}");
    let agent = status_json(&mac);
    assert_eq!(agent["health"], Value::Null, "{agent:#}");
    assert_eq!(agent["health_error"], Value::Null, "{agent:#}");

    // A symlink is never followed: the section says so instead of showing its target.
    write_state(&mac, JOB_PID);
    let state = mac.home.path().join(".hermes/profiles/coder/state");
    std::fs::rename(state.join("gateway.json"), state.join("elsewhere.json")).unwrap();
    std::os::unix::fs::symlink("elsewhere.json", state.join("gateway.json")).unwrap();
    let text = mac.ok(&["status"]);
    assert!(text.contains("health: not shown: "), "{text}");
    assert!(!text.contains("connected"), "{text}");
    let agent = status_json(&mac);
    assert_eq!(agent["health"], Value::Null, "{agent:#}");
    assert!(
        agent["health_error"]
            .as_str()
            .unwrap()
            .contains("gateway.json"),
        "{agent:#}"
    );
}

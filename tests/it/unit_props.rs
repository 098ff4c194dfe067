//! A unit's properties, as `Manager::show` returns them, read for assertions: the few that
//! tests decide on, and a one-line view of the rest for their failure messages.

use std::collections::HashMap;

pub fn get<'a>(props: &'a HashMap<String, String>, key: &str) -> &'a str {
    props.get(key).map(String::as_str).unwrap_or("")
}

pub fn n_restarts(props: &HashMap<String, String>) -> u64 {
    get(props, "NRestarts").parse().unwrap_or(u64::MAX)
}

pub fn main_pid(props: &HashMap<String, String>) -> u32 {
    get(props, "MainPID").parse().unwrap_or(0)
}

pub fn is_running(props: &HashMap<String, String>) -> bool {
    get(props, "ActiveState") == "active" && get(props, "SubState") == "running"
}

/// A one-line view of a unit for assertion messages.
pub fn brief(props: &HashMap<String, String>) -> String {
    [
        "ActiveState",
        "SubState",
        "Result",
        "MainPID",
        "NRestarts",
        "ExecMainStatus",
        "StatusText",
    ]
    .iter()
    .map(|k| format!("{k}={}", get(props, k)))
    .collect::<Vec<_>>()
    .join(" ")
}

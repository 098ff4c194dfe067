//! Test-only fault hooks, compiled out of release builds.
//!
//! The acceptance tests need a component whose state machine is genuinely stuck (not merely
//! disconnected) inside a real gateway under a real systemd. `HERMES_TEST_FAULT=wedge:NAME`
//! makes component NAME hang forever at its next step. In release builds this always says no,
//! so no environment variable can wedge a production gateway.

/// Should component `name` hang now?
#[cfg(debug_assertions)]
pub fn wedged(name: &str) -> bool {
    std::env::var("HERMES_TEST_FAULT").is_ok_and(|spec| {
        spec.split(',')
            .any(|f| f.strip_prefix("wedge:") == Some(name))
    })
}

#[cfg(not(debug_assertions))]
pub fn wedged(_name: &str) -> bool {
    false
}

/// Hang forever if `name` is wedged: the task stops making progress but keeps its resources,
/// exactly like a deadlocked state machine.
pub async fn hang_if_wedged(name: &str) {
    if wedged(name) {
        tracing::warn!(component = name, "test fault: wedged");
        std::future::pending::<()>().await;
    }
}

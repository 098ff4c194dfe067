//! A component's task as the run supervises it: a panic is that component's own, named
//! failure, seen at once.
//!
//! A panicking task only shows up as a `JoinError` naming a task id, and an adapter that
//! panics while it connects leaves its state at `connecting`, so the start waited out its
//! whole ready deadline (30 s) before anything noticed, and then could not say which
//! component it was. Each task is therefore run inside [`supervised`]: the panic is caught
//! where the component's name and heartbeat are known, the heartbeat enters `crashed` with
//! the panic's message (which `STATUS=`, the state file and `status` show), and the run gets
//! an ordinary exit, [`AdapterExit::Crashed`], which it turns into a restart (exit 75).

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use crate::gateway::adapter::AdapterExit;
use crate::gateway::health::{Heartbeat, State};

/// Run `work`, component `name`'s task, turning a panic into [`AdapterExit::Crashed`].
pub(crate) async fn supervised<F>(
    name: String,
    heartbeat: Option<Heartbeat>,
    work: F,
) -> (String, AdapterExit)
where
    F: Future<Output = AdapterExit>,
{
    // Unwind safety: what the task shared (the registry, the spool, the outbox) is behind
    // locks that recover from poisoning, and the run stops to restart anyway.
    match AssertUnwindSafe(work).catch_unwind().await {
        Ok(exit) => (name, exit),
        Err(panic) => {
            let what = panic_message(&*panic);
            if let Some(hb) = heartbeat {
                hb.enter(State::Crashed);
                hb.error(format!("panicked: {what}"));
            }
            tracing::error!(component = %name, panic = %what, "component panicked");
            (name, AdapterExit::Crashed(format!("panicked: {what}")))
        }
    }
}

/// The text a panic carries (`panic!("...")` and `.expect("...")` give a `&str` or a
/// `String`), cut to one short line.
fn panic_message(panic: &(dyn Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    crate::safe_text::clip(text, 300)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::health::{ComponentKind, Registry};
    use std::time::Duration;

    #[tokio::test]
    async fn a_panic_is_the_components_named_failure_and_its_state() {
        let registry = Registry::new();
        let hb = registry.register(
            "tg",
            ComponentKind::Adapter("websocket"),
            Duration::from_secs(9),
        );
        let wait: Option<u8> = std::hint::black_box(None);
        let (name, exit) = supervised("tg".into(), Some(hb), async move {
            wait.expect("no retry_after");
            AdapterExit::Shutdown
        })
        .await;
        assert_eq!(name, "tg");
        assert!(
            matches!(&exit, AdapterExit::Crashed(m) if m == "panicked: no retry_after"),
            "{exit:?}"
        );
        let c = &registry.snapshot().components[0];
        assert_eq!(c.state, State::Crashed);
        assert_eq!(c.last_error.as_deref(), Some("panicked: no retry_after"));
    }
}

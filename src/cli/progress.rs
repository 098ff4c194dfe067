//! What `start`, `restart` and `install` show while systemd runs their job: on a terminal, a
//! spinner with the gateway's live `STATUS=` line, so a person sees what a slow start waits
//! for; nothing at all under `--json` or when either output is not a terminal.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::safe_text::visible;
use crate::systemd::JobWatch;

/// A spinner on stderr, drawn from the first status on and cleared when the wait is over.
struct Spinner(Mutex<Option<ProgressBar>>);

impl JobWatch for Spinner {
    fn status(&self, unit: &str, status: &str) {
        let mut bar = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let bar = bar.get_or_insert_with(|| {
            let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            b.enable_steady_tick(Duration::from_millis(120));
            b
        });
        let status = if status.is_empty() {
            "waiting for READY=1".into()
        } else {
            visible(status)
        };
        bar.set_message(format!("{unit}: {status}"));
    }

    fn over(&self) {
        if let Some(bar) = self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}

/// The watcher for a command's job waits: a spinner when a person is watching (both outputs
/// are terminals and no `--json`), else none.
pub(super) fn watcher(json: bool) -> Option<Box<dyn JobWatch>> {
    let person = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
    (person && !json).then(|| Box::new(Spinner(Mutex::new(None))) as Box<dyn JobWatch>)
}

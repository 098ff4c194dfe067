//! The QR logins a test scripts: the statuses `get_qrcode_status` reports, one step per
//! request, and the codes handed out. The last step repeats, and the script runs on across
//! codes, so after an `expired` the next code continues where the old one stopped.

use std::collections::HashMap;

/// One step of the QR login script: the status the next `get_qrcode_status` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QrStep {
    Wait,
    /// `scaned`.
    Scanned,
    /// `scaned_but_redirect` with `redirect_host`.
    Redirect,
    /// The code is dead: later polls of it answer `expired` without consuming steps.
    Expired,
    /// A newly issued bot token and the account's ids.
    Confirmed,
}

/// What a test gets unless it sets a script.
pub(crate) const DEFAULT_SCRIPT: [QrStep; 3] = [QrStep::Wait, QrStep::Scanned, QrStep::Confirmed];

/// Where an issued code stands.
#[derive(Clone)]
pub(crate) enum Code {
    Live,
    Expired,
    Confirmed(String),
}

pub(crate) struct QrLogins {
    script: Vec<QrStep>,
    /// Steps consumed so far, across codes.
    next: usize,
    pub(crate) codes: HashMap<String, Code>,
}

impl Default for QrLogins {
    fn default() -> Self {
        QrLogins {
            script: DEFAULT_SCRIPT.to_vec(),
            next: 0,
            codes: HashMap::new(),
        }
    }
}

impl QrLogins {
    /// Replaces the script and starts it over; an empty script means the default one.
    pub(crate) fn set_script(&mut self, steps: Vec<QrStep>) {
        self.script = if steps.is_empty() {
            DEFAULT_SCRIPT.to_vec()
        } else {
            steps
        };
        self.next = 0;
    }

    pub(crate) fn take_step(&mut self) -> QrStep {
        let last = self.script.len().saturating_sub(1);
        let step = self
            .script
            .get(self.next.min(last))
            .copied()
            .unwrap_or(QrStep::Wait);
        self.next = self.next.saturating_add(1);
        step
    }
}

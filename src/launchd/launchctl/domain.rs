//! Which launchd domain a user's LaunchAgent belongs in: `gui/<uid>` when the user has a login
//! session at the screen, `user/<uid>` when there is none (a Mac reached only over ssh).

use std::fmt;
use std::path::Path;
use std::time::Duration;

use super::error::LaunchctlError;
use super::run;

/// A per-user launchd domain, as launchctl(1) names it.
///
/// launchctl(1): `gui/<uid>` is the domain of the user's login at the GUI; `user/<uid>` is the
/// user's background domain, which "may exist independently of a logged-in user". A headless Mac
/// (rebooted, reached over ssh, nobody at the screen) has no `gui/<uid>`, and bootstrapping into
/// it fails with 125, "Domain does not support specified action" (duh17/oppi#31 and #38).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Domain {
    /// `gui/<uid>`: the user's Aqua login session.
    Gui(u32),
    /// `user/<uid>`: the user's background domain, there with or without a login.
    User(u32),
}

impl Domain {
    /// The service target launchctl takes for `label` in this domain, `gui/501/<label>`.
    pub fn target(&self, label: &str) -> String {
        format!("{self}/{label}")
    }

    /// The same user's other domain: where a job installed from the other kind of session
    /// (over ssh, then at the screen, or the reverse) is loaded.
    pub fn other(&self) -> Domain {
        match *self {
            Domain::Gui(uid) => Domain::User(uid),
            Domain::User(uid) => Domain::Gui(uid),
        }
    }

    pub fn uid(&self) -> u32 {
        match *self {
            Domain::Gui(uid) | Domain::User(uid) => uid,
        }
    }

    /// Reads `gui/501` or `user/501`, so a person or a test can name the domain instead of
    /// having it detected.
    pub fn parse(text: &str) -> Option<Domain> {
        let (kind, uid) = text.split_once('/')?;
        if uid.is_empty() || !uid.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let uid = uid.parse().ok()?;
        match kind {
            "gui" => Some(Domain::Gui(uid)),
            "user" => Some(Domain::User(uid)),
            _ => None,
        }
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Domain::Gui(uid) => write!(f, "gui/{uid}"),
            Domain::User(uid) => write!(f, "user/{uid}"),
        }
    }
}

/// Exit statuses of `launchctl print gui/<uid>` that mean "this user has no GUI domain": 112,
/// "Could not find domain for user gui: 501" (Wamphyre/macOS_Silverback-Debloater#2), and 125,
/// "Domain does not support specified action", which a headless Mac answers after a reboot
/// (duh17/oppi#38).
const NO_GUI_DOMAIN: [i32; 2] = [112, 125];

/// Picks the domain for `uid` by asking launchd whether `gui/<uid>` exists.
///
/// `launchctl managername` is not the question: it names the session launchctl itself runs in,
/// so an ssh shell says `Background` even while the same user is logged in at the screen, and
/// the job belongs in that login's `gui/<uid>` (where `status` run from Terminal looks for it).
/// `launchctl print gui/<uid>` answers for the user, whatever session asks.
///
/// Any other failure is an error rather than a guess: loading into `user/<uid>` while a GUI
/// domain exists would put a second copy of the job beside one loaded there.
pub async fn detect(program: &Path, uid: u32, timeout: Duration) -> Result<Domain, LaunchctlError> {
    let gui = Domain::Gui(uid);
    let argv = ["print".to_owned(), gui.to_string()];
    let out = run::call(program, &argv, timeout, run::Stdout::Discard).await?;
    match out.code {
        Some(0) => Ok(gui),
        Some(code) if NO_GUI_DOMAIN.contains(&code) => Ok(Domain::User(uid)),
        _ => Err(out.failure(
            program,
            &argv,
            Some(format!(
                "could not tell whether user {uid} has a GUI login session; name the domain \
                 ({gui} or {}) instead of detecting it",
                Domain::User(uid)
            )),
        )),
    }
}

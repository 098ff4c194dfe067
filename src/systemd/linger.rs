//! Whether the user manager outlives the user's sessions (`loginctl enable-linger`).
//!
//! Without linger, a user's units stop at logout and do not start at boot, which looks exactly
//! like "the bot died overnight". The answer comes from logind on the system bus; where there is
//! no system bus (containers, CI), the honest answer is "unknown", never an error.

use serde::Serialize;
use zbus_systemd::login1::{ManagerProxy, UserProxy};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Linger {
    On,
    Off,
    Unknown,
}

impl Linger {
    /// Ask logind about `uid`.
    pub(crate) async fn query(uid: u32) -> Linger {
        async fn ask(uid: u32) -> zbus::Result<bool> {
            use zbus::proxy::CacheProperties;
            let conn = zbus::Connection::system().await?;
            let manager = ManagerProxy::new(&conn).await?;
            let path = manager.get_user(uid).await?;
            // No property cache: its first read is an `AddMatch` and a `GetAll` of the
            // user's every property, where one `Get` answers.
            let user = UserProxy::builder(&conn)
                .path(path)
                .cache_properties(CacheProperties::No)
                .build()
                .await?;
            user.linger().await
        }
        match ask(uid).await {
            Ok(true) => Linger::On,
            Ok(false) => Linger::Off,
            Err(_) => Linger::Unknown,
        }
    }

    /// What to tell a person whose user units may stop at logout.
    pub(crate) fn hint(self, user: &str) -> Option<String> {
        match self {
            Linger::Off => Some(format!(
                "linger is off: units stop at logout and won't start at boot; run `loginctl enable-linger {user}`"
            )),
            Linger::On | Linger::Unknown => None,
        }
    }
}

/// This process's user name (for the `loginctl enable-linger USER` hint), or its uid when
/// the account database has no entry.
pub(crate) fn current_user() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| nix::unistd::getuid().to_string())
}

impl std::fmt::Display for Linger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Linger::On => "on",
            Linger::Off => "off",
            Linger::Unknown => "unknown",
        })
    }
}

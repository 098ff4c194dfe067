//! Hermes's Matrix settings as a `matrix` adapter (docs/research/adopt.md §2.4). The gateway
//! takes an access token and reads unencrypted rooms only: a password login (logging in for
//! the user would make a new device) and end-to-end encryption (those rooms would go silent)
//! are refused.

use std::str::FromStr;

use super::Target;
use crate::hermes_home::HermesHome;
use crate::hermes_home::wing::Wing;

const P: &str = "matrix";

pub(super) fn from_hermes(home: &HermesHome) -> Option<Result<Wing, String>> {
    let mut w = Wing::new(P, &["MATRIX_"]);
    match w.credential(home, "MATRIX_ACCESS_TOKEN", &["token", "access_token"]) {
        Ok(true) => Some(settings(home, w)),
        Ok(false) => match home.setting(P, "MATRIX_PASSWORD", "password") {
            Ok(Some(_)) => Some(Err("Hermes logs in to Matrix with a password (MATRIX_PASSWORD); the gateway takes an access token: log in once (or copy Hermes's device's token), set MATRIX_ACCESS_TOKEN, remove MATRIX_PASSWORD, and run adopt again".to_owned())),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        },
        Err(e) => Some(Err(e)),
    }
}

fn settings(home: &HermesHome, mut w: Wing) -> Result<Wing, String> {
    w.config_credentials_out(home, &["MATRIX_ACCESS_TOKEN", "MATRIX_PASSWORD"])?;
    if home.flag(P, "MATRIX_ENCRYPTION", "encryption")? == Some(true) {
        return Err("Hermes reads encrypted Matrix rooms (MATRIX_ENCRYPTION), which the gateway cannot: those rooms would go silent; turn encryption off for the bot (MATRIX_ENCRYPTION=false) or keep Matrix with Hermes".to_owned());
    }
    let Some(homeserver) = home.setting(P, "MATRIX_HOMESERVER", "homeserver")? else {
        return Err("MATRIX_HOMESERVER is not set; add the homeserver's URL to .env and run adopt again".to_owned());
    };
    let Some(user) = home.setting(P, "MATRIX_USER_ID", "user_id")? else {
        return Err("MATRIX_USER_ID is not set: the gateway knows its own messages by it; add @bot:server to .env and run adopt again".to_owned());
    };
    w.key("homeserver", homeserver.trim_end_matches('/'));
    w.key("user-id", user);
    w.key("token-env", "MATRIX_ACCESS_TOKEN");
    let rooms = home.list(P, "MATRIX_ALLOWED_ROOMS", "allowed_rooms")?;
    if !rooms.is_empty() {
        w.key(
            "rooms",
            toml::Value::Array(rooms.iter().map(|r| toml::Value::from(r.as_str())).collect()),
        );
        w.notes.push("MATRIX_ALLOWED_ROOMS becomes rooms: Hermes still answered DMs outside the list, the gateway listens in the listed rooms only".to_owned());
    }
    w.common(home, "MATRIX")?;
    w.used(&["MATRIX_HOMESERVER", "MATRIX_USER_ID", "MATRIX_ALLOWED_ROOMS", "MATRIX_ENCRYPTION", "MATRIX_DEVICE_ID"]);
    w.home(home, "MATRIX_HOME_ROOM", |chat| {
        Target::from_str(chat).ok().map(|t| t.to_string())
    })?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wing(env: &str) -> Option<Result<Wing, String>> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".env"), env).unwrap();
        from_hermes(&crate::hermes_home::read(dir.path()).unwrap())
    }

    #[test]
    fn a_token_account_is_adopted_and_passwords_or_encryption_are_refused() {
        let base = "MATRIX_HOMESERVER=https://m.example.org/\nMATRIX_USER_ID=@bot:example.org\n";
        let w = wing(&format!("{base}MATRIX_ACCESS_TOKEN=syt_x\nMATRIX_HOME_ROOM=!r:example.org\n"))
            .unwrap()
            .unwrap();
        assert_eq!(w.home_target.as_deref(), Some("room:!r:example.org"));
        assert!(w.keys.iter().any(|(k, v)| *k == "homeserver" && v.as_str() == Some("https://m.example.org")));
        let e = wing(&format!("{base}MATRIX_PASSWORD=pw\n")).unwrap().unwrap_err();
        assert!(e.contains("MATRIX_PASSWORD") && !e.contains("pw\n"), "{e}");
        let e = wing(&format!("{base}MATRIX_ACCESS_TOKEN=t\nMATRIX_ENCRYPTION=true\n"))
            .unwrap()
            .unwrap_err();
        assert!(e.contains("encrypt"), "{e}");
        assert!(wing("MATRIX_HOMESERVER=https://x\n").is_none());
    }
}

//! Hermes's Discord settings as a `discord` adapter (docs/research/adopt.md §2.2). Hermes
//! always asks for the message-content intent, so the bot has it granted and the adapter
//! keeps it; an allow-list entry that is a user name (Hermes resolves names through the
//! members intent) has no equivalent here, where a sender is matched by id.

use std::str::FromStr;

use super::Target;
use crate::hermes_home::HermesHome;
use crate::hermes_home::wing::Wing;

const P: &str = "discord";

pub(super) fn from_hermes(home: &HermesHome) -> Option<Result<Wing, String>> {
    let mut w = Wing::new(P, &["DISCORD_"]);
    match w.credential(home, "DISCORD_BOT_TOKEN", &["token"]) {
        Ok(true) => Some(settings(home, w)),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

fn settings(home: &HermesHome, mut w: Wing) -> Result<Wing, String> {
    w.config_credentials_out(home, &["DISCORD_BOT_TOKEN"])?;
    w.key("token-env", "DISCORD_BOT_TOKEN");
    let intents = ["guilds", "guild-messages", "direct-messages", "message-content"];
    w.key(
        "intents",
        toml::Value::Array(intents.iter().map(|i| toml::Value::from(*i)).collect()),
    );
    w.common(home, "DISCORD")?;
    if let Some(users) = w.access.allow_users.take() {
        let (ids, names): (Vec<String>, Vec<String>) = users
            .into_iter()
            .partition(|u| !u.is_empty() && u.bytes().all(|b| b.is_ascii_digit()));
        if !names.is_empty() {
            w.notes.push(format!(
                "DISCORD_ALLOWED_USERS: {} entr{} by name ({}) not carried: hermes-svc admits Discord senders by user id; add their ids to allow-users",
                names.len(),
                if names.len() == 1 { "y" } else { "ies" },
                names.join(", ")
            ));
        }
        w.access.allow_users = Some(ids);
    }
    if home.var("DISCORD_ALLOWED_ROLES")?.is_some() {
        w.notes.push("DISCORD_ALLOWED_ROLES is not carried: hermes-svc has no role rule, so role holders are no longer admitted unless listed by id".to_owned());
    }
    for var in ["DISCORD_ALLOWED_CHANNELS", "DISCORD_IGNORED_CHANNELS"] {
        if home.var(var)?.is_some() {
            w.notes.push(format!("{var} is not carried: hermes-svc listens in every channel the bot can read (require-mention still applies)"));
        }
    }
    w.used(&[
        "DISCORD_ALLOWED_ROLES",
        "DISCORD_ALLOWED_CHANNELS",
        "DISCORD_IGNORED_CHANNELS",
    ]);
    w.home(home, "DISCORD_HOME_CHANNEL", |chat| {
        Target::from_str(chat).ok().map(|t| t.to_string())
    })?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discord_keeps_message_content_and_drops_names_from_the_allow_list() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".env"),
            "DISCORD_BOT_TOKEN=x.y.z\nDISCORD_ALLOWED_USERS=123456789012345678,alice\nDISCORD_HOME_CHANNEL=222\nDISCORD_ALLOW_BOTS=all\n",
        )
        .unwrap();
        let home = crate::hermes_home::read(dir.path()).unwrap();
        let w = from_hermes(&home).unwrap().unwrap();
        assert_eq!(
            w.access.allow_users.as_deref(),
            Some(&["123456789012345678".to_owned()][..])
        );
        assert!(w.notes.iter().any(|n| n.contains("alice")));
        assert_eq!(w.access.allow_bots, Some(true));
        assert_eq!(w.home_target.as_deref(), Some("channel:222"));
        let intents = &w.keys.iter().find(|(k, _)| *k == "intents").unwrap().1;
        assert!(intents.to_string().contains("message-content"));
    }
}

//! Hermes's QQ Bot settings as a `qqbot` adapter (docs/research/adopt.md §2.6). Hermes asks
//! for the same four intents whatever its settings, so the bot has them granted and the
//! adapter keeps them.

use crate::hermes_home::HermesHome;
use crate::hermes_home::wing::Wing;

const P: &str = "qqbot";

pub(super) fn from_hermes(home: &HermesHome) -> Option<Result<Wing, String>> {
    let mut w = Wing::new(P, &["QQ_", "QQBOT_"]);
    match w.credential(home, "QQ_CLIENT_SECRET", &["client_secret", "secret"]) {
        Ok(true) => Some(settings(home, w)),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

fn settings(home: &HermesHome, mut w: Wing) -> Result<Wing, String> {
    w.config_credentials_out(home, &["QQ_APP_ID", "QQ_CLIENT_SECRET"])?;
    let Some(app_id) = home.setting(P, "QQ_APP_ID", "app_id")? else {
        return Err("QQ_APP_ID is not set; add the bot's AppID and run adopt again".to_owned());
    };
    w.key("app-id", app_id);
    w.key("secret-env", "QQ_CLIENT_SECRET");
    let intents = ["group-and-c2c-event", "public-guild-messages", "direct-message", "interaction"];
    w.key(
        "intents",
        toml::Value::Array(intents.iter().map(|i| toml::Value::from(*i)).collect()),
    );
    w.common(home, "QQ")?;
    // Hermes reads QQ_GROUP_ALLOWED_USERS as group ids.
    let groups = home.list(P, "QQ_GROUP_ALLOWED_USERS", "group_allow_from")?;
    if !groups.is_empty() {
        w.access.allow_chats = Some(groups);
    }
    for (var, key) in [("QQ_DM_POLICY", "dm_policy"), ("QQ_GROUP_POLICY", "group_policy")] {
        match home.setting(P, var, key)?.as_deref().map(str::trim) {
            Some("disabled") if key == "dm_policy" => w.access.unknown_dm = Some("ignore"),
            Some(p) => w.notes.push(format!("qqbot {key} = {p}: carried only as the allow-lists and pairing hermes-svc has (an open policy admits nobody by itself in Hermes 0.19.0 either)")),
            None => {}
        }
    }
    w.used(&["QQ_APP_ID", "QQ_GROUP_ALLOWED_USERS", "QQ_DM_POLICY", "QQ_GROUP_POLICY"]);
    let var = if home.var("QQBOT_HOME_CHANNEL")?.is_some() { "QQBOT_HOME_CHANNEL" } else { "QQ_HOME_CHANNEL" };
    w.used(&["QQBOT_HOME_CHANNEL", "QQ_HOME_CHANNEL"]);
    if let Some(chat) = home.var(var)? {
        w.notes.push(format!("{var} ({chat}) is a bare openid that does not say whether it is a user or a group; Hermes's cron deliveries to it are not carried over: give such a job deliver: relay:qqbot/group:ID (or user:ID) by hand"));
    }
    if let Some(proxy) = home.var("WSS_PROXY")? {
        w.proxy = Some(("WSS_PROXY".to_owned(), proxy));
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qq_takes_the_app_its_intents_and_its_group_list() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".env"),
            "QQ_APP_ID=1020\nQQ_CLIENT_SECRET=s\nQQ_GROUP_ALLOWED_USERS=G1\nQQBOT_HOME_CHANNEL=ABC\n",
        )
        .unwrap();
        let w = from_hermes(&crate::hermes_home::read(dir.path()).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(w.access.allow_chats.as_deref(), Some(&["G1".to_owned()][..]));
        assert!(w.home_target.is_none());
        assert!(w.notes.iter().any(|n| n.contains("bare openid")));
    }
}

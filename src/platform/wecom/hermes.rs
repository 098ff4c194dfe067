//! Hermes's WeCom settings as a `wecom` adapter (hermes-agent 0.19.0, `gateway/config.py` and
//! `plugins/platforms/wecom/adapter.py`): the bot id and secret (`WECOM_BOT_ID`,
//! `WECOM_SECRET`, or the platform block's `bot_id` and `secret`), the long connection's
//! address (`WECOM_WEBSOCKET_URL`, `websocket_url`), the allow-list (`WECOM_ALLOWED_USERS`,
//! `allow_from`) and the home channel. Hermes's adapter gates access itself by `dm_policy`
//! and `group_policy` (`pairing` by default, as the gateway's own rules): `open` becomes
//! allow-all, `allowlist` the allow-list; the per-group lists have no equivalent and are said
//! so.

use std::str::FromStr;

use super::config::DEFAULT_URL;
use super::Target;
use crate::hermes_home::HermesHome;
use crate::hermes_home::wing::Wing;

const P: &str = "wecom";

pub(super) fn from_hermes(home: &HermesHome) -> Option<Result<Wing, String>> {
    let mut w = Wing::new(P, &["WECOM_"]);
    match w.credential(home, "WECOM_BOT_ID", &["bot_id"]) {
        Ok(true) => Some(settings(home, w)),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

fn settings(home: &HermesHome, mut w: Wing) -> Result<Wing, String> {
    if !w.credential(home, "WECOM_SECRET", &["secret"])? {
        return Err("WECOM_SECRET is not set: the bot subscribes its long connection with its id and secret; add it to .env and run adopt again".to_owned());
    }
    w.config_credentials_out(home, &["WECOM_BOT_ID", "WECOM_SECRET"])?;
    w.key("bot-id-env", "WECOM_BOT_ID");
    w.key("secret-env", "WECOM_SECRET");
    let url = match home.setting(P, "WECOM_WEBSOCKET_URL", "websocket_url")? {
        Some(u) => Some(u),
        None => home.setting(P, "WECOM_WEBSOCKET_URL", "websocketUrl")?,
    };
    if let Some(url) = url.map(|u| u.trim().to_owned()).filter(|u| !u.is_empty()) {
        if url != DEFAULT_URL {
            w.key("url", url);
        }
    }
    w.used(&["WECOM_WEBSOCKET_URL"]);
    w.common(home, "WECOM")?;
    match home.setting(P, "WECOM_DM_POLICY", "dm_policy")?.map(|p| p.trim().to_ascii_lowercase()) {
        Some(p) if p == "open" => w.access.allow_all = Some(true),
        Some(p) if p == "disabled" => w.notes.push("WECOM_DM_POLICY=disabled: hermes-svc has no switch that refuses every direct message; its allow-list decides (empty: nobody but paired users)".to_owned()),
        _ => {}
    }
    if home.setting(P, "WECOM_GROUP_POLICY", "group_policy")?.is_some()
        || home.block(P, "group_allow_from").is_some()
        || home.block(P, "groups").is_some()
    {
        w.notes.push("WeCom's group_policy, group_allow_from and groups are not carried: hermes-svc's access rules are per sender, with require-mention for groups (a group message reaches an AI bot only when it is mentioned)".to_owned());
    }
    w.used(&["WECOM_DM_POLICY", "WECOM_GROUP_POLICY"]);
    w.home(home, "WECOM_HOME_CHANNEL", |chat| {
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
    fn the_bot_and_its_secret_are_adopted_and_a_bot_without_secret_refused() {
        let w = wing(
            "WECOM_BOT_ID=aib1\nWECOM_SECRET=s\nWECOM_HOME_CHANNEL=zhangsan\nWECOM_DM_POLICY=open\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(w.env_credentials, ["WECOM_BOT_ID", "WECOM_SECRET"]);
        assert_eq!(w.home_target.as_deref(), Some("chat:zhangsan"));
        assert_eq!(w.access.allow_all, Some(true));
        assert!(wing("WECOM_BOT_ID=aib1\n").unwrap().is_err());
        assert!(wing("TELEGRAM_BOT_TOKEN=x\n").is_none());
    }
}

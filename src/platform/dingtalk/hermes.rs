//! Hermes's DingTalk settings as a `dingtalk` adapter: the client id and secret
//! (`DINGTALK_CLIENT_ID`, `DINGTALK_CLIENT_SECRET`, or the platform block's `extra`), the
//! allow-lists and mention rule every platform shares, and the home channel.

use std::str::FromStr;

use super::Target;
use crate::hermes_home::HermesHome;
use crate::hermes_home::wing::Wing;

const P: &str = "dingtalk";

pub(super) fn from_hermes(home: &HermesHome) -> Option<Result<Wing, String>> {
    let mut w = Wing::new(P, &["DINGTALK_"]);
    match w.credential(home, "DINGTALK_CLIENT_SECRET", &["client_secret"]) {
        Ok(true) => Some(settings(home, w)),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

fn settings(home: &HermesHome, mut w: Wing) -> Result<Wing, String> {
    w.config_credentials_out(home, &["DINGTALK_CLIENT_ID", "DINGTALK_CLIENT_SECRET"])?;
    let Some(id) = home.setting(P, "DINGTALK_CLIENT_ID", "client_id")? else {
        return Err("DINGTALK_CLIENT_ID is not set; add the app's Client ID and run adopt again".to_owned());
    };
    w.key("client-id", id.trim());
    if let Some(code) = home.setting(P, "DINGTALK_ROBOT_CODE", "robot_code")? {
        w.key("robot-code", code.trim());
    }
    w.key("secret-env", "DINGTALK_CLIENT_SECRET");
    w.common(home, "DINGTALK")?;
    for var in ["DINGTALK_FREE_RESPONSE_CHATS", "DINGTALK_ALLOWED_CHATS", "DINGTALK_MENTION_PATTERNS"] {
        if home.var(var)?.is_some() {
            w.notes.push(format!("{var} is not carried: group messages follow require-mention and the allow-lists"));
        }
    }
    w.used(&[
        "DINGTALK_CLIENT_ID",
        "DINGTALK_ROBOT_CODE",
        "DINGTALK_FREE_RESPONSE_CHATS",
        "DINGTALK_ALLOWED_CHATS",
        "DINGTALK_MENTION_PATTERNS",
    ]);
    // A group's conversation id starts `cid`; anything else is taken for a staff id.
    w.home(home, "DINGTALK_HOME_CHANNEL", |chat| {
        let text = if chat.starts_with("cid") { format!("group:{chat}") } else { format!("user:{chat}") };
        Target::from_str(&text).ok().map(|t| t.to_string())
    })?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wing(env: &str, yaml: &str) -> Option<Result<Wing, String>> {
        from_hermes(&crate::hermes_home::written(env, yaml))
    }

    #[test]
    fn the_client_id_secret_and_home_channel_are_carried() {
        let w = wing("DINGTALK_CLIENT_ID=ding1\nDINGTALK_CLIENT_SECRET=s\nDINGTALK_HOME_CHANNEL=cidA==\n", "")
            .unwrap()
            .unwrap();
        assert!(w.keys.iter().any(|(k, v)| *k == "client-id" && v.as_str() == Some("ding1")));
        assert_eq!(w.home_target.as_deref(), Some("group:cidA=="));
        let e = wing("DINGTALK_CLIENT_SECRET=s\n", "").unwrap().unwrap_err();
        assert!(e.contains("DINGTALK_CLIENT_ID"), "{e}");
        assert!(wing("TELEGRAM_BOT_TOKEN=x\n", "").is_none());
    }
}

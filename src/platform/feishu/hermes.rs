//! Hermes's Feishu/Lark settings as a `feishu` adapter (docs/research/adopt.md §2.5): events
//! over the long connection only, so Hermes's webhook mode is refused (where the app's events
//! go is the app console's setting, not ours to change).

use std::str::FromStr;

use super::Target;
use crate::hermes_home::HermesHome;
use crate::hermes_home::wing::Wing;

const P: &str = "feishu";

pub(super) fn from_hermes(home: &HermesHome) -> Option<Result<Wing, String>> {
    let mut w = Wing::new(P, &["FEISHU_"]);
    match w.credential(home, "FEISHU_APP_SECRET", &["app_secret", "secret"]) {
        Ok(true) => Some(settings(home, w)),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

fn settings(home: &HermesHome, mut w: Wing) -> Result<Wing, String> {
    w.config_credentials_out(home, &["FEISHU_APP_ID", "FEISHU_APP_SECRET"])?;
    let mode = home.setting(P, "FEISHU_CONNECTION_MODE", "connection_mode")?;
    if mode.is_some_and(|m| m.trim().eq_ignore_ascii_case("webhook")) {
        return Err("Hermes receives Feishu events by webhook (FEISHU_CONNECTION_MODE=webhook); the gateway uses the long connection: switch the app's event delivery to the long connection in its console, set FEISHU_CONNECTION_MODE=websocket, and run adopt again".to_owned());
    }
    let Some(app_id) = home.setting(P, "FEISHU_APP_ID", "app_id")? else {
        return Err("FEISHU_APP_ID is not set; add the app's App ID and run adopt again".to_owned());
    };
    let domain = home.setting(P, "FEISHU_DOMAIN", "domain")?;
    match domain.as_deref().map(str::trim) {
        None | Some("feishu") => {}
        Some("lark") => w.key("domain", "lark"),
        Some(other) => return Err(format!("FEISHU_DOMAIN is {other:?}; the gateway knows feishu and lark")),
    }
    w.key("app-id", app_id);
    w.key("secret-env", "FEISHU_APP_SECRET");
    w.common(home, "FEISHU")?;
    if home.var("FEISHU_GROUP_POLICY")?.is_some() {
        w.notes.push("FEISHU_GROUP_POLICY is not carried: group messages follow require-mention and the allow-lists".to_owned());
    }
    w.used(&[
        "FEISHU_APP_ID",
        "FEISHU_DOMAIN",
        "FEISHU_CONNECTION_MODE",
        "FEISHU_GROUP_POLICY",
        "FEISHU_BOT_OPEN_ID",
        "FEISHU_BOT_USER_ID",
        "FEISHU_BOT_NAME",
    ]);
    w.home(home, "FEISHU_HOME_CHANNEL", |chat| {
        let text = if chat.starts_with("ou_") { format!("user:{chat}") } else { format!("chat:{chat}") };
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
    fn a_secret_in_config_yaml_is_taken_and_webhook_mode_refused() {
        let w = wing("FEISHU_APP_ID=cli_1\nFEISHU_DOMAIN=lark\nFEISHU_HOME_CHANNEL=oc_9\n", "FEISHU_APP_SECRET: s3\n")
            .unwrap()
            .unwrap();
        assert_eq!(w.config_credentials[0].0, "FEISHU_APP_SECRET");
        assert_eq!(w.config_lines, [0]);
        assert_eq!(w.home_target.as_deref(), Some("chat:oc_9"));
        assert!(w.keys.iter().any(|(k, v)| *k == "domain" && v.as_str() == Some("lark")));
        let e = wing("FEISHU_APP_ID=a\nFEISHU_APP_SECRET=s\nFEISHU_CONNECTION_MODE=webhook\n", "")
            .unwrap()
            .unwrap_err();
        assert!(e.contains("webhook"), "{e}");
    }
}

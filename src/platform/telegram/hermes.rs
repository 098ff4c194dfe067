//! Hermes's Telegram settings as a `telegram` adapter (docs/research/adopt.md §2.1).

use std::str::FromStr;

use super::Target;
use crate::hermes_home::HermesHome;
use crate::hermes_home::wing::Wing;

const P: &str = "telegram";

pub(super) fn from_hermes(home: &HermesHome) -> Option<Result<Wing, String>> {
    let mut w = Wing::new(P, &["TELEGRAM_"]);
    match w.credential(home, "TELEGRAM_BOT_TOKEN", &["token"]) {
        Ok(true) => Some(settings(home, w)),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

fn settings(home: &HermesHome, mut w: Wing) -> Result<Wing, String> {
    w.config_credentials_out(home, &["TELEGRAM_BOT_TOKEN"])?;
    w.key("token-env", "TELEGRAM_BOT_TOKEN");
    if home.setting(P, "TELEGRAM_WEBHOOK_URL", "webhook_url")?.is_some() {
        return Err("Hermes runs Telegram in webhook mode (TELEGRAM_WEBHOOK_URL), and the gateway polls: remove TELEGRAM_WEBHOOK_URL (the gateway then deletes the webhook, keeping the updates waiting) and run adopt again".to_owned());
    }
    if let Some(base) = home.block(P, "base_url").and_then(|e| e.scalar()) {
        let base = base.trim_end_matches('/');
        w.key("api-base", base.strip_suffix("/bot").unwrap_or(base));
    }
    for key in ["base_file_url", "local_mode"] {
        if home.block(P, key).is_some() {
            w.notes.push(format!("telegram.{key} has no hermes-svc equivalent; api-base alone is carried"));
        }
    }
    w.common(home, "TELEGRAM")?;
    let chats = home.list(P, "TELEGRAM_GROUP_ALLOWED_CHATS", "group_allowed_chats")?;
    if chats.iter().any(|c| c == "*") {
        w.access.allow_chats = None;
        w.notes.push("TELEGRAM_GROUP_ALLOWED_CHATS=* admits every group's members in Hermes; hermes-svc has no such rule, so group members need allow-users or pairing".to_owned());
    } else if !chats.is_empty() {
        w.access.allow_chats = Some(chats);
    }
    if !home.list(P, "TELEGRAM_GROUP_ALLOWED_USERS", "group_allow_from")?.is_empty() {
        w.notes.push("TELEGRAM_GROUP_ALLOWED_USERS is not carried: hermes-svc's allow-users would also admit those senders' DMs, which Hermes did not; add them to allow-users by hand if that is meant".to_owned());
    }
    w.used(&[
        "TELEGRAM_GROUP_ALLOWED_CHATS",
        "TELEGRAM_GROUP_ALLOWED_USERS",
        "TELEGRAM_WEBHOOK_URL",
    ]);
    w.home(home, "TELEGRAM_HOME_CHANNEL", |chat| {
        Target::from_str(chat).ok().map(|t| t.to_string())
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
    fn telegrams_settings_become_the_adapter_and_its_rules() {
        let w = wing(
            "TELEGRAM_BOT_TOKEN=1:a\nTELEGRAM_ALLOWED_USERS=11, 12\nGATEWAY_ALLOWED_USERS=99\nTELEGRAM_GROUP_ALLOWED_CHATS=-100\nTELEGRAM_HOME_CHANNEL=-1001\nTELEGRAM_REQUIRE_MENTION=true\n",
            "platforms:\n  telegram:\n    extra:\n      base_url: http://127.0.0.1:81/bot\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(w.env_credentials, ["TELEGRAM_BOT_TOKEN"]);
        assert_eq!(
            w.access.allow_users.as_deref(),
            Some(&["11".to_owned(), "12".into(), "99".into()][..])
        );
        assert_eq!(w.access.allow_chats.as_deref(), Some(&["-100".to_owned()][..]));
        assert_eq!(w.access.require_mention, Some(true));
        assert_eq!(w.home_target.as_deref(), Some("chat:-1001"));
        assert!(w
            .keys
            .iter()
            .any(|(k, v)| *k == "api-base" && v.as_str() == Some("http://127.0.0.1:81")));
    }

    #[test]
    fn no_token_is_no_platform_and_a_webhook_is_refused() {
        assert!(wing("OPENAI_API_KEY=x\n", "").is_none());
        let e = wing("TELEGRAM_BOT_TOKEN=1:a\nTELEGRAM_WEBHOOK_URL=https://x\n", "")
            .unwrap()
            .unwrap_err();
        assert!(e.contains("webhook"), "{e}");
        let w = wing("", "TELEGRAM_BOT_TOKEN: '1:a'\n").unwrap().unwrap();
        assert_eq!(w.config_credentials.len(), 1);
        assert_eq!(w.config_lines, [0]);
    }
}

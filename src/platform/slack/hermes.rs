//! Hermes's Slack settings as a `slack` adapter (docs/research/adopt.md §2.3): one workspace,
//! over Socket Mode. Hermes can hold several workspaces (a comma-separated bot token, or the
//! OAuth installs of `slack_tokens.json`); one adapter is one app in one workspace, so those
//! are refused rather than half moved.

use std::str::FromStr;

use super::Target;
use crate::hermes_home::HermesHome;
use crate::hermes_home::wing::Wing;

const P: &str = "slack";

pub(super) fn from_hermes(home: &HermesHome) -> Option<Result<Wing, String>> {
    let mut w = Wing::new(P, &["SLACK_"]);
    match w.credential(home, "SLACK_BOT_TOKEN", &["token", "bot_token"]) {
        Ok(true) => Some(settings(home, w)),
        Ok(false) if home.slack_tokens => Some(Err(several())),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

fn several() -> String {
    "Hermes serves Slack workspaces through OAuth installs (slack_tokens.json) or several bot tokens (SLACK_BOT_TOKEN with commas); a hermes-svc adapter is one app in one workspace: keep one workspace's SLACK_BOT_TOKEN, move slack_tokens.json aside, and run adopt again".to_owned()
}

fn settings(home: &HermesHome, mut w: Wing) -> Result<Wing, String> {
    if home.slack_tokens || home.var("SLACK_BOT_TOKEN")?.is_some_and(|t| t.contains(',')) {
        return Err(several());
    }
    if !w.credential(home, "SLACK_APP_TOKEN", &["app_token"])? {
        return Err("SLACK_APP_TOKEN is not set: the gateway receives Slack's events over Socket Mode, which needs the app-level token (xapp-…); add it to .env and run adopt again".to_owned());
    }
    w.config_credentials_out(home, &["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"])?;
    w.key("app-token-env", "SLACK_APP_TOKEN");
    w.key("bot-token-env", "SLACK_BOT_TOKEN");
    w.common(home, "SLACK")?;
    if home.var("SLACK_ALLOWED_CHANNELS")?.is_some() {
        w.notes.push("SLACK_ALLOWED_CHANNELS is not carried: hermes-svc listens in every channel the app is in (require-mention still applies)".to_owned());
    }
    w.used(&["SLACK_ALLOWED_CHANNELS"]);
    w.home(home, "SLACK_HOME_CHANNEL", |chat| {
        Target::from_str(chat).ok().map(|t| t.to_string())
    })?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wing(env: &str, tokens: bool) -> Option<Result<Wing, String>> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".env"), env).unwrap();
        if tokens {
            std::fs::write(dir.path().join("slack_tokens.json"), "{}").unwrap();
        }
        from_hermes(&crate::hermes_home::read(dir.path()).unwrap())
    }

    #[test]
    fn one_workspace_is_adopted_and_several_are_refused() {
        let w = wing("SLACK_BOT_TOKEN=xoxb-1\nSLACK_APP_TOKEN=xapp-1\nSLACK_HOME_CHANNEL=C0123\n", false)
            .unwrap()
            .unwrap();
        assert_eq!(w.env_credentials, ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"]);
        assert_eq!(w.home_target.as_deref(), Some("channel:C0123"));
        for (env, tokens) in [
            ("SLACK_BOT_TOKEN=xoxb-1,xoxb-2\nSLACK_APP_TOKEN=xapp\n", false),
            ("SLACK_APP_TOKEN=xapp\n", true),
            ("SLACK_BOT_TOKEN=xoxb-1\n", false),
        ] {
            assert!(wing(env, tokens).unwrap().is_err(), "{env}");
        }
    }
}

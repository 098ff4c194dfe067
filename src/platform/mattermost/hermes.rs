//! Hermes's Mattermost settings as a `mattermost` adapter: `MATTERMOST_URL` becomes
//! `server-url`, `MATTERMOST_TOKEN` stays where it is and `token-env` names it, and the
//! access settings every platform shares carry over (`Wing::common`).

use std::str::FromStr;

use super::Target;
use crate::hermes_home::HermesHome;
use crate::hermes_home::wing::Wing;

const P: &str = "mattermost";

pub(super) fn from_hermes(home: &HermesHome) -> Option<Result<Wing, String>> {
    let mut w = Wing::new(P, &["MATTERMOST_"]);
    match w.credential(home, "MATTERMOST_TOKEN", &["token"]) {
        Ok(true) => Some(settings(home, w)),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

fn settings(home: &HermesHome, mut w: Wing) -> Result<Wing, String> {
    w.config_credentials_out(home, &["MATTERMOST_TOKEN"])?;
    let Some(url) = home.setting(P, "MATTERMOST_URL", "url")? else {
        return Err("MATTERMOST_URL is not set; add the server's URL to .env and run adopt again".to_owned());
    };
    w.key("server-url", url.trim_end_matches('/'));
    w.key("token-env", "MATTERMOST_TOKEN");
    w.common(home, "MATTERMOST")?;
    for (var, note) in [
        ("MATTERMOST_ALLOWED_CHANNELS", "MATTERMOST_ALLOWED_CHANNELS is not carried: hermes-svc listens in every channel the bot is in (require-mention still applies)"),
        ("MATTERMOST_FREE_RESPONSE_CHANNELS", "MATTERMOST_FREE_RESPONSE_CHANNELS is not carried: a channel answered without a mention is an access rule of its own in hermes-svc"),
        ("MATTERMOST_REPLY_MODE", "MATTERMOST_REPLY_MODE is not carried: hermes-svc answers in a post's thread when it was said in one, else at the top level"),
    ] {
        if home.var(var)?.is_some() {
            w.notes.push(note.to_owned());
        }
    }
    w.used(&["MATTERMOST_URL", "MATTERMOST_ALLOWED_CHANNELS", "MATTERMOST_FREE_RESPONSE_CHANNELS", "MATTERMOST_REPLY_MODE"]);
    w.home(home, "MATTERMOST_HOME_CHANNEL", |chat| {
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
    fn a_token_and_a_url_are_adopted_and_a_token_alone_is_refused() {
        let env = "MATTERMOST_TOKEN=t\nMATTERMOST_URL=https://mm.example.com/\n\
                   MATTERMOST_HOME_CHANNEL=4xp9fdt77pncbef59f4k1qe83o\n";
        let w = wing(env).unwrap().unwrap();
        assert_eq!(w.env_credentials, ["MATTERMOST_TOKEN"]);
        assert_eq!(w.home_target.as_deref(), Some("channel:4xp9fdt77pncbef59f4k1qe83o"));
        assert!(wing("MATTERMOST_TOKEN=t\n").unwrap().is_err());
        assert!(wing("OTHER=1\n").is_none());
    }
}

//! Hermes's Weixin settings as a `weixin` adapter (docs/research/adopt.md §2.7). The login
//! (Hermes's `WEIXIN_TOKEN`, or the account file its QR login stored) becomes the adapter's
//! login file, `weixin/ADAPTER.json`, field for field: the token lives there, never in `.env`.
//! Hermes's poll cursor and per-peer context tokens are not carried (a first poll may replay
//! or skip a little; a peer's first reply may wait for a new context token).

use std::path::PathBuf;

use crate::hermes_home::HermesHome;
use crate::hermes_home::wing::Wing;
use crate::config::Secret;

const P: &str = "weixin";

/// iLink user ids end in this; Hermes also admits an allow-list entry written without it.
const USER_SUFFIX: &str = "@im.wechat";

pub(super) fn from_hermes(home: &HermesHome) -> Option<Result<Wing, String>> {
    let token = home.var("WEIXIN_TOKEN");
    let account = home.var("WEIXIN_ACCOUNT_ID");
    match (token, account) {
        (Ok(None), Ok(None)) => None,
        (Ok(token), Ok(account)) => Some(settings(home, token.map(Secret::new), account)),
        (Err(e), _) | (_, Err(e)) => Some(Err(e)),
    }
}

fn settings(home: &HermesHome, token: Option<Secret>, account: Option<String>) -> Result<Wing, String> {
    let mut w = Wing::new(P, &["WEIXIN_"]);
    w.config_credentials_out(home, &["WEIXIN_TOKEN", "WEIXIN_ACCOUNT_ID"])?;
    let stored = account.as_ref().and_then(|id| home.weixin_accounts.iter().find(|a| &a.id == id));
    let base = home.var("WEIXIN_BASE_URL")?.map(|b| b.trim_end_matches('/').to_owned());
    let (token, base_url, user_id, saved_at) = match (token, stored) {
        (Some(t), _) => (t, base, None, None),
        (None, Some(a)) => (a.token.clone(), a.base_url.clone().or(base), a.user_id.clone(), a.saved_at.clone()),
        (None, None) => return Err(format!("WEIXIN_ACCOUNT_ID is set but Hermes has no login for it (no WEIXIN_TOKEN, no weixin/accounts/{}.json); log Hermes in again, or log the gateway in with `hermes-svc login weixin` after adopt", account.unwrap_or_default())),
    };
    let Some(base_url) = base_url else {
        return Err("the Weixin login has no base URL (WEIXIN_BASE_URL, or base_url in Hermes's account file): the gateway must poll the host the platform assigned; set WEIXIN_BASE_URL and run adopt again".to_owned());
    };
    let login = serde_json::json!({
        "token": token.expose(),
        "base_url": base_url,
        "account_id": account.clone().unwrap_or_default(),
        "user_id": user_id.unwrap_or_default(),
        "saved_at": saved_at.unwrap_or_default(),
    });
    let bytes = serde_json::to_vec_pretty(&login).map_err(|e| e.to_string())?;
    w.files.push((PathBuf::from(format!("weixin/{P}.json")), bytes, 0o600));
    // Where Hermes's polls had got to, as the adapter's cursor file (inbox/cursors/ADAPTER):
    // without it the first poll fetches again what Hermes already answered.
    let cursor = account
        .as_ref()
        .and_then(|id| home.weixin_cursors.iter().find(|(a, _)| a == id))
        .map(|(_, buf)| buf.clone())
        .filter(|buf| buf.len() <= crate::gateway::adapter::cursor_file::MAX_CURSOR);
    if let Some(buf) = cursor {
        w.files.push((PathBuf::from(format!("inbox/cursors/{P}")), buf.into_bytes(), 0o600));
    }
    if let Some(cdn) = home.var("WEIXIN_CDN_BASE_URL")? {
        w.key("cdn-base", cdn.trim_end_matches('/'));
    }
    w.common(home, "WEIXIN")?;
    if let Some(users) = w.access.allow_users.take() {
        let full: Vec<String> = users.into_iter().map(|u| if u.contains('@') { u } else { format!("{u}{USER_SUFFIX}") }).collect();
        w.notes.push(format!("WEIXIN_ALLOWED_USERS: hermes-svc compares ids exactly, so an entry without a suffix gets {USER_SUFFIX}"));
        w.access.allow_users = Some(full);
    }
    match home.var("WEIXIN_DM_POLICY")?.as_deref().map(str::trim) {
        Some("disabled") => w.access.unknown_dm = Some("ignore"),
        Some(p) if p != "pairing" => w.notes.push(format!("WEIXIN_DM_POLICY = {p}: carried only as the allow-lists and pairing hermes-svc has")),
        _ => {}
    }
    if home.var("WEIXIN_GROUP_POLICY")?.is_some_and(|p| p.trim() != "disabled") {
        w.notes.push("WEIXIN_GROUP_POLICY is not carried: Weixin has no mention, so groups stay closed unless require-mention = false is set by hand".to_owned());
    }
    if home.var("WEIXIN_GROUP_ALLOWED_USERS")?.is_some() {
        w.notes.push("WEIXIN_GROUP_ALLOWED_USERS is not carried (it would also admit their DMs)".to_owned());
    }
    w.used(&[
        "WEIXIN_TOKEN",
        "WEIXIN_ACCOUNT_ID",
        "WEIXIN_BASE_URL",
        "WEIXIN_CDN_BASE_URL",
        "WEIXIN_DM_POLICY",
        "WEIXIN_GROUP_POLICY",
        "WEIXIN_GROUP_ALLOWED_USERS",
    ]);
    w.home(home, "WEIXIN_HOME_CHANNEL", |chat| {
        use std::str::FromStr;
        super::Target::from_str(&format!("user:{chat}")).ok().map(|t| t.to_string())
    })?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wing(files: &[(&str, &str)]) -> Option<Result<Wing, String>> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        from_hermes(&crate::hermes_home::read(dir.path()).unwrap())
    }

    #[test]
    fn the_login_becomes_the_adapters_login_file_and_ids_get_their_suffix() {
        let w = wing(&[
            (".env", "WEIXIN_ACCOUNT_ID=b1@im.bot\nWEIXIN_ALLOWED_USERS=abc,def@im.wechat\nWEIXIN_HOME_CHANNEL=abc@im.wechat\n"),
            ("weixin/accounts/b1@im.bot.json", r#"{"token":"wx-t","base_url":"https://ilink.example","user_id":"owner"}"#),
        ])
        .unwrap()
        .unwrap();
        assert!(w.env_credentials.is_empty());
        let (path, bytes, mode) = &w.files[0];
        assert_eq!((path.to_str(), *mode), (Some("weixin/weixin.json"), 0o600));
        let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        assert_eq!(v["token"], "wx-t");
        assert_eq!(v["account_id"], "b1@im.bot");
        assert_eq!(v["base_url"], "https://ilink.example");
        assert_eq!(
            w.access.allow_users.as_deref(),
            Some(&["abc@im.wechat".to_owned(), "def@im.wechat".into()][..])
        );
        assert_eq!(w.home_target.as_deref(), Some("user:abc@im.wechat"));
        assert!(wing(&[(".env", "WEIXIN_ACCOUNT_ID=nobody\n")]).unwrap().is_err());
    }

    #[test]
    fn where_hermess_polls_had_got_to_becomes_the_adapters_cursor() {
        let w = wing(&[
            (".env", "WEIXIN_ACCOUNT_ID=b1@im.bot\n"),
            ("weixin/accounts/b1@im.bot.json", r#"{"token":"wx-t","base_url":"https://ilink.example"}"#),
            ("weixin/accounts/b1@im.bot.sync.json", r#"{"get_updates_buf":"CgQIARAB"}"#),
        ])
        .unwrap()
        .unwrap();
        let cursor = w.files.iter().find(|f| f.0.to_str() == Some("inbox/cursors/weixin"));
        assert_eq!(cursor.map(|f| (f.1.as_slice(), f.2)), Some((&b"CgQIARAB"[..], 0o600)));
    }
}

//! A Weixin bot's login: the token and base URL that `hermes-svc login weixin` got by QR
//! code, kept in the profile (`weixin/ADAPTER.json`, mode 0600, in a 0700 directory).
//!
//! The file is the one place the token lives: the gateway reads it at start and again when
//! the platform says the session expired, so a new login takes effect without a restart.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::atomic_file;
use crate::bounded_read::Owner;
use crate::config::Secret;
use crate::trusted_dir::{TrustError, TrustedDir};

/// What a confirmed login gives. The token is private; everything else may be shown.
#[derive(Clone, Serialize, Deserialize)]
pub struct WeixinLogin {
    token: String,
    /// Where this bot's API lives (the platform may assign another host than the default).
    pub base_url: String,
    /// The bot's iLink id (`…@im.bot`).
    #[serde(default)]
    pub account_id: String,
    /// The WeChat user who scanned the code and owns the bot.
    #[serde(default)]
    pub user_id: String,
    #[serde(default)]
    pub saved_at: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LoginFileError {
    #[error("no Weixin login at {}; run `hermes-svc login weixin --profile PROFILE` and scan the QR code", path.display())]
    Missing { path: PathBuf },
    /// A directory or file that is not what the gateway made, or that cannot be read: each
    /// names the path and the fix.
    #[error(transparent)]
    Untrusted(#[from] TrustError),
    #[error("{} is not a Weixin login ({reason}); run `hermes-svc login weixin --profile PROFILE` again", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A login file is a few hundred bytes; anything past this is not one.
const MAX_LEN: u64 = 64 * 1024;

impl WeixinLogin {
    pub fn new(token: Secret, base_url: String, account_id: String, user_id: String) -> Self {
        Self {
            token: token.expose().to_owned(),
            base_url,
            account_id,
            user_id,
            saved_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        }
    }

    pub fn token(&self) -> Secret {
        Secret::new(self.token.clone())
    }

    /// The login at `path`, in a `weixin/` directory only the gateway's user can change. The
    /// read is bounded ([`TrustedDir::read`]): a FIFO there is refused at once instead of
    /// hanging the gateway's start, a link is never followed, and a file of someone else's,
    /// or one others can write, is not taken for a login.
    pub fn read(path: &Path) -> Result<Self, LoginFileError> {
        let missing = || LoginFileError::Missing {
            path: path.to_owned(),
        };
        let (dir, name) = split(path)?;
        let Some(dir) = TrustedDir::open(dir, Owner::SelfOrRoot)? else {
            return Err(missing());
        };
        let bytes = dir.read(name, MAX_LEN)?.ok_or_else(missing)?;
        let text = String::from_utf8(bytes).map_err(|_| LoginFileError::Invalid {
            path: path.to_owned(),
            reason: "not UTF-8 text".into(),
        })?;
        // serde's message may quote the input, which holds the token: only its position is
        // kept.
        let login: WeixinLogin =
            serde_json::from_str(&text).map_err(|e| LoginFileError::Invalid {
                path: path.to_owned(),
                reason: format!("not JSON with token and base_url, at line {}", e.line()),
            })?;
        if login.token.trim().is_empty() {
            return Err(LoginFileError::Invalid {
                path: path.to_owned(),
                reason: "the token is empty".into(),
            });
        }
        Ok(login)
    }

    /// Replace the file whole, 0600 in a 0700 directory, whatever modes were there before:
    /// the token is a password. The directory must be one that only its user (or, for root
    /// logging in another account's profile, that account) can change, and the file is
    /// written by temp file and rename ([`atomic_file::write_in`]), so a link planted in it
    /// is never written through.
    pub fn write(&self, path: &Path) -> Result<(), LoginFileError> {
        let json = serde_json::to_vec_pretty(self).map_err(|e| LoginFileError::Write {
            path: path.to_owned(),
            source: io::Error::other(e),
        })?;
        let (dir, name) = split(path)?;
        let mut dir = TrustedDir::create(dir, Owner::SelfRootOrDirectory)?;
        dir.narrow_to(0o700)?;
        atomic_file::write_in(&dir, name, &json, 0o600, atomic_file::Sync::Durable)?;
        Ok(())
    }
}

/// The login file's directory and name.
fn split(path: &Path) -> Result<(&Path, &str), LoginFileError> {
    match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(dir), Some(name)) => Ok((dir, name)),
        _ => Err(LoginFileError::Invalid {
            path: path.to_owned(),
            reason: "not a file's path".into(),
        }),
    }
}

impl std::fmt::Debug for WeixinLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeixinLogin")
            .field("base_url", &self.base_url)
            .field("account_id", &self.account_id)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn round_trip_is_0600_and_errors_never_show_the_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("weixin").join("wx.json");
        assert!(matches!(
            WeixinLogin::read(&path),
            Err(LoginFileError::Missing { .. })
        ));
        let login = WeixinLogin::new(
            Secret::new("tok-secret".into()),
            "https://ilinkai.weixin.qq.com".into(),
            "bot@im.bot".into(),
            "u@im.wechat".into(),
        );
        login.write(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
        let back = WeixinLogin::read(&path).unwrap();
        assert_eq!(back.token().expose(), "tok-secret");
        assert!(!format!("{back:?}").contains("tok-secret"));
        std::fs::write(&path, "{\"token\": \"tok-secret\", oops").unwrap();
        let e = WeixinLogin::read(&path).unwrap_err().to_string();
        assert!(
            e.contains("not a Weixin login") && !e.contains("tok-secret"),
            "{e}"
        );
    }

    #[test]
    fn a_fifo_a_link_or_a_file_others_can_write_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let weixin = dir.path().join("weixin");
        std::fs::create_dir(&weixin).unwrap();
        let path = weixin.join("wx.json");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = WeixinLogin::read(&path).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "wx.json is a FIFO (named pipe), not a regular file: check it, then remove it"
            ),
            "{e}"
        );
        std::fs::remove_file(&path).unwrap();
        let elsewhere = dir.path().join("login.json");
        std::fs::write(&elsewhere, r#"{"token":"t","base_url":"u"}"#).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        let e = WeixinLogin::read(&path).unwrap_err().to_string();
        assert!(e.contains("wx.json is a symbolic link"), "{e}");
        std::fs::remove_file(&path).unwrap();
        std::fs::copy(&elsewhere, &path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = WeixinLogin::read(&path).unwrap_err().to_string();
        assert!(
            e.contains("wx.json is writable by group or others (mode 0666)"),
            "{e}"
        );
        // A login written again is 0600 whatever the file was, and reads back.
        WeixinLogin::read(&elsewhere).unwrap().write(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(WeixinLogin::read(&path).unwrap().token().expose(), "t");
    }
}

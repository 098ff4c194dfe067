//! A Weixin bot's login: the token and base URL that `hermes-svc login weixin` got by QR
//! code, kept in the profile (`weixin/ADAPTER.json`, mode 0600, in a 0700 directory).
//!
//! The file is the one place the token lives: the gateway reads it at start and again when
//! the platform says the session expired, so a new login takes effect without a restart.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Secret;

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
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
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

    pub fn read(path: &Path) -> Result<Self, LoginFileError> {
        use std::io::Read;
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(LoginFileError::Missing {
                    path: path.to_owned(),
                })
            }
            Err(source) => {
                return Err(LoginFileError::Read {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        let mut text = String::new();
        file.take(MAX_LEN)
            .read_to_string(&mut text)
            .map_err(|source| LoginFileError::Read {
                path: path.to_owned(),
                source,
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
    /// the token is a password.
    pub fn write(&self, path: &Path) -> Result<(), LoginFileError> {
        let err = |source| LoginFileError::Write {
            path: path.to_owned(),
            source,
        };
        let json = serde_json::to_vec_pretty(self).map_err(|e| err(io::Error::other(e)))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
        }
        // A file a person widened keeps its mode under `atomic_file`; this one must not.
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
        }
        crate::atomic_file::write(path, &json, 0o600).map_err(err)
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
}

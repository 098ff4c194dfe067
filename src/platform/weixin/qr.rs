//! Weixin's QR login (iLink): fetch a code, show it, and poll its status until the person
//! who scanned it confirms in WeChat; the answer is the bot's token and the base URL its API
//! lives at.
//!
//! The steps, as the public client (NousResearch/hermes-agent `gateway/platforms/weixin.py`,
//! `qr_login`) takes them: `GET ilink/bot/get_bot_qrcode?bot_type=3` gives `qrcode` (the
//! code's id) and `qrcode_img_content` (the URL WeChat must scan); `GET
//! ilink/bot/get_qrcode_status?qrcode=ID` answers `wait`, `scaned`, `scaned_but_redirect`
//! (poll `redirect_host` from now on), `expired` (fetch a new code; at most three times) or
//! `confirmed` with `bot_token`, `ilink_bot_id`, `baseurl` and `ilink_user_id`.

use std::time::Duration;

use serde_json::Value;

use crate::config::Secret;
use crate::platform::weixin::WeixinLogin;

/// A status request may be held by the server while nothing changes (a long poll).
const STATUS_TIMEOUT: Duration = Duration::from_secs(35);
/// Between status requests.
const POLL_EVERY: Duration = Duration::from_secs(1);
/// New codes after the first one expired.
const MAX_REFRESHES: u32 = 3;
/// The public client's app id header.
const APP_ID: &str = "bot";

/// What a login reports on the way, for the person at the terminal.
pub enum Step<'a> {
    /// A code to scan: the URL it encodes, drawn as a QR code.
    Code {
        url: &'a str,
        drawing: String,
    },
    Waiting,
    Scanned,
    Redirected,
    Expired {
        refresh: u32,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum QrError {
    #[error("{what}: {message}")]
    Request { what: &'static str, message: String },
    #[error(
        "the QR code expired {MAX_REFRESHES} times without being confirmed; run the login again"
    )]
    Expired,
    #[error("no confirmation within {}s; run the login again", .0.as_secs())]
    TimedOut(Duration),
    #[error("the platform confirmed the login but sent no {0}")]
    Incomplete(&'static str),
}

/// Run a login against `api_base` until it is confirmed, reporting each step.
pub async fn login(
    http: &reqwest::Client,
    api_base: &str,
    give_up_after: Duration,
    mut report: impl FnMut(Step),
) -> Result<WeixinLogin, QrError> {
    let api_base = api_base.trim_end_matches('/');
    let deadline = tokio::time::Instant::now() + give_up_after;
    let mut code = fetch_code(http, api_base, &mut report).await?;
    let mut base = api_base.to_owned();
    let mut refreshes = 0;
    loop {
        if tokio::time::Instant::now() >= deadline {
            return Err(QrError::TimedOut(give_up_after));
        }
        let url = format!("{base}/ilink/bot/get_qrcode_status?qrcode={code}");
        let status = match get(http, &url, STATUS_TIMEOUT).await {
            Ok(v) => v,
            // A status poll that timed out or broke is asked again; the code is still good.
            Err(_) => {
                tokio::time::sleep(POLL_EVERY).await;
                continue;
            }
        };
        match status["status"].as_str().unwrap_or("wait") {
            "scaned" => report(Step::Scanned),
            "scaned_but_redirect" => {
                if let Some(host) = status["redirect_host"].as_str().filter(|h| valid_host(h)) {
                    let scheme = api_base.split("://").next().unwrap_or("https");
                    base = format!("{scheme}://{host}");
                    report(Step::Redirected);
                }
            }
            "expired" => {
                refreshes += 1;
                if refreshes > MAX_REFRESHES {
                    return Err(QrError::Expired);
                }
                report(Step::Expired { refresh: refreshes });
                code = fetch_code(http, api_base, &mut report).await?;
                base = api_base.to_owned();
            }
            "confirmed" => return confirmed(&status, api_base),
            _ => report(Step::Waiting),
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

fn confirmed(v: &Value, api_base: &str) -> Result<WeixinLogin, QrError> {
    let text = |k: &str| v[k].as_str().map(str::trim).filter(|s| !s.is_empty());
    let token = text("bot_token").ok_or(QrError::Incomplete("bot_token"))?;
    let account = text("ilink_bot_id").ok_or(QrError::Incomplete("ilink_bot_id"))?;
    let base_url = text("baseurl")
        .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
        .unwrap_or(api_base);
    Ok(WeixinLogin::new(
        Secret::new(token.to_owned()),
        base_url.trim_end_matches('/').to_owned(),
        account.to_owned(),
        text("ilink_user_id").unwrap_or("").to_owned(),
    ))
}

/// A host, or host:port, and nothing that would change the URL's meaning.
fn valid_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
}

async fn fetch_code(
    http: &reqwest::Client,
    api_base: &str,
    report: &mut impl FnMut(Step),
) -> Result<String, QrError> {
    let url = format!("{api_base}/ilink/bot/get_bot_qrcode?bot_type=3");
    let v = get(http, &url, STATUS_TIMEOUT).await?;
    let code = v["qrcode"]
        .as_str()
        .filter(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_alphanumeric()))
        .ok_or(QrError::Request {
            what: "get_bot_qrcode",
            message: "the answer has no usable qrcode".into(),
        })?
        .to_owned();
    // WeChat scans the page URL, not the bare code.
    let url = v["qrcode_img_content"]
        .as_str()
        .filter(|u| !u.is_empty())
        .unwrap_or(&code);
    report(Step::Code {
        url,
        drawing: draw(url),
    });
    Ok(code)
}

async fn get(http: &reqwest::Client, url: &str, timeout: Duration) -> Result<Value, QrError> {
    let what = if url.contains("get_bot_qrcode") {
        "get_bot_qrcode"
    } else {
        "get_qrcode_status"
    };
    let err = |message: String| QrError::Request { what, message };
    let resp = http
        .get(url)
        .header("iLink-App-Id", APP_ID)
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| err(crate::error_chain::one_line(&e.without_url())))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(err(format!("HTTP {}", status.as_u16())));
    }
    resp.json::<Value>()
        .await
        .map_err(|_| err("the answer is not JSON".into()))
}

/// The QR code of `data` in half-block characters, two rows of modules per line, with the
/// quiet zone the scanners need.
pub fn draw(data: &str) -> String {
    use qrcode::render::unicode::Dense1x2;
    match qrcode::QrCode::new(data.as_bytes()) {
        Ok(code) => code
            .render::<Dense1x2>()
            .dark_color(Dense1x2::Light)
            .light_color(Dense1x2::Dark)
            .quiet_zone(true)
            .build(),
        Err(e) => format!("(cannot draw the QR code: {e}; open the URL instead)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drawing_has_half_blocks_and_square_lines() {
        let d = draw("https://liteapp.weixin.qq.com/q/abc?qrcode=0123&bot_type=3");
        assert!(d.contains('█') || d.contains('▀') || d.contains('▄'), "{d}");
        let widths: Vec<usize> = d.lines().map(|l| l.chars().count()).collect();
        assert!(widths.windows(2).all(|w| w[0] == w[1]), "{widths:?}");
    }

    #[test]
    fn a_confirmation_needs_a_token_and_an_id() {
        let ok = serde_json::json!({"status": "confirmed", "bot_token": "t", "ilink_bot_id": "b@im.bot", "baseurl": "https://x.example"});
        let login = confirmed(&ok, "https://ilinkai.weixin.qq.com").unwrap();
        assert_eq!(login.base_url, "https://x.example");
        let no_token = serde_json::json!({"status": "confirmed", "ilink_bot_id": "b"});
        assert!(matches!(
            confirmed(&no_token, "https://a"),
            Err(QrError::Incomplete("bot_token"))
        ));
        assert!(!valid_host("evil.example/path"));
        assert!(valid_host("127.0.0.1:8080"));
    }
}

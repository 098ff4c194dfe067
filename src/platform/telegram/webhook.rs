//! Whether a bot token has a webhook set, asked of the Bot API (`getWebhookInfo`) for doctor
//! (HSV020). Telegram refuses `getUpdates` (409) while a webhook is set
//! (<https://core.telegram.org/bots/api#getupdates>), so such an adapter polls and hears nothing,
//! whatever its unit and its own health say; only the platform can tell. An adapter that
//! deletes a webhook itself (`delete-webhook = true`) is not asked.
//!
//! Only the webhook URL's host is kept (a webhook path often carries a secret of its own), and
//! no answer ever holds the token.

use std::path::Path;

use super::Config;
use crate::config::Secret;
use crate::platform::standing::{Blocked, Question, ASK_TIMEOUT};

/// The question for adapter `adapter` with bot token `token`, unless it deletes a webhook
/// itself.
pub(super) fn question(
    adapter: &str,
    config: &Config,
    token: Secret,
    config_path: &Path,
) -> Option<Question> {
    if config.delete_webhook {
        return None;
    }
    let base = config.api_base.clone();
    let fix = format!(
        "set delete-webhook = true for adapter {adapter} in {}, or delete the webhook: curl -s \
         {base}/bot<TOKEN>/deleteWebhook",
        config_path.display()
    );
    let name = adapter.to_owned();
    Some(Question::new(
        adapter,
        format!(
            "Telegram whether adapter {adapter}'s bot token has a webhook set, which would block \
             its polling"
        ),
        format!("curl -s {base}/bot<TOKEN>/getWebhookInfo (a non-empty \"url\" blocks polling)"),
        move |http| async move {
            let host = webhook(&http, &base, &token).await?;
            Ok(host.map(|host| Blocked {
                problem: format!(
                    "Adapter {name} polls Telegram with getUpdates, but its bot token has a \
                     webhook set (to {host}), and Telegram refuses getUpdates while one is (409 \
                     Conflict), so the bot hears nothing."
                ),
                fix,
            }))
        },
    ))
}

/// The Bot API's answer, read as documented: `{"ok": true, "result": {"url": ...}}`, or
/// `{"ok": false, "error_code", "description"}`.
#[derive(serde::Deserialize)]
struct Reply {
    ok: bool,
    result: Option<Info>,
    description: Option<String>,
}

#[derive(serde::Deserialize)]
struct Info {
    #[serde(default)]
    url: String,
}

/// The host of the token's webhook, `None` when it has none, or why the Bot API could not
/// be asked.
async fn webhook(
    http: &reqwest::Client,
    api_base: &str,
    token: &Secret,
) -> Result<Option<String>, String> {
    let url = format!("{api_base}/bot{}/getWebhookInfo", token.expose());
    let why = match http.post(url).send().await {
        Err(e) => failure(e, token),
        Ok(resp) => {
            let status = resp.status();
            match resp.json::<Reply>().await {
                Ok(Reply {
                    ok: true,
                    result: Some(info),
                    ..
                }) if status.is_success() => return Ok(host_of(&info.url)),
                Ok(reply) => format!(
                    "HTTP {}{}",
                    status.as_u16(),
                    reply
                        .description
                        .map(|d| format!(": {}", crate::safe_text::clip(&d, 120)))
                        .unwrap_or_default()
                ),
                Err(e) if e.is_timeout() => failure(e, token),
                Err(_) => format!("HTTP {}, not a Bot API answer", status.as_u16()),
            }
        }
    };
    Err(why.replace(token.expose(), "<TOKEN>"))
}

fn host_of(url: &str) -> Option<String> {
    let url = url.trim();
    if url.is_empty() {
        return None;
    }
    Some(
        reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| "a URL that does not parse".into()),
    )
}

/// Why a request failed, in a few words and without its URL.
fn failure(e: reqwest::Error, token: &Secret) -> String {
    let why = if e.is_timeout() {
        format!("no answer within {} s", ASK_TIMEOUT.as_secs())
    } else if e.is_connect() {
        "could not connect".to_owned()
    } else if e.is_redirect() || e.status().is_some_and(|s| s.is_redirection()) {
        "redirected away from the Bot API".to_owned()
    } else {
        let bare = crate::error_chain::one_line(&e.without_url());
        format!("the request failed: {bare}")
    };
    why.replace(token.expose(), "<TOKEN>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock_platform::telegram::TelegramConfig;
    use crate::mock_platform::{MockConfig, MockPlatform};
    use crate::platform::standing::Standing;
    use crate::platform::Protocol;

    fn config(base: &str, delete_webhook: bool) -> Config {
        let text = format!(
            "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"T\"\n\
             api-base = \"{base}\"\ndelete-webhook = {delete_webhook}\n"
        );
        let mut cfg = crate::config::parse::<Protocol>(Path::new("t.toml"), &text).unwrap();
        match cfg.adapters.remove(0).protocol {
            Protocol::Telegram(c) => c,
            other => panic!("{other:?}"),
        }
    }

    fn ask(base: &str, token: &str, delete_webhook: bool) -> Option<Question> {
        let c = config(base, delete_webhook);
        question(
            "tg",
            &c,
            Secret::new(token.into()),
            Path::new("/h/gateway.toml"),
        )
    }

    fn http() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .timeout(ASK_TIMEOUT)
            .build()
            .unwrap()
    }

    #[test]
    fn a_webhook_keeps_its_host_only() {
        assert_eq!(host_of(""), None);
        assert_eq!(
            host_of("https://hooks.example.com:8443/secret-path/abc?x=1").as_deref(),
            Some("hooks.example.com")
        );
        assert!(host_of("not a url").is_some());
    }

    #[tokio::test]
    async fn asks_each_token_and_records_the_answer_without_the_token() {
        let mock = MockPlatform::start(MockConfig::default()).await.unwrap();
        let token = TelegramConfig::default().token;
        let base = mock.http_base();
        // A port nothing listens on: bind one, then free it.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed_base = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        assert!(
            ask(&base, &token, true).is_none(),
            "it deletes a webhook itself"
        );
        let q = ask(&base, &token, false).unwrap();
        assert_eq!(q.ask(http()).await, Standing::Fine);

        mock.telegram_set_webhook("https://hooks.example.com/hook/s3cret");
        let set = ask(&base, &token, false).unwrap().ask(http()).await;
        let Standing::Blocked(b) = &set else {
            panic!("{set:?}")
        };
        assert!(b.problem.contains("hooks.example.com") && b.problem.contains("409"));
        assert_eq!(
            b.fix,
            format!(
                "set delete-webhook = true for adapter tg in /h/gateway.toml, or delete the \
                 webhook: curl -s {base}/bot<TOKEN>/deleteWebhook"
            )
        );
        let wrong = ask(&base, "123:wrong-token-value", false)
            .unwrap()
            .ask(http())
            .await;
        assert!(
            matches!(&wrong, Standing::CouldNotAsk { message, .. } if message.contains("(HTTP 401")),
            "{wrong:?}"
        );
        let closed = ask(&closed_base, &token, false).unwrap().ask(http()).await;
        assert!(
            matches!(&closed, Standing::CouldNotAsk { message, .. } if message.contains("(could not connect)")),
            "{closed:?}"
        );
        let all = format!("{set:?}{wrong:?}{closed:?}");
        assert!(
            !all.contains(&token) && !all.contains("wrong-token"),
            "{all}"
        );
    }
}

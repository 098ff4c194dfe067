//! Whether a Telegram bot token has a webhook set, asked of the Bot API (`getWebhookInfo`) for
//! each Telegram adapter whose token is in its profile's `.env` and which will not delete a
//! webhook itself. Telegram refuses `getUpdates` (409) while a webhook is set
//! (https://core.telegram.org/bots/api#getupdates), so such an adapter polls and hears nothing,
//! whatever its unit and its own health say; only the platform can tell.
//!
//! Part of gathering, so the check (HSV020) stays pure: it reads only what is recorded here.
//! The token is held only until its question is sent: the snapshot the checks read holds no
//! secret, and only the webhook URL's host is kept (a webhook path often carries a secret of
//! its own). An adapter that cannot be asked is recorded with why, never as "no webhook".

use std::time::Duration;

use futures_util::stream::{self, StreamExt};

use crate::config::{GatewayConfig, Protocol, Secret};
use crate::doctor::homes::ProfileSnap;

/// Doctor answers in seconds: a Bot API that has not answered by then is "could not ask".
pub(crate) const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// Questions in flight at once, across all profiles: a machine with hundreds of bots asks in
/// a few rounds of [`ASK_TIMEOUT`] at worst, without hundreds of sockets.
pub(crate) const AT_ONCE: usize = 32;

/// One Telegram adapter of a profile, with its token's webhook as the Bot API told it.
#[derive(Clone, Debug)]
pub(crate) struct TelegramPoller {
    pub(crate) adapter: String,
    /// The adapter's `api-base`, for the fix's command: never a secret.
    pub(crate) api_base: String,
    /// The adapter deletes a webhook that blocks it, so there is nothing to ask.
    pub(crate) delete_webhook: bool,
    /// The token, until [`ask`] sends its question (its `Debug` is redacted).
    token: Option<Secret>,
    pub(crate) webhook: Webhook,
}

impl TelegramPoller {
    /// An adapter as a test builds it: already asked, holding no token.
    #[cfg(test)]
    pub(crate) fn asked(adapter: &str, delete_webhook: bool, webhook: Webhook) -> Self {
        Self {
            adapter: adapter.into(),
            api_base: "https://api.telegram.org".into(),
            delete_webhook,
            token: None,
            webhook,
        }
    }
}

/// What the Bot API said of a token's webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Webhook {
    /// Not asked: the adapter deletes a webhook itself.
    NotAsked,
    /// `result.url` is empty: the token may poll.
    None,
    /// A webhook is set; its URL's host only.
    Set { host: String },
    /// The question failed; why, without the URL (which holds the token).
    CouldNotAsk { why: String },
}

/// The Telegram adapters of `config` whose token is in `vars` (the profile's `.env`, the last
/// of a name winning, as the unit's `EnvironmentFile=` reads it).
pub(crate) fn pollers(config: &GatewayConfig, vars: &[(String, String)]) -> Vec<TelegramPoller> {
    config
        .adapters
        .iter()
        .filter_map(|spec| {
            let Protocol::Telegram {
                token_env,
                api_base,
                delete_webhook,
                ..
            } = &spec.protocol
            else {
                return None;
            };
            let value = &vars.iter().rev().find(|(k, _)| k == token_env)?.1;
            if value.is_empty() {
                return None;
            }
            Some(TelegramPoller {
                adapter: spec.name.clone(),
                api_base: api_base.clone(),
                delete_webhook: *delete_webhook,
                token: Some(Secret::new(value.clone())),
                webhook: Webhook::NotAsked,
            })
        })
        .collect()
}

/// Ask, for every adapter of `profiles` that polls and leaves a webhook alone, whether its token
/// has one: all at once, [`AT_ONCE`] at most in flight. Every token is dropped afterwards.
pub(crate) async fn ask(profiles: &mut [ProfileSnap]) {
    let mut questions = vec![];
    for (p, profile) in profiles.iter_mut().enumerate() {
        for (a, poller) in profile.telegram.iter_mut().enumerate() {
            let token = poller.token.take();
            if let (Some(token), false) = (token, poller.delete_webhook) {
                questions.push((p, a, poller.api_base.clone(), token));
            }
        }
    }
    if questions.is_empty() {
        return;
    }
    let answers: Vec<(usize, usize, Webhook)> = match client() {
        Ok(http) => {
            let http = &http;
            stream::iter(questions)
                .map(
                    |(p, a, base, token)| async move { (p, a, ask_one(http, &base, &token).await) },
                )
                .buffer_unordered(AT_ONCE)
                .collect()
                .await
        }
        Err(e) => {
            let why = format!("no HTTP client: {}", crate::error_chain::one_line(&e));
            questions
                .into_iter()
                .map(|(p, a, _, _)| (p, a, Webhook::CouldNotAsk { why: why.clone() }))
                .collect()
        }
    };
    for (p, a, webhook) in answers {
        profiles[p].telegram[a].webhook = webhook;
    }
}

fn client() -> Result<reqwest::Client, reqwest::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(ASK_TIMEOUT)
        .connect_timeout(ASK_TIMEOUT)
        // A redirect is not the Bot API answering: say so rather than follow it.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("hermes-svc/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The Bot API's answer, read as documented: `{"ok": true, "result": {"url": ...}}`, or
/// `{"ok": false, "error_code", "description"}`.
#[derive(serde::Deserialize)]
struct Answer {
    ok: bool,
    result: Option<Info>,
    description: Option<String>,
}

#[derive(serde::Deserialize)]
struct Info {
    #[serde(default)]
    url: String,
}

async fn ask_one(http: &reqwest::Client, api_base: &str, token: &Secret) -> Webhook {
    let url = format!("{api_base}/bot{}/getWebhookInfo", token.expose());
    let why = match http.post(url).send().await {
        Err(e) => failure(e, token),
        Ok(resp) => {
            let status = resp.status();
            match resp.json::<Answer>().await {
                Ok(Answer {
                    ok: true,
                    result: Some(info),
                    ..
                }) if status.is_success() => return webhook_of(&info.url),
                Ok(answer) => format!(
                    "HTTP {}{}",
                    status.as_u16(),
                    answer
                        .description
                        .map(|d| format!(": {}", crate::safe_text::clip(&d, 120)))
                        .unwrap_or_default()
                ),
                Err(e) if e.is_timeout() => failure(e, token),
                Err(_) => format!("HTTP {}, not a Bot API answer", status.as_u16()),
            }
        }
    };
    Webhook::CouldNotAsk {
        why: why.replace(token.expose(), "<TOKEN>"),
    }
}

fn webhook_of(url: &str) -> Webhook {
    let url = url.trim();
    if url.is_empty() {
        return Webhook::None;
    }
    let host = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| "a URL that does not parse".into());
    Webhook::Set { host }
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
    use crate::doctor::checks::fixtures::profile;
    use crate::mock_platform::telegram::TelegramConfig;
    use crate::mock_platform::{MockConfig, MockPlatform};

    fn poller(base: &str, token: &str, delete_webhook: bool) -> TelegramPoller {
        TelegramPoller {
            token: Some(Secret::new(token.into())),
            api_base: base.into(),
            ..TelegramPoller::asked("tg", delete_webhook, Webhook::NotAsked)
        }
    }

    #[test]
    fn a_webhook_keeps_its_host_only() {
        assert_eq!(webhook_of(""), Webhook::None);
        assert_eq!(
            webhook_of("https://hooks.example.com:8443/secret-path/abc?x=1"),
            Webhook::Set {
                host: "hooks.example.com".into()
            }
        );
        assert!(matches!(webhook_of("not a url"), Webhook::Set { .. }));
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
        let mut a = profile("a");
        a.telegram = vec![
            poller(&base, &token, false),
            poller(&base, "123:wrong-token-value", false),
            poller(&closed_base, &token, false),
            poller(&base, &token, true),
        ];
        let mut b = profile("b");
        b.telegram = vec![poller(&base, &token, false)];
        let mut profiles = vec![a, b];
        ask(&mut profiles).await;
        assert_eq!(profiles[1].telegram[0].webhook, Webhook::None);

        mock.telegram_set_webhook("https://hooks.example.com/hook/s3cret");
        for p in &mut profiles {
            for t in &mut p.telegram {
                t.token = Some(Secret::new(token.clone()));
            }
        }
        profiles[0].telegram[1].token = Some(Secret::new("123:wrong-token-value".into()));
        ask(&mut profiles).await;
        let got: Vec<_> = profiles[0].telegram.iter().map(|t| &t.webhook).collect();
        assert_eq!(
            got[0],
            &Webhook::Set {
                host: "hooks.example.com".into()
            }
        );
        assert!(
            matches!(got[1], Webhook::CouldNotAsk { why } if why.starts_with("HTTP 401")),
            "{got:?}"
        );
        assert_eq!(
            got[2],
            &Webhook::CouldNotAsk {
                why: "could not connect".into()
            }
        );
        assert_eq!(got[3], &Webhook::NotAsked, "it deletes a webhook itself");
        let all = format!("{profiles:?}");
        assert!(
            !all.contains(&token) && !all.contains("wrong-token"),
            "{all}"
        );
        assert!(profiles
            .iter()
            .flat_map(|p| &p.telegram)
            .all(|t| t.token.is_none()));
    }
}

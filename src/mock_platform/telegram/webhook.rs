//! `setWebhook`, `deleteWebhook` and `getWebhookInfo`
//! (<https://core.telegram.org/bots/api#setwebhook>). The mock never calls a webhook: while one
//! is set, updates just wait (`pending_update_count`) and `getUpdates` is refused, which is
//! what a client that forgot to delete a webhook meets.

use serde_json::json;

use super::super::reply::Answer;
use super::answers;
use super::params::Params;
use super::state::TelegramState;

pub(crate) fn info(state: &TelegramState) -> Answer {
    answers::ok(state.webhook_info())
}

/// An empty `url` removes the webhook, as documented; any other must be HTTPS.
pub(crate) fn set(params: &Params<'_>, state: &TelegramState) -> Answer {
    let url = params.get("url").unwrap_or_default().trim().to_owned();
    let drop_pending = params.flag("drop_pending_updates");
    if url.is_empty() {
        return deleted(state.set_webhook(None, drop_pending));
    }
    if !url.to_ascii_lowercase().starts_with("https://") {
        return answers::bad_request("bad webhook: An HTTPS URL must be provided for webhook");
    }
    if let Some(allowed) = params.allowed_updates() {
        state.set_allowed_updates(allowed);
    }
    let unchanged = state.webhook().as_deref() == Some(url.as_str());
    state.set_webhook(Some(url), drop_pending);
    let description = if unchanged {
        "Webhook is already set"
    } else {
        "Webhook was set"
    };
    answers::ok_described(json!(true), description)
}

pub(crate) fn delete(params: &Params<'_>, state: &TelegramState) -> Answer {
    state.count(|s| s.webhook_deletes += 1);
    deleted(state.set_webhook(None, params.flag("drop_pending_updates")))
}

fn deleted(was_set: bool) -> Answer {
    let description = if was_set {
        "Webhook was deleted"
    } else {
        "Webhook is already deleted"
    };
    answers::ok_described(json!(true), description)
}

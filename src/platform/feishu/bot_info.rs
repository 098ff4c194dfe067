//! Who the app's bot is: `GET /open-apis/bot/v3/info` ("获取机器人信息") with the tenant
//! access token answers `{"code": 0, "msg": "ok", "bot": {"app_name", "open_id", ...}}`. Its
//! `open_id` is what a mention of the bot carries (`mentions[].id.open_id`). The app needs
//! its bot capability on ("需要启用机器人能力"); a token the platform refuses is dropped, so
//! the next question fetches another.

use serde_json::Value;

use super::send::TOKEN_REFUSED;
use super::token::FeishuToken;
use crate::gateway::adapter::setup::platform_says;
use crate::gateway::adapter::Shared;
use crate::platform::BotId;

pub(super) const BOT_INFO_PATH: &str = "/open-apis/bot/v3/info";

/// The bot's `open_id` and `app_name`, or why Feishu did not say.
pub(super) async fn bot_info(
    shared: &Shared,
    api_base: &str,
    token: &FeishuToken,
) -> Result<BotId, String> {
    let tenant = token
        .get(shared)
        .await
        .map_err(|e| format!("tenant_access_token: {e}"))?;
    let request = shared
        .http
        .get(format!("{api_base}{BOT_INFO_PATH}"))
        .bearer_auth(&tenant);
    let (status, v) = shared
        .call("bot/v3/info", request)
        .await
        .map_err(|e| e.to_string())?;
    let code = v.get("code").and_then(Value::as_i64);
    if code.is_some_and(|c| TOKEN_REFUSED.contains(&c)) {
        token.invalidate(&tenant);
    }
    read_answer(status.as_u16(), &v)
}

fn read_answer(status: u16, v: &Value) -> Result<BotId, String> {
    let bot = &v["bot"];
    let open_id = bot["open_id"].as_str().filter(|id| !id.is_empty());
    match (status, v.get("code").and_then(Value::as_i64), open_id) {
        (200, Some(0), Some(open_id)) => Ok(BotId {
            id: Some(open_id.to_owned()),
            handle: bot["app_name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
        }),
        _ => Err(format!(
            "bot/v3/info answered HTTP {status} without the bot's open_id{}",
            platform_says(v)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_bot_is_its_open_id_and_app_name() {
        // The docs' answer.
        let v = json!({"code": 0, "msg": "ok", "bot": {"activate_status": 2, "app_name": "name",
            "avatar_url": "https://s1-imfile.feishucdn.com/static-resource/v1/da5xxxx14b16113",
            "ip_white_list": [], "open_id": "ou_e6e14f667cfe239d7b129b521dce0569"}});
        assert_eq!(
            read_answer(200, &v),
            Ok(BotId {
                id: Some("ou_e6e14f667cfe239d7b129b521dce0569".into()),
                handle: Some("name".into())
            })
        );
        let refused = json!({"code": 99991663, "msg": "Invalid access token for authorization."});
        let said = read_answer(400, &refused).unwrap_err();
        assert!(said.contains("99991663"), "{said}");
        assert!(read_answer(200, &json!({"code": 0, "msg": "ok", "bot": {}})).is_err());
    }
}

//! Who the app's bot is (`GET /open-apis/bot/v3/info`) and messages that @-mention it or
//! someone else, read back through the Feishu wing.

use super::feishu::*;
use super::feishu_send::bearer;
use super::*;
use crate::gateway::spool::Event;
use crate::mock_platform::FeishuConfig;
use crate::platform::{addressed, BotId};

const BOT_INFO: &str = "/open-apis/bot/v3/info";

async fn bot_info(http: &reqwest::Client, mock: &MockPlatform, auth: &str) -> (StatusCode, Value) {
    let url = format!("{}{BOT_INFO}", mock.http_base());
    let request = http.get(url).header("Authorization", auth).send();
    answer(within("bot info", request).await.unwrap()).await
}

#[tokio::test]
async fn bot_info_names_the_bot_to_a_tenant_token_only() {
    let mock = feishu_mock(fast()).await;
    let http = client();
    let auth = bearer(&http, &mock).await;
    let (status, info) = bot_info(&http, &mock, &auth).await;
    let config = FeishuConfig::default();
    assert_eq!((status.as_u16(), &info["code"]), (200, &json!(0)), "{info}");
    assert_eq!(info["bot"]["open_id"], config.bot_open_id.as_str());
    assert_eq!(info["bot"]["app_name"], config.bot_name.as_str());
    assert_eq!(info["bot"]["activate_status"], 2);
    let (status, missing) = bot_info(&http, &mock, "").await;
    assert_eq!((status.as_u16(), &missing["code"]), (400, &json!(99991661)));
    let (status, wrong) = bot_info(&http, &mock, "Bearer t-not-issued").await;
    assert_eq!((status.as_u16(), &wrong["code"]), (400, &json!(99991663)));
}

#[tokio::test]
async fn a_mention_of_the_bot_addresses_it_and_one_of_someone_else_does_not() {
    let mock = feishu_mock(fast()).await;
    let (mut ws, _) = feishu_connect(&mock).await;
    let config = FeishuConfig::default();
    let bot = BotId {
        id: Some(config.bot_open_id.clone()),
        handle: Some(config.bot_name.clone()),
    };
    let stored = |payload: Value| Event::new("e", "fs", "im.message.receive_v1", None, payload);

    let event_id = mock.feishu_emit_mention_of_bot("oc_group", "what now?");
    let (frame, payload) = next_event(&mut ws).await;
    ack(&mut ws, &frame, 200).await;
    assert_eq!(payload["header"]["event_id"], event_id.as_str());
    let message = &payload["event"]["message"];
    let content: Value = serde_json::from_str(message["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["text"], "@_user_1 what now?");
    assert_eq!(message["mentions"][0]["key"], "@_user_1");
    assert_eq!(
        message["mentions"][0]["id"]["open_id"],
        config.bot_open_id.as_str()
    );
    assert!(addressed("feishu", &stored(payload), &bot));

    mock.feishu_emit_mention_of("oc_group", "over to you", "ou_alice", &config.bot_name);
    let (frame, payload) = next_event(&mut ws).await;
    ack(&mut ws, &frame, 200).await;
    assert!(!addressed("feishu", &stored(payload), &bot));

    let text = format!("@{} hello", config.bot_name);
    mock.feishu_emit_message(crate::mock_platform::FeishuMessage::text("oc_group", &text));
    let (frame, payload) = next_event(&mut ws).await;
    ack(&mut ws, &frame, 200).await;
    assert!(!addressed("feishu", &stored(payload), &bot));
}

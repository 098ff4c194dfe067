//! What the mock's emit helpers put in a group: a mention entity over the bot's username and a
//! reply to the bot's own message, read back through the Telegram wing as addressing the bot
//! `getMe` names, and a plain message naming the bot read as not.

use super::*;
use crate::gateway::spool::Event;
use crate::platform::{addressed, BotId};

/// The mock's supergroup (`@mockchannel`).
const GROUP: i64 = -1_001_000_000_001;

/// The update with id `id` from one poll, as the adapter would store it.
async fn stored(http: &reqwest::Client, mock: &MockPlatform, id: i64) -> Event {
    let (_, answer) = call(http, mock, "getUpdates", json!({"timeout": 0})).await;
    let update = answer["result"]
        .as_array()
        .and_then(|all| all.iter().find(|u| u["update_id"] == id))
        .cloned()
        .unwrap();
    Event::new(id.to_string(), "tg", "message", None, update)
}

#[tokio::test]
async fn a_mention_and_a_reply_to_the_bot_address_the_bot_get_me_names() {
    let mock = platform().await;
    let http = client();
    let (_, me) = call(&http, &mock, "getMe", json!({})).await;
    let bot = BotId {
        id: Some(me["result"]["id"].to_string()),
        handle: me["result"]["username"].as_str().map(str::to_owned),
    };
    assert_eq!(bot.handle.as_deref(), Some("mock_hermes_bot"));

    let mention = mock.telegram_emit_mention(GROUP, "héllo 😀 ", ", what now?");
    let event = stored(&http, &mock, mention).await;
    let message = &event.data["message"];
    assert_eq!(message["text"], "héllo 😀 @mock_hermes_bot, what now?");
    assert_eq!(
        message["entities"],
        json!([{"type": "mention", "offset": 9, "length": 16}])
    );
    assert_eq!(message["chat"]["type"], "supergroup");
    assert!(addressed("telegram", &event, &bot));

    let plain = mock.telegram_emit_text(GROUP, "mock_hermes_bot, @mock_hermes_bot?");
    assert!(!addressed(
        "telegram",
        &stored(&http, &mock, plain).await,
        &bot
    ));

    assert_eq!(
        mock.telegram_emit_reply_to_bot(GROUP, "nothing to reply to"),
        None
    );
    let (status, sent) = call(
        &http,
        &mock,
        "sendMessage",
        json!({"chat_id": GROUP, "text": "I am here"}),
    )
    .await;
    assert_eq!(status, 200, "{sent}");
    let reply = mock.telegram_emit_reply_to_bot(GROUP, "thanks").unwrap();
    let event = stored(&http, &mock, reply).await;
    let replied = &event.data["message"]["reply_to_message"];
    assert_eq!(replied["message_id"], sent["result"]["message_id"]);
    assert_eq!(replied["from"]["id"], me["result"]["id"]);
    assert!(addressed("telegram", &event, &bot));
}

//! What a test asks of the mock Mattermost when nothing is broken: the one server, its bot
//! account, its channels and the user who talks.

use std::time::Duration;

/// A channel the bot is in: its id and type (`O` open, `P` private, `D` direct, `G` group).
#[derive(Clone, Debug)]
pub struct MattermostChannel {
    pub id: String,
    pub kind: &'static str,
    pub name: String,
}

/// A file a user attaches to a post: served at `GET /api/v4/files/{id}` (the bytes, typed
/// `mime`) and `GET /api/v4/files/{id}/info` (its `FileInfo`), and listed in the post's
/// `file_ids` and `metadata.files`.
#[derive(Clone, Debug)]
pub struct MattermostFile {
    pub name: String,
    pub mime: &'static str,
    pub bytes: Vec<u8>,
}

impl MattermostFile {
    pub fn new(name: &str, mime: &'static str, bytes: Vec<u8>) -> MattermostFile {
        MattermostFile {
            name: name.to_owned(),
            mime,
            bytes,
        }
    }
}

/// The Mattermost part of [`MockConfig`](crate::mock_platform::MockConfig).
#[derive(Clone, Debug)]
pub struct MattermostConfig {
    /// The bot's access token (a personal access token works the same way).
    pub token: String,
    pub bot_user_id: String,
    pub bot_username: String,
    /// The user `emit`'s posts come from.
    pub user_id: String,
    pub username: String,
    pub team_id: String,
    /// The bot's channels; `emit` posts in the first. A post to any other is refused 403.
    pub channels: Vec<MattermostChannel>,
    /// How long the server remembers a `pending_post_id` (`PendingPostIDsCacheTTL`, 30 s).
    pub pending_post_window: Duration,
    /// What `hello` says the server is.
    pub server_version: String,
    /// How often the hub's reaper forgets inactive connections, and how old their last
    /// activity must be (`inactiveConnReaperInterval`, 5 min): a resume after that is a new
    /// connection.
    pub reap_interval: Duration,
}

impl Default for MattermostConfig {
    fn default() -> Self {
        MattermostConfig {
            token: "mockmattermosttoken0000000a".to_owned(),
            bot_user_id: "botuser0000000000000000000".to_owned(),
            bot_username: "hermes".to_owned(),
            user_id: "alice00000000000000000000a".to_owned(),
            username: "alice".to_owned(),
            team_id: "team00000000000000000000aa".to_owned(),
            channels: vec![
                MattermostChannel {
                    id: "townsquare0000000000000000".to_owned(),
                    kind: "O",
                    name: "town-square".to_owned(),
                },
                MattermostChannel {
                    id: "directalice000000000000000".to_owned(),
                    kind: "D",
                    name: "alice__hermes".to_owned(),
                },
            ],
            pending_post_window: Duration::from_secs(30),
            server_version: "9.11.0.mock".to_owned(),
            reap_interval: Duration::from_secs(300),
        }
    }
}

//! What a test asks of the mock homeserver when nothing is broken: the one bot account it
//! serves (docs/research/matrix-client-server.md §1), the rooms it is in, and the cap on a
//! `/sync` long poll.

use std::time::Duration;

/// The Matrix part of [`MockConfig`](crate::mock_platform::MockConfig).
#[derive(Clone, Debug)]
pub struct MatrixConfig {
    /// The only access token the homeserver honours (`Authorization: Bearer …` or
    /// `?access_token=`).
    pub access_token: String,
    /// The bot's account, as `whoami` names it and its own events carry it as `sender`. Its
    /// server name (after the first `:`) is the one event ids are minted under.
    pub user_id: String,
    /// The device the token belongs to: transaction ids are scoped to it (spec v1.7,
    /// MSC3970), and its own echoes carry `unsigned.transaction_id`.
    pub device_id: String,
    /// The rooms the bot has joined, in `joined_rooms` order. The first is where
    /// [`matrix_emit`](crate::mock_platform::MockPlatform::matrix_emit) writes.
    pub rooms: Vec<String>,
    /// The longest a `/sync` is held, whatever `timeout` it asks for.
    pub max_timeout: Duration,
    /// The user the emitted events come from.
    pub human: String,
    /// Rooms that have had `m.room.encryption` state since before the mock's history began
    /// (it shows in an initial sync's `state`, never in a timeline).
    pub encrypted_rooms: Vec<String>,
    /// The largest upload the content repository takes, in bytes (`m.upload.size`); a larger
    /// one is 413 `M_TOO_LARGE`. Synapse's default `max_upload_size` is 50 MiB.
    pub max_upload: u64,
}

impl MatrixConfig {
    /// The server name in the bot's user id (`mock.test` in `@bot:mock.test`).
    pub fn server_name(&self) -> &str {
        self.user_id
            .split_once(':')
            .map_or("mock.test", |(_, server)| server)
    }
}

impl Default for MatrixConfig {
    fn default() -> Self {
        MatrixConfig {
            access_token: "mx-mock-token".to_owned(),
            user_id: "@bot:mock.test".to_owned(),
            device_id: "MOCKDEVICE".to_owned(),
            rooms: vec!["!room1:mock.test".to_owned()],
            max_timeout: Duration::from_secs(30),
            human: "@alice:mock.test".to_owned(),
            encrypted_rooms: Vec::new(),
            max_upload: 50 * 1024 * 1024,
        }
    }
}

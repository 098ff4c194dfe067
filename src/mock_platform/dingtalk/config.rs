//! What a test asks of the mock DingTalk when nothing is broken: the one app, its robot, the
//! people and groups it talks to, and the platform's timers.

use std::time::Duration;

/// The DingTalk part of [`MockConfig`](crate::mock_platform::MockConfig).
#[derive(Clone, Debug)]
pub struct DingTalkConfig {
    /// The app's Client ID (AppKey) and Client Secret (AppSecret).
    pub client_id: String,
    pub client_secret: String,
    /// The robot's code; an app's own robot has the client id as its code.
    pub robot_code: String,
    /// Staff ids the robot may message 1:1; any other lands in `invalidStaffIdList`.
    pub staff: Vec<String>,
    /// Open conversation ids of the groups the robot is in.
    pub groups: Vec<String>,
    /// How long a ticket from `connections/open` stays good: 90 s, for one connection.
    pub ticket_ttl: Duration,
    /// How long a robot message waits for its ack before it is pushed again. The docs say it
    /// is not pushed again; the SDKs' comments and field reports say once, after about 60 s.
    pub ack_timeout: Duration,
    /// Pushes after the first (1 by default; 0 for the docs' word).
    pub max_retries: u32,
    /// The server's SYSTEM `ping` on every connection, if any (its cadence is the server's).
    pub server_ping: Option<Duration>,
    /// After a SYSTEM `disconnect`, the server closes the connection this much later: 10 s.
    pub disconnect_grace: Duration,
    /// The access token's lifetime, `expireIn`: 7200 s.
    pub token_lifetime: Duration,
}

impl Default for DingTalkConfig {
    fn default() -> Self {
        DingTalkConfig {
            client_id: "dingmockclient0001".to_owned(),
            client_secret: "mock-dingtalk-client-secret".to_owned(),
            robot_code: "dingmockclient0001".to_owned(),
            staff: vec!["manager4220".to_owned()],
            groups: vec!["cidMockGroup0001+a/b==".to_owned()],
            ticket_ttl: Duration::from_secs(90),
            ack_timeout: Duration::from_secs(60),
            max_retries: 1,
            server_ping: None,
            disconnect_grace: Duration::from_secs(10),
            token_lifetime: Duration::from_secs(7200),
        }
    }
}

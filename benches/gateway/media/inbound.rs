//! Files in: a 50 MB file a Matrix user sent, fetched by the gateway into its media store when
//! the turn starts, with the gateway's memory before and after; and the time from the platform
//! event to the agent's request for a 1 MB Telegram photo against a text message's.

use std::time::{Duration, Instant};

use hermes_svc::mock_platform::telegram::TelegramConfig;
use hermes_svc::mock_platform::{MatrixConfig, MockPlatform, Platform};

use crate::proc::cpu_ns;

use super::rig::{document, ms, png, sha256, wait_post, Agent, Call, Rig};

/// The 50 MB file in, as measured.
pub(super) struct BigIn {
    pub(super) bytes: u64,
    pub(super) rss_before_kib: u64,
    pub(super) hwm_before_kib: u64,
    pub(super) hwm_kib: u64,
    pub(super) rss_after_kib: u64,
    /// The platform's event → the agent has the turn's request (the file fetched by then).
    pub(super) to_agent_ms: f64,
    pub(super) gateway_cpu_ms: f64,
    pub(super) same_bytes: bool,
}

/// Event → agent for a text message and a 1 MB photo, alternating, in ms (unsorted).
pub(super) struct InLatency {
    pub(super) photo_bytes: usize,
    pub(super) text: Vec<f64>,
    pub(super) photo: Vec<f64>,
    /// The photo's request body (its data URL in it), bytes.
    pub(super) photo_request_bytes: usize,
}

/// A 5 MiB photo in, sent to the agent inline.
pub(super) struct InlinePhoto {
    pub(super) bytes: usize,
    pub(super) request_bytes: usize,
    pub(super) to_agent_ms: f64,
    pub(super) rss_before_kib: u64,
    pub(super) hwm_before_kib: u64,
    pub(super) hwm_kib: u64,
    pub(super) rss_after_kib: u64,
}

/// The stored file's path, as the bridge names a file it does not inline: `[photo: PATH]`.
pub(super) fn named_path(text: &str) -> Option<&str> {
    let rest = &text[text.find("[photo: ")? + "[photo: ".len()..];
    Some(&rest[..rest.find(']')?])
}

/// A 50,000,000-byte file as a Matrix `m.image` (bytes no signature matches, so the store
/// keeps it as a file and the bridge names its path rather than inlining it).
pub(super) async fn big_in(rig: &Rig, mock: &MockPlatform, agent: &Agent) -> BigIn {
    const LEN: usize = 50_000_000;
    let bytes = document(LEN);
    let want = sha256(&bytes);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pid = rig.pid();
    let (rss_before_kib, hwm_before_kib) = rig.memory();
    let cpu0 = cpu_ns(pid);
    let room = MatrixConfig::default().rooms[0].clone();
    let emitted = Instant::now();
    mock.matrix_emit_image(&room, "big-in.bin", bytes);
    let call = agent
        .wait_call("big-in", Duration::from_secs(300))
        .await
        .expect("the agent never had the 50 MB file's turn");
    let to_agent_ms = ms(emitted, call.at);
    let gateway_cpu_ms = (cpu_ns(pid) - cpu0) as f64 / 1e6;
    let path = named_path(&call.text)
        .unwrap_or_else(|| panic!("no stored file named in {:?}", call.text))
        .to_owned();
    // The turn's answer, posted: the turn is over.
    wait_post(mock, Duration::from_secs(30), |p| {
        p.platform == Platform::Matrix
    })
    .await
    .expect("the turn's answer never reached Matrix");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_after_kib, hwm_kib) = rig.memory();
    let stored = std::fs::read(&path).unwrap_or_default();
    BigIn {
        bytes: stored.len() as u64,
        rss_before_kib,
        hwm_before_kib,
        hwm_kib,
        rss_after_kib,
        to_agent_ms,
        gateway_cpu_ms,
        same_bytes: sha256(&stored) == want,
    }
}

/// One turn on the mock Telegram: `emit` sends the message tagged `tag`; when it was
/// emitted and the agent's request for it, once the turn's answer has been posted.
async fn turn(
    mock: &MockPlatform,
    agent: &Agent,
    tag: &str,
    emit: impl FnOnce(),
) -> (Instant, Call) {
    let limit = Duration::from_secs(30);
    let answers = || {
        mock.posts()
            .iter()
            .filter(|p| p.platform == Platform::Telegram && p.content == "ok")
            .count()
    };
    let before = answers();
    let emitted = Instant::now();
    emit();
    let call = agent
        .wait_call(tag, limit)
        .await
        .unwrap_or_else(|| panic!("the agent never had {tag}"));
    let end = Instant::now() + limit;
    while answers() <= before {
        assert!(Instant::now() < end, "{tag}'s answer was never posted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (emitted, call)
}

/// `runs` text messages and `runs` 1 MB photos from the mock's Telegram user, alternating,
/// each after the previous turn's answer was posted.
pub(super) async fn in_latency(mock: &MockPlatform, agent: &Agent, runs: usize) -> InLatency {
    const LEN: usize = 1_000_000;
    let photo = png(LEN);
    let chat = TelegramConfig::default().chats[0];
    let mut result = InLatency {
        photo_bytes: LEN,
        text: vec![],
        photo: vec![],
        photo_request_bytes: 0,
    };
    // Run 0 of each is a warm-up, not counted.
    for i in 0..=runs {
        let (mut t, mut p) = (0.0, 0.0);
        for photo_turn in [i % 2 == 1, i % 2 == 0] {
            if photo_turn {
                let tag = format!("pin-{i:03}");
                let emit = || {
                    mock.telegram_emit_photo(chat, &tag, photo.clone());
                };
                let (emitted, call) = turn(mock, agent, &tag, emit).await;
                p = ms(emitted, call.at);
                result.photo_request_bytes = call.body_bytes;
            } else {
                let tag = format!("tin-{i:03}");
                let emit = || {
                    mock.telegram_emit_text(chat, &tag);
                };
                let (emitted, call) = turn(mock, agent, &tag, emit).await;
                t = ms(emitted, call.at);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if i > 0 {
            result.text.push(t);
            result.photo.push(p);
        }
    }
    result
}

/// The largest photo the OpenAI bridge sends inline (5 MiB), in from Telegram, in a gateway
/// that has had one turn before (so the first turn's own allocations are not counted).
pub(super) async fn inline_photo_in(rig: &Rig, mock: &MockPlatform, agent: &Agent) -> InlinePhoto {
    const LEN: usize = 5 * 1024 * 1024;
    let chat = TelegramConfig::default().chats[0];
    turn(mock, agent, "warm-inline", || {
        mock.telegram_emit_text(chat, "warm-inline");
    })
    .await;
    let photo = png(LEN);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (rss_before_kib, hwm_before_kib) = rig.memory();
    let (emitted, call) = turn(mock, agent, "inline-5mib", || {
        mock.telegram_emit_photo(chat, "inline-5mib", photo);
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_after_kib, hwm_kib) = rig.memory();
    InlinePhoto {
        bytes: LEN,
        request_bytes: call.body_bytes,
        to_agent_ms: ms(emitted, call.at),
        rss_before_kib,
        hwm_before_kib,
        hwm_kib,
        rss_after_kib,
    }
}

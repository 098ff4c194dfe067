//! The official WeCom AI-bot client, `@wecom/aibot-node-sdk` (installed pinned by
//! scripts/official-client-wecom), against the mock WeCom in this process: it subscribes,
//! receives a callback, replies with a stream message and starts one of its own, its pings
//! are answered, and a second client's subscription kicks it as the SDK expects
//! (`disconnected_event`). The mock was written from the docs and the SDK's source, not from
//! the adapter; this is the check that the SDK takes it for WeCom.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hermes_svc::mock_platform::{MockConfig, WeComConfig};

use crate::harness::wait_for;
use crate::mock_runtime::{mock_runtime, start_mock};

/// Where the SDK is installed: the script's last line of stdout.
fn sdk_dir() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/official-client-wecom"))
        .output()
        .expect("scripts/official-client-wecom runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout.lines().last().unwrap().to_owned()
}

#[test]
fn the_official_sdk_subscribes_receives_replies_sends_and_is_kicked() {
    let dir = sdk_dir();
    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let config = WeComConfig::default();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/wecom_official/check.cjs");
    let mut child = Command::new("node")
        .arg(&script)
        .args([
            mock.wecom_url(),
            config.bot_id.clone(),
            config.secret.clone(),
        ])
        .env("NODE_PATH", Path::new(&dir).join("node_modules"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node runs");
    let (tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = vec![];
    let mut next = |want: &str| {
        wait_for(Duration::from_secs(30), want, || {
            while let Ok(line) = lines.try_recv() {
                seen.push(line);
            }
            seen.iter().any(|l| l.starts_with(want)).then_some(())
        });
    };
    next("AUTHENTICATED");
    let id = mock.wecom_emit_text(&config.user_id, None, "hi sdk");
    next(&format!("MESSAGE {id} hi sdk"));
    next("SENT");
    next("PINGED");
    next("KICKED");
    next("DISCONNECTED");
    let status = wait_for(Duration::from_secs(10), "node to exit", || {
        child.try_wait().unwrap()
    });
    assert!(status.success(), "{status:?}");
    let posts = mock.wecom_posts();
    assert_eq!(posts.len(), 2, "{posts:?}");
    assert_eq!(
        (posts[0].stream_id.as_deref(), posts[0].content.as_str()),
        (Some("official-stream-1"), "echo: hi sdk")
    );
    assert_eq!(posts[1].chat_id.as_deref(), Some(config.user_id.as_str()));
    let stats = mock.wecom_stats();
    assert!(stats.pongs >= 1, "{stats:?}");
    assert_eq!((stats.subscribed, stats.kicked), (2, 1), "{stats:?}");
}

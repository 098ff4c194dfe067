//! The official WeCom AI-bot client, `@wecom/aibot-node-sdk` (installed pinned by
//! scripts/official-client-wecom), against the mock WeCom in this process: it subscribes,
//! receives a callback, replies with a stream message and starts one of its own, its pings
//! are answered, and a second client's subscription kicks it as the SDK expects
//! (`disconnected_event`); and its own `downloadFile` fetches and decrypts the files the
//! mock's callbacks link to, to the bytes that were sent, and refuses a damaged one. The mock
//! was written from the docs and the SDK's source, not from the adapter; this is the check
//! that the SDK takes it for WeCom.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hermes_svc::mock_platform::wecom::{WeComFileFault, WeComMedia};
use hermes_svc::mock_platform::{MockConfig, MockPlatform, WeComConfig};

use crate::harness::wait_for;
use crate::media_out::{pdf, photo, sha256};
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

/// `node tests/it/wecom_official/<script> <url> <bot id> <secret> <args>…` with the SDK on its
/// path, and its stdout's lines as they come.
fn node(mock: &MockPlatform, script: &str, args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let dir = sdk_dir();
    let config = WeComConfig::default();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/wecom_official")
        .join(script);
    let mut child = Command::new("node")
        .arg(&script)
        .args([mock.wecom_url(), config.bot_id, config.secret])
        .args(args)
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
    (child, lines)
}

/// The first line starting `want` the script printed, waiting for it.
fn line(lines: &mpsc::Receiver<String>, seen: &mut Vec<String>, want: &str) -> String {
    wait_for(Duration::from_secs(30), want, || {
        while let Ok(line) = lines.try_recv() {
            seen.push(line);
        }
        seen.iter().find(|l| l.starts_with(want)).cloned()
    })
}

#[test]
fn the_official_sdk_subscribes_receives_replies_sends_and_is_kicked() {
    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let config = WeComConfig::default();
    let (mut child, lines) = node(&mock, "check.cjs", &[]);
    let mut seen = vec![];
    let mut next = |want: &str| {
        line(&lines, &mut seen, want);
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

/// The SDK's `downloadFile` decrypts what the mock serves to the bytes sent, whichever way the
/// file came (an image, a file with its name in `Content-Disposition`, a video, a mixed
/// message's image), and throws on the damaged one: the mock's cipher is WeCom's as the SDK
/// reads it.
#[test]
fn the_official_sdk_decrypts_the_mock_s_files_and_refuses_a_damaged_one() {
    let rt = mock_runtime();
    let mock = start_mock(&rt, MockConfig::default());
    let (mut child, lines) = node(&mock, "media.cjs", &["5"]);
    let mut seen = vec![];
    line(&lines, &mut seen, "AUTHENTICATED");
    let (png, doc) = (photo(), pdf());
    let short = b"twenty-two bytes, no..".to_vec();
    let sent = [
        (WeComMedia::Image, &png, None, None),
        (WeComMedia::File, &doc, Some("会议 minutes.pdf"), None),
        (WeComMedia::Video, &short, None, None),
        (WeComMedia::MixedImage, &png, None, None),
        (WeComMedia::Image, &png, None, Some(WeComFileFault::Corrupt)),
    ];
    let ids: Vec<String> = sent
        .iter()
        .map(|(media, bytes, name, fault)| {
            mock.wecom_emit_media("zhangsan", *media, bytes, *name, *fault)
        })
        .collect();
    line(&lines, &mut seen, "DONE");
    let said = |id: &str| {
        let about = |l: &&String| l.split(' ').nth(1) == Some(id);
        seen.iter().find(about).cloned().unwrap_or_default()
    };
    for ((_, bytes, name, fault), id) in sent.iter().zip(&ids) {
        let said = said(id);
        if fault.is_some() {
            assert!(said.starts_with(&format!("FAILED {id} ")), "{said}");
            assert!(said.contains("PKCS#7 padding"), "{said}");
        } else {
            let want = format!("GOT {id} {} {}", sha256(bytes), name.unwrap_or("-"));
            assert_eq!(said, want);
        }
    }
    assert_eq!(mock.wecom_stats().file_downloads, 5);
    let status = wait_for(Duration::from_secs(10), "node to exit", || {
        child.try_wait().unwrap()
    });
    assert!(status.success(), "{status:?}");
}

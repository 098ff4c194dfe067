//! Files out, through a real gateway process: a file put in through the API, or given to
//! `send --attach`, reaches the mock Telegram and Discord natively (a photo as a photo, a
//! PDF as a document) with the same bytes, once; and across a SIGKILL between the upload
//! and the outbox's record of its answer, Discord's nonce keeps it one post, and Telegram,
//! which has no key, has one post and the message `unknown` under at-most-once.
//! Profile names start with `mo`.

use std::fs;
use std::time::Duration;

use hermes_svc::api::wire::SendBody;
use hermes_svc::gateway::outbox::{Message, Policy, State};
use hermes_svc::mock_platform::telegram::TelegramConfig;
use hermes_svc::mock_platform::{Platform, Post};
use sha2::{Digest, Sha256};

use crate::harness::wait_for;
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

/// A Telegram adapter of the rig's mock, next to its `dc` and `qq`.
const TG: &str = "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"MO_TG_TOKEN\"\n\
                  api-base = \"{base}\"\npoll-timeout = \"1s\"\npoll-grace = \"1s\"\n";
/// A chat the mock Telegram knows (`TelegramConfig::default().chats`).
const TG_CHAT: &str = "chat:1001";

pub(crate) fn photo() -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend((0..300_000u32).map(|i| (i * 7 % 251) as u8));
    png
}

pub(crate) fn pdf() -> Vec<u8> {
    let mut pdf = b"%PDF-1.4\n".to_vec();
    pdf.extend((0..50_000u32).map(|i| b'a' + (i % 26) as u8));
    pdf
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn gateway(rig: &Rig, faults: &str) -> std::process::Child {
    let token = TelegramConfig::default().token;
    rig.gateway_with(&[("MO_TG_TOKEN", &token)], faults)
}

/// `bytes` put into the gateway's media store as `name` through `POST /v1/media` (from a
/// file of the rig's `files/`).
pub(crate) fn upload(rig: &Rig, name: &str, bytes: &[u8]) -> String {
    let dir = rig.home.path().join("files");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    fs::write(&path, bytes).unwrap();
    let file = rig.rt.block_on(tokio::fs::File::open(&path)).unwrap();
    let uploaded = rig
        .rt
        .block_on(rig.client().upload(file, bytes.len() as u64, name))
        .unwrap();
    assert_eq!(
        uploaded.sha256,
        sha256(bytes),
        "the store holds the bytes sent"
    );
    uploaded.id
}

/// A message of `text` to `to` under `key`, at most once, with `media` attached.
pub(crate) fn body(key: &str, to: (&str, &str), text: &str, media: &[String]) -> SendBody {
    SendBody {
        adapter: to.0.into(),
        target: to.1.into(),
        text: text.into(),
        reply_to: None,
        idempotency_key: key.into(),
        policy: Some(Policy::AtMostOnce),
        attachments: media.to_vec(),
    }
}

pub(crate) fn submit(
    rig: &Rig,
    key: &str,
    to: (&str, &str),
    text: &str,
    media: &[String],
) -> Message {
    let body = body(key, to, text, media);
    rig.rt.block_on(rig.client().submit(&body)).unwrap().message
}

/// The posts with caption or content `text`, once the platform holds `n` of them.
pub(crate) fn posts_of(rig: &Rig, text: &str, n: usize) -> Vec<Post> {
    wait_for(
        Duration::from_secs(30),
        &format!("{n} post(s) of {text:?}"),
        || {
            let posts: Vec<Post> = rig
                .posts()
                .into_iter()
                .filter(|p| p.content == text)
                .collect();
            (posts.len() >= n).then_some(posts)
        },
    )
}

#[test]
fn a_file_through_the_api_or_the_cli_reaches_telegram_and_discord_natively_once() {
    let rig = Rig::new("mofiles", TG);
    let mut gw = gateway(&rig, "");
    assert!(rig.wait_api(&mut gw));
    let dir = rig.home.path().join("files");
    fs::create_dir_all(&dir).unwrap();
    let (photo, pdf) = (photo(), pdf());

    // The API: two files in one Discord message, one photo to Telegram.
    let chart = upload(&rig, "chart.png", &photo);
    let report = upload(&rig, "report.pdf", &pdf);
    submit(
        &rig,
        "dc-files",
        ("dc", "channel:77"),
        "two files",
        &[chart.clone(), report],
    );
    submit(&rig, "tg-photo", ("tg", TG_CHAT), "a chart", &[chart]);
    // The CLI: a document to Telegram, a photo to Discord.
    for (to, text) in [
        (format!("tg:{TG_CHAT}"), "from the cli"),
        ("dc:channel:78".into(), "cli photo"),
    ] {
        let file = if text == "cli photo" {
            "chart.png"
        } else {
            "report.pdf"
        };
        let out = rig
            .hermes()
            .args(["send", "--profile", &rig.profile, "--to", &to, "--attach"])
            .arg(dir.join(file))
            .arg(text)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let dc = posts_of(&rig, "two files", 1);
    assert_eq!(dc[0].platform, Platform::Discord);
    let sent: Vec<(&str, &str)> = dc[0]
        .files
        .iter()
        .map(|f| (f.filename.as_deref().unwrap_or(""), f.sha256.as_str()))
        .collect();
    assert_eq!(
        sent,
        [
            ("chart.png", sha256(&photo).as_str()),
            ("report.pdf", sha256(&pdf).as_str())
        ]
    );
    let tg = posts_of(&rig, "a chart", 1);
    assert_eq!(
        (tg[0].platform, tg[0].files[0].field.as_str()),
        (Platform::Telegram, "photo")
    );
    assert_eq!(tg[0].files[0].sha256, sha256(&photo));
    let cli_tg = posts_of(&rig, "from the cli", 1);
    assert_eq!(cli_tg[0].files[0].field, "document");
    assert_eq!(cli_tg[0].files[0].sha256, sha256(&pdf));
    let cli_dc = posts_of(&rig, "cli photo", 1);
    assert_eq!(cli_dc[0].files[0].sha256, sha256(&photo));

    // Once each, and the outbox keeps no copy of a file it has posted.
    rig.wait_drained(&gw, Duration::from_secs(30));
    for text in ["two files", "a chart", "from the cli", "cli photo"] {
        assert_eq!(posts_of(&rig, text, 1).len(), 1, "{text:?} posted once");
    }
    let copies = fs::read_dir(rig.profile_home().join("outbox/files"))
        .unwrap()
        .count();
    assert_eq!(
        copies, 0,
        "the outbox removed the copies of finished messages"
    );
    sigterm(&mut gw);
}

/// A target that takes no files, too many files, and an unknown media id: refused when
/// submitted, each naming the fix, and nothing queued.
#[test]
fn files_a_platform_cannot_take_are_refused_before_anything_is_queued() {
    let rig = Rig::new("morefuse", TG);
    let mut gw = gateway(&rig, "");
    assert!(rig.wait_api(&mut gw));
    let chart = upload(&rig, "chart.png", &photo());
    let refuse = |to: (&str, &str), media: Vec<String>, code: &str| {
        let body = SendBody {
            adapter: to.0.into(),
            target: to.1.into(),
            text: "x".into(),
            reply_to: None,
            idempotency_key: format!("refused-{code}"),
            policy: None,
            attachments: media,
        };
        let e = rig.rt.block_on(rig.client().submit(&body)).unwrap_err();
        assert!(e.to_string().contains(code), "{code}: {e}");
    };
    // A QQ guild channel takes no files (a group or a user does).
    refuse(
        ("qq", "channel:C1"),
        vec![chart.clone()],
        "files_unsupported",
    );
    refuse(
        ("tg", TG_CHAT),
        vec![chart.clone(), chart.clone()],
        "too_many_files",
    );
    refuse(
        ("dc", "channel:77"),
        vec!["file_nothing_here.png".into()],
        "unknown_media",
    );
    refuse(
        ("dc", "channel:77"),
        vec!["../gateway.toml".into()],
        "unknown_media",
    );
    assert_eq!(rig.state().unwrap()["outbox"]["depth"], 0);
    sigterm(&mut gw);
}

/// Killed after the platform took the upload and before the outbox recorded its answer: the
/// next life sends Discord the same nonce (one post, `sent`), and Telegram, which has no key,
/// nothing more (one post, the message `unknown` under at-most-once).
#[test]
fn a_sigkill_between_upload_and_answer_posts_each_file_once() {
    let rig = Rig::new("mokill", TG);
    let photo = photo();
    for (to, key) in [
        (("dc", "channel:77"), "kill-dc"),
        (("tg", TG_CHAT), "kill-tg"),
    ] {
        let mut gw = gateway(&rig, &format!("kill:outbox-answered:{key}"));
        assert!(rig.wait_api(&mut gw));
        let chart = upload(&rig, "chart.png", &photo);
        // The answer may be lost to the kill: the message is journalled before the worker
        // sends it either way.
        let _ = rig
            .rt
            .block_on(rig.client().submit(&body(key, to, key, &[chart])));
        killed_by_fault(&mut gw, Duration::from_secs(30));
    }
    let mut gw = gateway(&rig, "");
    assert!(rig.wait_api(&mut gw));
    rig.wait_drained(&gw, Duration::from_secs(30));
    for (key, state) in [("kill-dc", State::Sent), ("kill-tg", State::Unknown)] {
        let posts = posts_of(&rig, key, 1);
        assert_eq!(posts.len(), 1, "{key} posted once");
        assert_eq!(posts[0].files[0].sha256, sha256(&photo));
        assert_eq!(rig.message(&id_of(&rig, key)).state, state, "{key}");
    }
    sigterm(&mut gw);
}

/// The outbox's id for the message queued under `key`, from its journal.
pub(crate) fn id_of(rig: &Rig, key: &str) -> String {
    let journal = fs::read_to_string(rig.profile_home().join("outbox/journal.jsonl")).unwrap();
    journal
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|r| r["op"] == "put" && r["message"]["idempotency_key"] == key)
        .and_then(|r| r["message"]["id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("{key} in the journal"))
}

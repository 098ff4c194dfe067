//! Weixin's files both ways through a real gateway process and the mock iLink API and CDN
//! (files AES-128-ECB encrypted, Tencent's protocol doc): photos and files a WeChat user sends
//! reach the agent decrypted, with the same bytes, whichever way the message spells the key;
//! a `full_url` off the CDN is refused and said; a voice note arrives as SILK with iLink's
//! transcript as the text; and a photo and a PDF sent through the API reach the chat
//! decrypted, once, also across a SIGKILL between the post and the outbox's record (the
//! `client_id`s). Profile names start with `wm`.

use std::collections::HashMap;
use std::fs;
use std::process::Child;
use std::time::Duration;

use hermes_svc::config::Secret;
use hermes_svc::gateway::outbox::State;
use hermes_svc::mock_platform::weixin::{WeixinConfig, WeixinItem, WeixinKeyForm};
use hermes_svc::mock_platform::{MockConfig, Platform};
use hermes_svc::platform::weixin::WeixinLogin;
use serde_json::Value;

use crate::media_out::{body, id_of, pdf, photo, posts_of, sha256, submit, upload};
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

const PEER: &str = "mockuser@im.wechat";

fn adapter() -> &'static str {
    "[[adapter]]\nname = \"wx\"\nkind = \"weixin\"\napi-base = \"{base}\"\n\
     cdn-base = \"{base}/c2c\"\npoll-timeout = \"1s\"\npoll-grace = \"1s\"\n\
     backoff-min = \"200ms\"\nbackoff-max = \"1s\"\n\n"
}

/// The outbox rig with a Weixin adapter `wx` (its login stored) and `extra` after it.
fn rig(profile: &str, extra: &str, weixin: WeixinConfig) -> Rig {
    let mock = MockConfig {
        weixin: WeixinConfig {
            longpolling_timeout_ms: 1000,
            ..weixin
        },
        ..MockConfig::default()
    };
    let rig = Rig::with_mock(profile, &format!("{}{extra}", adapter()), mock);
    WeixinLogin::new(
        Secret::new(WeixinConfig::default().token),
        rig.mock.http_base(),
        "mockbot@im.bot".into(),
        PEER.into(),
    )
    .write(&rig.profile_home().join("weixin/wx.json"))
    .unwrap();
    rig
}

/// A SILK voice note's first bytes (WeChat's variant starts with 0x02).
const SILK: &[u8] = b"\x02#!SILK_V3\x0c\x00a voice note's frames";

/// Every kind of inbound file, each from a peer of its own (so their turns run side by side),
/// reaches the agent through the Relay as the Relay's `inbound` frames say it.
#[test]
fn photos_and_files_reach_the_agent_decrypted_whichever_way_the_key_is_spelt() {
    let port = crate::harness::free_port();
    let extra = format!(
        "{}[agent]\nkind = \"hermes-relay\"\nport = {port}\n",
        crate::hermes_rig::OPEN
    );
    let rig = rig("wmin", &extra, WeixinConfig::default());
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    rig.wait_adapter(&gw, "wx");
    let mut agent = crate::relay::greeted(&rig, port);

    let (png, doc) = (photo(), pdf());
    let cdn = format!("{}/c2c", rig.mock.http_base());
    let m = &rig.mock;
    let emit = |peer: &str, item, bytes: &[u8], key, full| {
        m.weixin_emit_media(peer, item, bytes, key, full);
    };
    emit(
        "hex@im.wechat",
        WeixinItem::Image,
        &png,
        WeixinKeyForm::ImageHex,
        None,
    );
    emit(
        "raw@im.wechat",
        WeixinItem::Image,
        &png,
        WeixinKeyForm::Base64Raw,
        Some(&cdn),
    );
    let pdf_item = WeixinItem::File("minutes.pdf".into());
    emit(
        "hexb64@im.wechat",
        pdf_item.clone(),
        &doc,
        WeixinKeyForm::Base64Hex,
        None,
    );
    // A full_url off the CDN's origins (another port of loopback) is not followed.
    let foreign = format!("http://127.0.0.1:{}/c2c", crate::harness::free_port());
    emit(
        "far@im.wechat",
        pdf_item,
        &doc,
        WeixinKeyForm::Base64Hex,
        Some(&foreign),
    );
    let voice = WeixinItem::Voice(Some("see you at nine".into()));
    emit(
        "voice@im.wechat",
        voice,
        SILK,
        WeixinKeyForm::Base64Hex,
        None,
    );

    let mut events: HashMap<String, Value> = HashMap::new();
    while events.len() < 5 {
        let inbound = rig.rt.block_on(agent.next_of("inbound"));
        let event = inbound["event"].clone();
        let chat = event["source"]["user_id"].as_str().unwrap().to_owned();
        events.insert(chat, event);
    }
    let media = rig.profile_home().join("media");
    let file = |chat: &str| {
        let e = &events[chat];
        let path = e["media_urls"][0]
            .as_str()
            .unwrap_or_else(|| panic!("a local path for {chat}: {e}\n{}", rig.log()));
        assert!(path.starts_with(media.to_str().unwrap()), "{path}");
        let name = path.rsplit('/').next().unwrap().to_owned();
        (
            e["message_type"].as_str().unwrap().to_owned(),
            name,
            fs::read(path).unwrap(),
        )
    };
    for chat in ["hex@im.wechat", "raw@im.wechat"] {
        let (kind, _, bytes) = file(chat);
        assert_eq!(kind, "photo", "{chat}");
        assert_eq!(sha256(&bytes), sha256(&png), "{chat}: the same bytes");
    }
    let (kind, name, bytes) = file("hexb64@im.wechat");
    assert_eq!(kind, "document");
    assert!(name.ends_with("_minutes.pdf"), "{name}");
    assert_eq!(sha256(&bytes), sha256(&doc), "the same bytes");
    let (kind, name, bytes) = file("voice@im.wechat");
    assert_eq!(kind, "voice");
    assert!(
        name.ends_with("_voice.silk"),
        "SILK, said by its name: {name}"
    );
    assert_eq!(bytes, SILK);
    assert_eq!(events["voice@im.wechat"]["text"], "see you at nine");

    let far = &events["far@im.wechat"];
    assert!(
        far["media_urls"].as_array().is_none_or(Vec::is_empty),
        "{far}"
    );
    let text = far["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("could not be fetched") && text.contains("not on the platform's own hosts"),
        "{text}"
    );
    // Five downloads: the foreign one never reached the mock.
    assert_eq!(rig.mock.weixin_stats().downloads, 4);
    sigterm(&mut gw);
}

fn gateway(rig: &Rig, faults: &str) -> Child {
    rig.gateway(faults)
}

/// A photo and a PDF through the API: the caption as a text message, then one image and one
/// file message, each uploaded to the CDN (to the `upload_full_url` the mock gives), which
/// checked its length, key and MD5; the mock reads each back decrypted.
#[test]
fn a_photo_and_a_pdf_through_the_api_reach_weixin_decrypted_once() {
    let config = WeixinConfig {
        upload_full_url: true,
        ..WeixinConfig::default()
    };
    let rig = rig("wmout", "", config);
    let mut gw = gateway(&rig, "");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    let (png, doc) = (photo(), pdf());
    let chart = upload(&rig, "chart.png", &png);
    let report = upload(&rig, "report.pdf", &doc);
    let target = format!("user:{PEER}");
    submit(
        &rig,
        "wm-files",
        ("wx", &target),
        "two files",
        &[chart, report],
    );

    let caption = posts_of(&rig, "two files", 1);
    assert!(caption[0].files.is_empty());
    let files = posts_of(&rig, "", 2);
    let f: Vec<_> = files.iter().map(|p| &p.files[0]).collect();
    assert_eq!(f[0].field, "image_item");
    assert_eq!(f[0].sha256, sha256(&png));
    assert_eq!(
        (f[1].field.as_str(), f[1].filename.as_deref()),
        ("file_item", Some("report.pdf"))
    );
    assert_eq!(f[1].sha256, sha256(&doc));
    assert!(files
        .iter()
        .all(|p| p.platform == Platform::Weixin && p.target_id == PEER));

    rig.wait_drained(&gw, Duration::from_secs(30));
    assert_eq!(rig.posts().len(), 3, "once each");
    let stats = rig.mock.weixin_stats();
    assert_eq!((stats.upload_urls, stats.uploads), (2, 2), "{stats:?}");
    assert_eq!(stats.upload_refusals, 0, "{:?}", stats.upload_refusals_said);
    assert_eq!(stats.header_violations, 0, "{:?}", stats.violations);
    assert_eq!(rig.message(&id_of(&rig, "wm-files")).state, State::Sent);
    sigterm(&mut gw);
}

/// Killed after iLink took the posts and before the outbox recorded the answer: the next
/// life uploads the photo again (an orphan on the CDN) and posts the caption and the photo
/// under the same `client_id`s, which iLink drops.
#[test]
fn a_sigkill_between_the_post_and_its_record_leaves_one_weixin_post_each() {
    let rig = rig("wmkill", "", WeixinConfig::default());
    let png = photo();
    let key = "kill-wx";
    let mut gw = gateway(&rig, &format!("kill:outbox-answered:{key}"));
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    let chart = upload(&rig, "chart.png", &png);
    let target = format!("user:{PEER}");
    let body = body(key, ("wx", &target), key, &[chart]);
    let _ = rig.rt.block_on(rig.client().submit(&body));
    killed_by_fault(&mut gw, Duration::from_secs(30));
    assert_eq!(rig.mock.weixin_stats().uploads, 1);
    assert_eq!(rig.posts().len(), 2, "the caption and the photo");

    let mut gw = gateway(&rig, "");
    assert!(rig.wait_api(&mut gw), "{}", rig.log());
    rig.wait_drained(&gw, Duration::from_secs(30));
    assert_eq!(posts_of(&rig, key, 1).len(), 1, "one caption");
    let photos = posts_of(&rig, "", 1);
    assert_eq!(photos.len(), 1, "one photo");
    assert_eq!(photos[0].files[0].sha256, sha256(&png));
    let stats = rig.mock.weixin_stats();
    assert_eq!(stats.uploads, 2, "the upload again, an orphan: {stats:?}");
    assert_eq!(rig.message(&id_of(&rig, key)).state, State::Sent);
    sigterm(&mut gw);
}

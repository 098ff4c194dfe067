//! Files out to Feishu, through a real gateway process: a photo and a PDF put in through the
//! API reach the mock Feishu chat natively (an `image` message and a `file` message, after
//! the text) with the same bytes, once; across a SIGKILL between the post and the outbox's
//! record of its answer, each piece's uuid keeps it one message (the upload made again, an
//! orphan); and a file over Feishu's 30 MB is refused before anything is queued. Profile
//! names start with `mf`.

use std::time::Duration;

use hermes_svc::gateway::outbox::State;
use hermes_svc::mock_platform::{FeishuConfig, Platform, Post};

use crate::harness::wait_for;
use crate::media_out::{body, id_of, pdf, photo, posts_of, sha256, submit, upload};
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

/// The outbox rig with a Feishu adapter `fs` against the mock Feishu (its secret is the
/// rig's `OB_FS_SECRET`).
fn feishu_rig(profile: &str) -> Rig {
    let extra = format!(
        "[[adapter]]\nname = \"fs\"\nkind = \"feishu\"\napp-id = \"{}\"\n\
         secret-env = \"OB_FS_SECRET\"\napi-base = \"{{base}}\"\n",
        FeishuConfig::default().app_id
    );
    Rig::new(profile, &extra)
}

/// The chat the mock's app is in, as a target.
fn chat() -> String {
    format!("chat:{}", FeishuConfig::default().chat_id)
}

/// The Feishu posts that carry a file, once the platform holds `n` of them.
fn file_posts(rig: &Rig, n: usize) -> Vec<Post> {
    wait_for(
        Duration::from_secs(30),
        &format!("{n} file message(s)"),
        || {
            let posts: Vec<Post> = rig
                .posts()
                .into_iter()
                .filter(|p| p.platform == Platform::Feishu && !p.files.is_empty())
                .collect();
            (posts.len() >= n).then_some(posts)
        },
    )
}

#[test]
fn a_photo_and_a_pdf_through_the_api_reach_the_feishu_chat_natively_once() {
    let rig = feishu_rig("mffiles");
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    let (photo, pdf) = (photo(), pdf());
    let chart = upload(&rig, "chart.png", &photo);
    let report = upload(&rig, "report.pdf", &pdf);
    submit(
        &rig,
        "fs-files",
        ("fs", &chat()),
        "two files",
        &[chart, report],
    );

    // The text first, then one message per file: the photo an image, the PDF a file.
    let text = posts_of(&rig, "two files", 1);
    let files = file_posts(&rig, 2);
    let sent: Vec<(&str, &str)> = files
        .iter()
        .map(|p| (p.files[0].field.as_str(), p.files[0].sha256.as_str()))
        .collect();
    assert_eq!(
        sent,
        [
            ("image", sha256(&photo).as_str()),
            ("file", sha256(&pdf).as_str())
        ]
    );
    assert_eq!(files[1].files[0].filename.as_deref(), Some("report.pdf"));
    assert!(
        text[0].received_at <= files[0].received_at,
        "the text comes first"
    );

    rig.wait_drained(&gw, Duration::from_secs(30));
    assert_eq!(rig.posts().len(), 3, "once each");
    assert_eq!(rig.mock.feishu_stats().uploads, 2, "one upload each");
    let message = rig.message(&id_of(&rig, "fs-files"));
    assert_eq!(message.state, State::Sent);
    assert_eq!(
        message.platform_id.as_deref(),
        Some(text[0].message_id.as_str())
    );
    sigterm(&mut gw);
}

/// Killed after Feishu took the uploads and the messages and before the outbox recorded the
/// answer: the next life uploads each file again (orphans) and posts under the same uuids,
/// which Feishu answers with the messages it has.
#[test]
fn a_sigkill_between_the_post_and_its_record_leaves_one_feishu_message_per_file() {
    let rig = feishu_rig("mfkill");
    let (photo, pdf) = (photo(), pdf());
    let key = "kill-fs";
    let mut gw = rig.gateway(&format!("kill:outbox-answered:{key}"));
    assert!(rig.wait_api(&mut gw));
    let chart = upload(&rig, "chart.png", &photo);
    let report = upload(&rig, "report.pdf", &pdf);
    // The answer may be lost to the kill: the message is journalled before the worker sends it.
    let body = body(key, ("fs", &chat()), key, &[chart, report]);
    let _ = rig.rt.block_on(rig.client().submit(&body));
    killed_by_fault(&mut gw, Duration::from_secs(30));
    assert_eq!(rig.mock.feishu_stats().uploads, 2);
    assert_eq!(file_posts(&rig, 2).len(), 2);

    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    rig.wait_drained(&gw, Duration::from_secs(30));
    let text = posts_of(&rig, key, 1);
    assert_eq!(text.len(), 1, "one text message");
    let files = file_posts(&rig, 2);
    assert_eq!(files.len(), 2, "one message per file");
    assert_eq!(files[0].files[0].sha256, sha256(&photo));
    assert_eq!(files[1].files[0].sha256, sha256(&pdf));
    assert_eq!(
        rig.mock.feishu_stats().uploads,
        4,
        "each file uploaded again, an orphan; the messages answered from their uuids"
    );
    let message = rig.message(&id_of(&rig, key));
    assert_eq!(message.state, State::Sent);
    assert_eq!(
        message.platform_id.as_deref(),
        Some(text[0].message_id.as_str())
    );
    sigterm(&mut gw);
}

/// A file over Feishu's 30 MB is refused when submitted, and nothing is queued or uploaded.
#[test]
fn a_file_over_feishus_limit_is_refused_before_anything_is_queued() {
    let rig = feishu_rig("mfbig");
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    let mut big = b"%PDF-1.4\n".to_vec();
    big.resize(30_000_001, b'a');
    let id = upload(&rig, "big.pdf", &big);
    let e = rig
        .rt
        .block_on(
            rig.client()
                .submit(&body("fs-big", ("fs", &chat()), "big", &[id])),
        )
        .unwrap_err();
    assert!(e.to_string().contains("file_too_large"), "{e}");
    assert_eq!(rig.state().unwrap()["outbox"]["depth"], 0);
    assert_eq!(rig.mock.feishu_stats().uploads, 0);
    assert!(rig.posts().is_empty());
    sigterm(&mut gw);
}

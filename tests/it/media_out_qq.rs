//! Files out to QQ Bot, through a real gateway process against the mock's rich-media upload
//! and send endpoints: a photo and a PDF replying to a C2C message reach the chat as two
//! media messages (`msg_type` 7) with their bytes, once, under `msg_seq` `seq` and `seq + 1`;
//! across a SIGKILL between the posts and the outbox's record, the next life uploads again
//! (orphan `file_info`s) and QQ drops the repeated posts by `msg_id` + `msg_seq` (40054005),
//! one post per file; a file over QQ's 10 MiB cap, or any file to a guild channel, is refused
//! before anything is queued. Profile names start with `mq`.

use std::time::Duration;

use hermes_svc::api::wire::SendBody;
use hermes_svc::gateway::outbox::State;
use hermes_svc::mock_platform::{Platform, Post, Target};

use crate::harness::wait_for;
use crate::media_out::{body, id_of, pdf, photo, sha256, upload};
use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

/// The C2C message the files answer (QQ's `msg_id`; the mock checks only the pair).
const MSG_ID: &str = "ROBOT1.0_c2c-evt-7";

/// A reply to [`MSG_ID`] of `text` to `to` under `key`, at most once, with `media`.
fn reply(key: &str, to: &str, text: &str, media: &[String]) -> SendBody {
    SendBody {
        reply_to: Some(MSG_ID.into()),
        ..body(key, ("qq", to), text, media)
    }
}

/// QQ's media posts to `target_id`, once the mock holds `n` of them.
fn media_posts(rig: &Rig, target_id: &str, n: usize) -> Vec<Post> {
    wait_for(
        Duration::from_secs(30),
        &format!("{n} media post(s) to {target_id}"),
        || {
            let posts: Vec<Post> = rig
                .posts()
                .into_iter()
                .filter(|p| p.platform == Platform::Qq && p.target_id == target_id)
                .filter(|p| !p.files.is_empty())
                .collect();
            (posts.len() >= n).then_some(posts)
        },
    )
}

/// What a test checks of a post's file: its field (QQ's `file_type` by name), name, digest.
fn file_of(post: &Post) -> (&str, Option<&str>, &str) {
    let f = &post.files[0];
    (f.field.as_str(), f.filename.as_deref(), f.sha256.as_str())
}

#[test]
fn a_photo_and_a_pdf_replying_to_a_c2c_message_reach_qq_as_media_messages_once() {
    let rig = Rig::new("mqfiles", "");
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    let (photo, pdf) = (photo(), pdf());
    let chart = upload(&rig, "chart.png", &photo);
    let report = upload(&rig, "report.pdf", &pdf);
    let submitted = rig
        .rt
        .block_on(rig.client().submit(&reply(
            "qq-files",
            "user:U7",
            "two files",
            &[chart.clone(), report],
        )))
        .unwrap()
        .message;
    // A group's upload is its own (a file_info posts only to the kind of chat it was for).
    rig.rt
        .block_on(
            rig.client()
                .submit(&reply("qq-group", "group:G7", "", &[chart])),
        )
        .unwrap();

    let posts = media_posts(&rig, "U7", 2);
    let seq = u64::from(submitted.seq.expect("a C2C reply is numbered"));
    let (first, second) = (&posts[0], &posts[1]);
    assert_eq!(first.target, Target::User);
    assert_eq!(
        (
            first.content.as_str(),
            first.reply_to.as_deref(),
            first.msg_seq
        ),
        ("two files", Some(MSG_ID), Some(seq)),
        "the text is the first file's caption"
    );
    assert_eq!(file_of(first), ("image", None, sha256(&photo).as_str()));
    assert_eq!(
        (second.content.as_str(), second.msg_seq),
        (" ", Some(seq + 1)),
        "no caption: a space, under the file's own msg_seq"
    );
    assert_eq!(
        file_of(second),
        ("file", Some("report.pdf"), sha256(&pdf).as_str())
    );
    let group = media_posts(&rig, "G7", 1);
    assert_eq!(
        (group[0].target, group[0].content.as_str()),
        (Target::Group, " ")
    );
    assert_eq!(group[0].files[0].sha256, sha256(&photo));

    rig.wait_drained(&gw, Duration::from_secs(30));
    assert_eq!(media_posts(&rig, "U7", 2).len(), 2, "once each");
    assert_eq!(rig.mock.qq_uploads(), 3, "one upload per file");
    let message = rig.message(&id_of(&rig, "qq-files"));
    assert_eq!(message.state, State::Sent);
    assert_eq!(
        message.platform_id.as_deref(),
        Some(first.message_id.as_str())
    );
    sigterm(&mut gw);
}

/// Killed after QQ took both uploads and both posts and before the outbox recorded the
/// answer: the next life uploads each file again (two orphan `file_info`s) and posts under
/// the same `msg_seq`s, which QQ refuses as duplicates (40054005): sent, one post per file.
#[test]
fn a_sigkill_between_the_posts_and_their_record_leaves_one_qq_post_per_file() {
    let rig = Rig::new("mqkill", "");
    let (photo, pdf) = (photo(), pdf());
    let key = "kill-qq";
    let mut gw = rig.gateway(&format!("kill:outbox-answered:{key}"));
    assert!(rig.wait_api(&mut gw));
    let chart = upload(&rig, "chart.png", &photo);
    let report = upload(&rig, "report.pdf", &pdf);
    // The answer may be lost to the kill: the message is journalled before the worker sends it.
    let _ = rig.rt.block_on(
        rig.client()
            .submit(&reply(key, "user:U8", key, &[chart, report])),
    );
    killed_by_fault(&mut gw, Duration::from_secs(30));
    assert_eq!(media_posts(&rig, "U8", 2).len(), 2);
    assert_eq!(rig.mock.qq_uploads(), 2);

    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    rig.wait_drained(&gw, Duration::from_secs(30));
    let posts = media_posts(&rig, "U8", 2);
    assert_eq!(posts.len(), 2, "one post per file: {posts:?}");
    let digests: Vec<&str> = posts.iter().map(|p| p.files[0].sha256.as_str()).collect();
    assert_eq!(digests, [sha256(&photo), sha256(&pdf)]);
    assert_eq!(
        rig.mock.qq_uploads(),
        4,
        "each file uploaded again, an orphan file_info"
    );
    let message = rig.message(&id_of(&rig, key));
    assert_eq!(message.state, State::Sent, "{message:?}\n{}", rig.log());
    assert_eq!(message.attempts, 2, "sent again: {message:?}");
    sigterm(&mut gw);
}

/// Over QQ's 10 MiB, or to a guild channel: refused when submitted, and nothing queued.
#[test]
fn a_file_over_qq_s_cap_or_to_a_guild_channel_is_refused_before_queueing() {
    let rig = Rig::new("mqrefuse", "");
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    let mut big = pdf();
    big.resize(10 * 1024 * 1024 + 1, b'x');
    let big = upload(&rig, "big.pdf", &big);
    let chart = upload(&rig, "chart.png", &photo());
    for (to, media, code) in [
        ("user:U9", big, "file_too_large"),
        ("channel:C9", chart, "files_unsupported"),
    ] {
        let e = rig
            .rt
            .block_on(rig.client().submit(&reply(code, to, "x", &[media])))
            .unwrap_err();
        assert!(e.to_string().contains(code), "{code}: {e}");
    }
    assert_eq!(rig.state().unwrap()["outbox"]["depth"], 0);
    assert_eq!(rig.mock.qq_uploads(), 0);
    sigterm(&mut gw);
}

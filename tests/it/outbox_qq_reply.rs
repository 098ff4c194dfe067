//! A QQ reply whose answer is lost (the mock records the post, then resets the connection),
//! through a real gateway's API against the mock's real send endpoints: only a group or
//! user reply carries a `msg_seq`, so only it is sent again safely, and it ends `sent` with
//! no `platform_id` (QQ's 40054005 names no message); a channel or DM reply has no `msg_seq`
//! to show, and the policy decides, as for any message the platform cannot dedupe
//! (docs/outbox.md).

use std::time::Duration;

use hermes_svc::gateway::outbox::{Message, Policy, State};
use hermes_svc::mock_platform::{Platform, SendFault};

use crate::harness::wait_for;
use crate::outbox_rig::{sigterm, Rig};

#[test]
fn only_a_group_or_user_reply_is_sent_again_after_a_lost_answer() {
    let rig = Rig::new("obqqreply", "");
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    // One message at a time, its answer lost once: what it is given, and how it ends.
    let lost = |target: &str, policy: Policy| -> (Message, Message) {
        rig.mock
            .set_send_fault(Platform::Qq, SendFault::ResetAfterProcessing(1));
        let text = format!("reply to {target}");
        let submitted = rig
            .submit(&text, ("qq", target), &text, Some("evt-7"), policy)
            .unwrap();
        let done = wait_for(Duration::from_secs(30), "the reply's outcome", || {
            let m = rig.message(&submitted.id);
            matches!(m.state, State::Sent | State::Failed | State::Unknown).then_some(m)
        });
        (submitted, done)
    };
    let posts = |target: &str| {
        let text = format!("reply to {target}");
        rig.posts()
            .into_iter()
            .filter(|p| p.content == text)
            .collect::<Vec<_>>()
    };

    for target in ["group:G7", "user:U7"] {
        let (submitted, done) = lost(target, Policy::AtMostOnce);
        assert!(submitted.seq.is_some(), "{target}: {submitted:?}");
        assert_eq!(done.state, State::Sent, "{target}: {done:?}\n{}", rig.log());
        assert_eq!(done.attempts, 2, "{target}: sent again: {done:?}");
        assert_eq!(
            done.platform_id, None,
            "{target}: confirmed by 40054005, which names no message: {done:?}"
        );
        let posted = posts(target);
        assert_eq!(posted.len(), 1, "{target}: posted once: {posted:?}");
        assert_eq!(posted[0].msg_seq, submitted.seq.map(u64::from));
    }

    let (submitted, done) = lost("channel:C7", Policy::AtMostOnce);
    assert_eq!(submitted.seq, None, "a channel reply takes no msg_seq");
    assert_eq!(done.state, State::Unknown, "{done:?}\n{}", rig.log());
    assert_eq!(done.attempts, 1, "never sent again: {done:?}");
    let posted = posts("channel:C7");
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].msg_seq, None);

    let (submitted, done) = lost("dm:D7", Policy::AtLeastOnce);
    assert_eq!(submitted.seq, None, "a DM reply takes no msg_seq");
    assert_eq!(done.state, State::Sent, "{done:?}\n{}", rig.log());
    assert_eq!(
        posts("dm:D7").len(),
        2,
        "at-least-once sends it again, and nothing drops the repeat"
    );
    sigterm(&mut gw);
}

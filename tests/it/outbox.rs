//! The outbox end to end: a real gateway process, the mock platform's send endpoints, and
//! SIGKILL at the worst moments.

use std::time::Duration;

use crate::outbox_rig::{killed_by_fault, sigterm, Rig};

/// A cron job with `deliver` posts its stdout once per run, and a gateway killed in the
/// middle of a delivery (the request about to go out) neither loses it nor doubles it: the
/// next life sends it from the outbox.
#[test]
fn a_cron_job_posts_its_output_once_per_run_across_a_kill_mid_delivery() {
    let rig = Rig::new(
        "obcron",
        "[[cron]]\nname = \"report\"\nschedule = \"*/2 * * * * *\"\n\
         command = [\"/bin/sh\", \"-c\", \"echo report-$(date +%s%N)\"]\n\
         deliver = \"dc:channel:4242\"\n",
    );
    let mut first = rig.gateway("kill:outbox-sending");
    killed_by_fault(&mut first, Duration::from_secs(20));
    assert!(rig.posts().is_empty(), "killed before the request went out");
    let queued = rig
        .log()
        .lines()
        .find_map(|l| {
            l.split("message_id=")
                .nth(1)
                .map(|m| m.split_whitespace().next().unwrap().to_owned())
        })
        .unwrap_or_else(|| panic!("the first run's message id in the log:\n{}", rig.log()));

    let mut second = rig.gateway("");
    crate::harness::wait_for(Duration::from_secs(20), "three cron posts", || {
        (rig.posts().len() >= 3).then_some(())
    });
    sigterm(&mut second);
    let posts = rig.posts();
    let mut contents: Vec<&str> = posts.iter().map(|p| p.content.as_str()).collect();
    let total = contents.len();
    contents.sort_unstable();
    contents.dedup();
    assert_eq!(contents.len(), total, "no run posted twice: {contents:?}");
    assert!(posts.iter().all(|p| p.target_id == "4242"));
    let journal = std::fs::read_to_string(rig.profile_home().join("outbox/journal.jsonl")).unwrap();
    assert!(
        journal.contains(&format!("\"op\":\"sent\",\"id\":\"{queued}\"")),
        "the first life's message was sent by the second: {queued}\n{journal}"
    );
}

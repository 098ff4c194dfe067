//! No loss under faults, for the Feishu adapter (issue 13's acceptance): 1,000 events sent
//! while 20 faults are injected, each kind in turn, and afterwards every event in the spool
//! exactly once and acked. The adapter runs in this process against the mock Feishu, as in
//! `feishu.rs`, whose checks this reuses.

use std::time::{Duration, Instant};

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::{ClientConfig, FeishuFault, Refusal};

use crate::adapter_rig::Rig;
use crate::feishu::{all_acked, mock, stored_once};

const EVENTS: usize = 1_000;
const FAULTS: usize = 20;
/// Events sent after each fault is injected, one per `GAP`, before waiting for the adapter to
/// be connected again: the events meet the fault while it acts.
const PER_FAULT: usize = EVENTS / FAULTS;
const GAP: Duration = Duration::from_millis(10);

/// The faults, in the order they come round.
fn nth_fault(k: usize) -> Vec<FeishuFault> {
    match k % 6 {
        0 => vec![FeishuFault::HalfOpen],
        1 => vec![FeishuFault::Split {
            parts: 3,
            reversed: k % 4 == 1,
        }],
        2 => vec![FeishuFault::NoPong],
        3 => vec![FeishuFault::DuplicateAcked(5)],
        4 => vec![FeishuFault::CloseAll],
        // The server refuses twice (a retryable "system busy"), then takes the connection.
        _ => vec![
            FeishuFault::RefuseConnects {
                n: 2,
                refusal: Refusal::busy(),
            },
            FeishuFault::CloseAll,
        ],
    }
}

/// Whether the connection dropped by fault `k` is up again (and, for no-pong, the fault
/// cleared once it has dropped, so the next connection gets its pongs).
fn recovered(rig: &Rig, k: usize, reconnects: u64, refused: u64) -> bool {
    let v = rig.view();
    let dropped = v.reconnects > reconnects;
    match k % 6 {
        0 | 4 => dropped && v.state == State::Connected,
        2 => {
            if dropped {
                rig.mock.clear_feishu_faults();
            }
            dropped && v.state == State::Connected
        }
        5 => {
            dropped && rig.mock.feishu_stats().refused >= refused + 2 && v.state == State::Connected
        }
        // Split does not drop the connection, and lasts until cleared.
        1 => {
            rig.mock.clear_feishu_faults();
            true
        }
        // Nor does redelivery, which is used up by the next five acks, well within the
        // events sent meanwhile.
        _ => true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feishu_loses_and_repeats_nothing_across_twenty_faults_in_a_thousand_events() {
    let rig = Rig::start("feishu", mock(ClientConfig::default()), false, "").await;
    rig.connected().await;
    let started = Instant::now();
    let mut sent = 0;
    for k in 0..FAULTS {
        let (reconnects, refused) = (rig.view().reconnects, rig.mock.feishu_stats().refused);
        for fault in nth_fault(k) {
            rig.mock.set_feishu_fault(fault);
        }
        for _ in 0..PER_FAULT {
            rig.mock.feishu_emit(1);
            sent += 1;
            tokio::time::sleep(GAP).await;
        }
        rig.until(Duration::from_secs(15), &format!("fault {k} over"), |r| {
            recovered(r, k, reconnects, refused).then_some(())
        })
        .await;
    }
    assert_eq!(sent, EVENTS);
    assert_eq!(rig.mock.feishu_events().len(), EVENTS);
    // Events pushed into a dead connection come again when their ack does not (3 s).
    all_acked(&rig, Duration::from_secs(20)).await;
    stored_once(&rig);
    let v = rig.view();
    let events = rig.mock.feishu_events();
    let redelivered = events.iter().filter(|e| e.deliveries >= 2).count();
    let stats = rig.mock.feishu_stats();
    println!(
        "{EVENTS} events, {FAULTS} faults in {:.1} s: {} reconnects, {} refused connects, \
         {redelivered} events pushed more than once, {} acks",
        started.elapsed().as_secs_f64(),
        v.reconnects,
        stats.refused,
        rig.mock.feishu_acks().len()
    );
    // Half-open 4, no pong 3, close-all 3 and refusals 3 times each dropped the connection.
    assert!(v.reconnects >= 13, "{v:?}");
    assert!(stats.refused >= 6, "{stats:?}");
    // Redelivered by the duplicate fault (3 x 5) at least, and by the dead connections.
    assert!(redelivered >= 15, "{redelivered} redelivered");
    assert_eq!(v.state, State::Connected);
    rig.shutdown().await;
}

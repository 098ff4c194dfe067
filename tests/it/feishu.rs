//! A Feishu adapter, in this process, against the mock Feishu over loopback: events into the
//! spool before their ack, split and redelivered events stored once, half-open and stopped
//! pongs detected within PingInterval plus the pong deadline, a server that keeps refusing
//! retried past its ReconnectCount, a pong's ClientConfig applied at once, fatal refusals.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use hermes_svc::gateway::adapter::AdapterExit;
use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::{
    ClientConfig, FeishuConfig, FeishuFault, FeishuMessage, MockConfig, Refusal,
};

use crate::adapter_rig::{ms, Rig};

/// The mock's ping interval (its ClientConfig default) and our pong deadline, its fifth.
const PING: Duration = Duration::from_secs(1);
const PONG_DEADLINE: Duration = Duration::from_millis(200);

pub(crate) fn mock(client_config: ClientConfig) -> MockConfig {
    MockConfig {
        feishu: FeishuConfig {
            // The rig hands every adapter the secret "tok".
            app_secret: "tok".into(),
            client_config,
            ..FeishuConfig::default()
        },
        ..MockConfig::default()
    }
}

async fn start(extra: &str) -> Rig {
    start_with(ClientConfig::default(), extra).await
}

async fn start_with(client_config: ClientConfig, extra: &str) -> Rig {
    let rig = Rig::start("feishu", mock(client_config), false, extra).await;
    rig.connected().await;
    // The adapter is connected once its upgrade is answered, a moment before the mock's
    // side registers the connection; a fault set in between would reach no connection.
    rig.until(
        Duration::from_secs(10),
        "the mock's side of the connection",
        |r| (r.mock.feishu_stats().live_connections >= 1).then_some(()),
    )
    .await;
    rig
}

/// Wait until every event the mock generated is acked, checking all the while that nothing
/// was acked before it was in the spool.
pub(crate) async fn all_acked(rig: &Rig, limit: Duration) {
    rig.until(limit, "every event acked", |r| {
        let acked: Vec<String> = r
            .mock
            .feishu_events()
            .into_iter()
            .filter(|e| e.acked_at.is_some())
            .map(|e| e.event_id)
            .collect();
        let stored: BTreeSet<String> = r.spool_ids().into_iter().collect();
        for id in &acked {
            assert!(stored.contains(id), "{id} acked before it was stored");
        }
        r.mock.feishu_unacked().is_empty().then_some(())
    })
    .await;
}

/// The spool holds each generated event exactly once.
pub(crate) fn stored_once(rig: &Rig) {
    let ids = rig.spool_ids();
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no event twice: {ids:?}");
    let want: BTreeSet<String> = rig
        .mock
        .feishu_events()
        .into_iter()
        .map(|e| e.event_id)
        .collect();
    assert_eq!(ids.into_iter().collect::<BTreeSet<_>>(), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_spooled_once_then_acked_with_the_frame_echoed() {
    let rig = start("").await;
    rig.mock.feishu_emit(5);
    all_acked(&rig, Duration::from_secs(10)).await;
    stored_once(&rig);
    let acks = rig.mock.feishu_acks();
    assert_eq!(acks.len(), 5, "{acks:?}");
    for a in &acks {
        assert_eq!(a.code, Some(200));
        assert!(a.echoed, "the ack echoes the pushed frame: {a:?}");
        assert!(a
            .biz_rt
            .as_deref()
            .is_some_and(|b| b.parse::<u64>().is_ok()));
    }
    let stats = rig.mock.feishu_stats();
    assert!(
        stats.pongs >= 1 && stats.pings_wrong_service == 0,
        "{stats:?}"
    );
    let v = rig.view();
    assert_eq!((v.state, v.reconnects), (State::Connected, 0));
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_and_redelivered_events_are_stored_once() {
    let rig = start("").await;
    rig.mock.set_feishu_fault(FeishuFault::Split {
        parts: 3,
        reversed: true,
    });
    let chat = FeishuConfig::default().chat_id;
    let text = "一条被拆成三段的消息 ".repeat(40);
    rig.mock
        .feishu_emit_message(FeishuMessage::text(&chat, &text));
    rig.mock.feishu_emit(2);
    all_acked(&rig, Duration::from_secs(10)).await;
    rig.mock.clear_feishu_faults();
    // Every event comes again after its ack: the redelivery is acked and not stored.
    rig.mock.set_feishu_fault(FeishuFault::DuplicateAcked(3));
    rig.mock.feishu_emit(3);
    rig.until(Duration::from_secs(10), "the redeliveries acked", |r| {
        let twice = r
            .mock
            .feishu_events()
            .iter()
            .filter(|e| e.deliveries >= 2)
            .count();
        let acked_again = r
            .mock
            .feishu_acks()
            .iter()
            .filter(|a| a.delivery >= 2 && a.code == Some(200))
            .count();
        (twice == 3 && acked_again == 3).then_some(())
    })
    .await;
    all_acked(&rig, Duration::from_secs(5)).await;
    stored_once(&rig);
    let events = hermes_svc::gateway::spool::read(&rig.dir.path().join("inbox"), None).unwrap();
    let first = events
        .iter()
        .find(|e| e.id == rig.mock.feishu_events()[0].event_id);
    let content = format!("{:?}", first.unwrap());
    assert!(
        content.contains("一条被拆成三段的消息"),
        "the parts in order: {content}"
    );
    rig.shutdown().await;
}

/// Put the connection in `fault` a while after connecting, and measure how long until the
/// adapter drops it.
async fn detection(fault: FeishuFault, events_meanwhile: bool) -> (Duration, String) {
    let rig = start("").await;
    tokio::time::sleep(PING * 2 + PING.mul_f64(fastrand::f64())).await;
    let at = Instant::now();
    rig.mock.set_feishu_fault(fault);
    // About 50 events a second: a chat's busy minute, well short of a flood.
    let mut polls = 0u32;
    let detected = rig
        .until(PING * 4, "the dead connection dropped", |r| {
            polls += 1;
            if events_meanwhile && polls % 4 == 0 {
                r.mock.feishu_emit(1);
            }
            (r.view().reconnects >= 1).then(Instant::now)
        })
        .await;
    let error = rig.view().last_error.unwrap_or_default();
    rig.mock.clear_feishu_faults();
    // It comes back, and what came meanwhile is stored once.
    rig.until(Duration::from_secs(10), "reconnected", |r| {
        (r.view().state == State::Connected && r.mock.feishu_stats().live_connections >= 1)
            .then_some(())
    })
    .await;
    all_acked(&rig, Duration::from_secs(20)).await;
    stored_once(&rig);
    rig.shutdown().await;
    (detected - at, error)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_is_dropped_within_the_ping_interval_plus_the_pong_deadline() {
    for _ in 0..3 {
        let (latency, error) = detection(FeishuFault::HalfOpen, false).await;
        println!("feishu half-open: dropped after {:.0} ms", ms(latency));
        assert!(
            latency <= PING + PONG_DEADLINE + Duration::from_millis(150),
            "{latency:?}"
        );
        assert!(error.contains("half-open"), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_pongs_are_caught_while_events_still_flow() {
    for _ in 0..3 {
        let (latency, error) = detection(FeishuFault::NoPong, true).await;
        println!("feishu no pong: dropped after {:.0} ms", ms(latency));
        assert!(
            latency <= PING + PONG_DEADLINE + Duration::from_millis(150),
            "{latency:?}"
        );
        assert!(error.contains("stopped answering pings"), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pong_with_a_new_client_config_changes_the_ping_interval_at_once() {
    let rig = start("").await;
    let slower = ClientConfig {
        ping_interval: 3,
        ..ClientConfig::default()
    };
    rig.mock.set_feishu_fault(FeishuFault::ClientConfig(slower));
    // The next pong carries it.
    tokio::time::sleep(PING + Duration::from_millis(300)).await;
    let before = rig.mock.feishu_stats().pings;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let pings = rig.mock.feishu_stats().pings - before;
    assert!(
        (1..=3).contains(&pings),
        "{pings} pings in 6 s at a 3 s interval"
    );
    let v = rig.view();
    assert_eq!((v.state, v.reconnects), (State::Connected, 0), "{v:?}");
    // And faster again, from the next pong on.
    rig.mock
        .set_feishu_fault(FeishuFault::ClientConfig(ClientConfig::default()));
    tokio::time::sleep(Duration::from_secs(3) + Duration::from_millis(300)).await;
    let before = rig.mock.feishu_stats().pings;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pings = rig.mock.feishu_stats().pings - before;
    assert!(
        (2..=4).contains(&pings),
        "{pings} pings in 3 s at a 1 s interval"
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_past_reconnect_count_are_retried_and_said_in_status() {
    // ReconnectCount is 3: the SDKs would give up after the third refusal.
    let rig = start("").await;
    rig.mock.set_feishu_fault(FeishuFault::RefuseConnects {
        n: 8,
        refusal: Refusal::auth_failed(),
    });
    rig.mock.set_feishu_fault(FeishuFault::CloseAll);
    let said = rig
        .until(Duration::from_secs(30), "status past ReconnectCount", |r| {
            let v = r.view();
            let e = v.last_error.unwrap_or_default();
            (e.contains("ReconnectCount") && e.contains("Handshake-Status 514")).then_some(e)
        })
        .await;
    println!("status: {said}");
    let back = rig
        .until(Duration::from_secs(30), "the refusals used up", |r| {
            (r.mock.feishu_stats().refused >= 8).then(Instant::now)
        })
        .await;
    let connected = rig
        .until(Duration::from_secs(30), "connected again", |r| {
            (r.view().state == State::Connected && r.mock.feishu_stats().live_connections == 1)
                .then(Instant::now)
        })
        .await;
    println!(
        "connected {:.0} ms after the server came back",
        ms(connected - back)
    );
    assert!(connected - back < Duration::from_secs(30));
    rig.mock.feishu_emit(2);
    all_acked(&rig, Duration::from_secs(10)).await;
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_limit_and_a_wrong_secret_are_fatal() {
    let mut rig = Rig::start("feishu", mock(ClientConfig::default()), false, "").await;
    rig.connected().await;
    rig.mock.set_feishu_fault(FeishuFault::RefuseConnects {
        n: 1,
        refusal: Refusal::conn_limit(),
    });
    rig.mock.set_feishu_fault(FeishuFault::CloseAll);
    match rig.exit().await {
        AdapterExit::Fatal(m) => assert!(m.contains("1000040350"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(rig.view().state, State::Fatal);

    let wrong = MockConfig {
        feishu: FeishuConfig {
            app_secret: "not the rig's".into(),
            ..FeishuConfig::default()
        },
        ..MockConfig::default()
    };
    let mut rig = Rig::start("feishu", wrong, false, "").await;
    match rig.exit().await {
        AdapterExit::Fatal(m) => {
            assert!(
                m.contains("cli_mock0000000000001") && m.contains("check app-id"),
                "{m}"
            );
            assert!(!m.contains("tok"), "no secret in the reason: {m}");
        }
        other => panic!("{other:?}"),
    }
}

/// A first endpoint discovery that reaches no server (the mock drops every connection, as
/// after a laptop wakes) waited out ReconnectInterval, 120 s until a server says otherwise:
/// two minutes deaf after a blip. Such a failure now gets the normal backoff from
/// `backoff-min`, and the adapter connects as soon as the server is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_connect_that_reaches_no_server_is_retried_on_the_backoff_not_reconnect_interval() {
    use hermes_svc::mock_platform::Fault;
    let rig = Rig::start_faulty(
        "feishu",
        mock(ClientConfig::default()),
        false,
        "",
        Fault::Refuse,
    )
    .await;
    rig.until(Duration::from_secs(10), "a failed first discovery", |r| {
        r.view().last_error.is_some().then_some(())
    })
    .await;
    let back = Instant::now();
    rig.mock.clear_fault();
    rig.until(
        Duration::from_secs(10),
        "connected once the server is back",
        |r| (r.view().state == State::Connected).then_some(()),
    )
    .await;
    assert!(
        back.elapsed() < Duration::from_secs(10),
        "connected {:?} after the server came back",
        back.elapsed()
    );
    rig.shutdown().await;
}

//! The rules the real platforms set, each against a mock that behaves as the platform
//! documents (docs/adapters.md names the sources): QQ's 4004 and 4900-4913, resumes that keep
//! dying, op 9 after every Identify, the session start limit, the token endpoint's error body,
//! a token that expired while the machine slept, the intents a new QQ bot is granted, the
//! resume URL, long replays and WebSocket pings.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::gateway::adapter::proxy::ProxyEnv;
use hermes_svc::gateway::adapter::{AdapterExit, Shared};
use hermes_svc::gateway::health::{Registry, State};
use hermes_svc::gateway::spool::Spool;
use hermes_svc::mock_platform::{Fault, MockConfig, MockPlatform, SessionStartLimit};

use crate::adapter_rig::{hb, start_adapter, toml_for, Rig, HB};
use crate::harness::scratch_dir;

/// QQ's intents by bit: guilds, guild-members, group-and-c2c-event, public-guild-messages.
/// What a new bot is granted: bot-docs `event-emit.md` lists the first two and the last as
/// the defaults, and new bots reach READY with group-and-c2c-event too.
const FRESH_QQ_BOT: u64 = (1 << 0) | (1 << 1) | (1 << 25) | (1 << 30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qq_4004_drops_the_token_fetches_a_new_one_and_resumes() {
    let rig = Rig::start("qqbot", hb(HB), false, "").await;
    rig.connected().await;
    let requests = rig.mock.stats().http_requests;
    // The platform stops honouring the token and closes with 4004.
    rig.mock.expire_access_tokens();
    rig.mock.set_fault(Fault::Close(4004));
    rig.until(Duration::from_secs(5), "a resume with a new token", |r| {
        let s = r.mock.stats();
        (s.resumes >= 1 && r.view().state == State::Connected).then_some(())
    })
    .await;
    let s = rig.mock.stats();
    assert_eq!(s.identifies, 1, "the session survives a stale token");
    assert_eq!(s.token_rejections, 0, "the new token was accepted at once");
    assert!(s.http_requests > requests, "a new token was fetched");
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_that_expired_during_a_suspend_is_replaced_before_reconnecting() {
    let mock = MockConfig {
        token_lifetime: Duration::from_secs(3600),
        ..hb(HB)
    };
    let rig = Rig::start("qqbot", mock, false, "").await;
    rig.connected().await;
    // Two hours asleep: the monotonic clock stood still, the wall clock did not, and the
    // platform let the token lapse. On waking, the connection is gone.
    hermes_svc::test_hook::skew_wall_clock(Duration::from_secs(2 * 3600));
    rig.mock.expire_access_tokens();
    rig.mock.set_fault(Fault::Close(4009));
    rig.until(Duration::from_secs(5), "a resume after the suspend", |r| {
        (r.mock.stats().resumes >= 1 && r.view().state == State::Connected).then_some(())
    })
    .await;
    assert_eq!(
        rig.mock.stats().token_rejections,
        0,
        "the stale token was never offered: the wall clock said it had expired"
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qq_internal_errors_and_bad_payloads_identify_afresh() {
    let rig = Rig::start("qqbot", hb(HB), false, "").await;
    rig.connected().await;
    for (identifies, code) in (2..).zip([4903, 4001, 4002]) {
        rig.mock.set_fault(Fault::Close(code));
        // Each new Identify waits for its slot: one per 5 s.
        rig.until(
            Duration::from_secs(8),
            &format!("identify after close {code}"),
            |r| {
                (r.mock.stats().identifies >= identifies && r.view().state == State::Connected)
                    .then_some(())
            },
        )
        .await;
        assert_eq!(rig.mock.stats().resumes, 0, "close {code} must not resume");
    }
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_the_platform_keeps_dropping_end_in_an_identify_and_count_as_outage() {
    // Every resume is accepted and closed again at once, with a code that allows resuming.
    let rig = Rig::start_faulty("qqbot", hb(HB), true, "", Fault::CloseAfterResume(4009)).await;
    rig.connected().await;
    rig.proxy.as_ref().unwrap().blackhole_existing();
    let mut samples = vec![];
    let end = Instant::now() + Duration::from_secs(15);
    while rig.mock.stats().identifies < 2 {
        assert!(
            Instant::now() < end,
            "never identified: {:?}",
            rig.mock.stats()
        );
        samples.push((Instant::now(), rig.view()));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let s = rig.mock.stats();
    assert_eq!(
        s.resumes, 3,
        "three short-lived resumes, then a new session"
    );
    // The outage ran from the zombie's detection through every accepted-and-dropped resume.
    let detected = samples
        .iter()
        .find(|(_, v)| v.state != State::Connected)
        .map(|(t, _)| *t)
        .unwrap();
    let (at, view) = samples
        .iter()
        .rev()
        .find(|(_, v)| v.state != State::Connected)
        .unwrap();
    let outage = view.outage.expect("an outage is running");
    println!("outage {outage:?} at {:?} after detection", *at - detected);
    assert!(
        outage + Duration::from_millis(50) >= *at - detected,
        "outage {outage:?} restarted: the loop began {:?} earlier",
        *at - detected
    );
    rig.until(Duration::from_secs(5), "READY", |r| {
        (r.view().state == State::Connected).then_some(())
    })
    .await;
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn op_9_after_every_identify_gets_the_growing_backoff() {
    let min = Duration::from_millis(400);
    let rig = Rig::start_faulty(
        "qqbot",
        hb(HB),
        false,
        "backoff-min = \"400ms\"\nbackoff-max = \"30s\"\n",
        Fault::RejectIdentify,
    )
    .await;
    let s = rig
        .until(Duration::from_secs(25), "four identifies", |r| {
            let s = r.mock.stats();
            (s.identifies >= 4 && s.connection_times.len() >= 4).then_some(s)
        })
        .await;
    let mut previous = min;
    for i in 0..3 {
        // op 9 comes at once after Identify; the next connection follows the backoff.
        let wait = s.connection_times[i + 1] - s.identify_times[i];
        println!("wait after op 9 #{}: {wait:?}", i + 1);
        assert!(
            wait >= min,
            "wait {wait:?} is under backoff-min: a busy loop"
        );
        assert!(
            wait <= previous * 3 + Duration::from_millis(300),
            "{wait:?} after {previous:?}"
        );
        previous = wait;
    }
    // The session start limit spaces the Identify calls themselves.
    for pair in s.identify_times.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(4_950),
            "{pair:?}"
        );
    }
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_adapters_on_one_token_share_the_session_start_limit() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mock = Arc::new(MockPlatform::start(hb(HB)).await.unwrap());
    let dir = scratch_dir("identify-queue");
    let spool = Arc::new(Spool::open(&dir.path().join("inbox")).unwrap());
    let registry = Registry::new();
    // One gateway: one Shared, so one queue per credential. Every adapter has token "tok".
    let shared = Shared::new(ProxyEnv::default()).unwrap();
    let mut adapters = vec![];
    for i in 0..5 {
        let text = toml_for("discord", &mock.http_base(), "")
            .replace("name = \"a\"", &format!("name = \"a{i}\""));
        adapters.push(start_adapter(&text, spool.clone(), &registry, &shared));
    }
    let end = Instant::now() + Duration::from_secs(35);
    while registry
        .snapshot()
        .components
        .iter()
        .any(|c| c.state != State::Connected)
    {
        assert!(Instant::now() < end, "{:?}", registry.snapshot());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let times = mock.stats().identify_times;
    assert_eq!(times.len(), 5);
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        println!("identify gap: {gap:?}");
        assert!(
            gap >= Duration::from_millis(4_950),
            "max_concurrency 1: {gap:?}"
        );
    }
    for (_, stop, task) in adapters {
        let _ = stop.send(true);
        assert_eq!(task.await.unwrap(), AdapterExit::Shutdown);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_daily_budget_is_waited_out_not_spent_further() {
    let mock = MockConfig {
        session_start_limit: SessionStartLimit {
            total: 1000,
            remaining: 0,
            reset_after: Duration::from_secs(2),
            max_concurrency: 1,
        },
        ..hb(HB)
    };
    let started = Instant::now();
    let rig = Rig::start("discord", mock, false, "").await;
    let waiting = rig
        .until(Duration::from_secs(2), "waiting for the limit", |r| {
            r.view()
                .last_error
                .filter(|e| e.contains("session start limit"))
        })
        .await;
    println!("{waiting}");
    rig.connected().await;
    let first = rig.mock.stats().identify_times[0];
    assert!(
        first - started >= Duration::from_millis(1_900),
        "identified {:?} after start, before the budget reset",
        first - started
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_app_secret_is_fatal_with_the_platforms_code_and_message() {
    let mock = MockConfig {
        expected_secret: Some("the-right-secret".into()),
        ..hb(HB)
    };
    let mut rig = Rig::start("qqbot", mock, false, "").await;
    match rig.exit().await {
        AdapterExit::Fatal(reason) => {
            println!("{reason}");
            assert!(reason.contains("100016"), "{reason}");
            assert!(reason.contains("invalid appid or secret"), "{reason}");
            assert!(reason.contains("app-id 1"), "{reason}");
        }
        other => panic!("expected fatal, got {other:?}"),
    }
    assert_eq!(rig.mock.stats().connections, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_qq_bot_connects_with_the_default_intents_and_4014_names_the_intent() {
    let fresh = || MockConfig {
        granted_intents: Some(FRESH_QQ_BOT),
        ..hb(HB)
    };
    let rig = Rig::start("qqbot", fresh(), false, "").await;
    rig.connected().await;
    rig.shutdown().await;

    let mut rig = Rig::start(
        "qqbot",
        fresh(),
        false,
        "intents = [\"public-guild-messages\", \"direct-message\"]\n",
    )
    .await;
    match rig.exit().await {
        AdapterExit::Fatal(reason) => {
            println!("{reason}");
            assert!(reason.contains("4014"), "{reason}");
            assert!(reason.contains("remove direct-message"), "{reason}");
            assert!(!reason.contains("public-guild-messages"), "{reason}");
        }
        other => panic!("expected fatal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_url_that_cannot_be_reached_is_dropped_and_the_session_still_resumes() {
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mock = MockConfig {
        resume_gateway_url: Some(format!("ws://{dead}")),
        ..hb(HB)
    };
    let rig = Rig::start("discord", mock, false, "").await;
    rig.connected().await;
    rig.mock.set_fault(Fault::Close(4000));
    rig.until(Duration::from_secs(5), "a resume", |r| {
        (r.mock.stats().resumes >= 1 && r.view().state == State::Connected).then_some(())
    })
    .await;
    let s = rig.mock.stats();
    assert_eq!(s.identifies, 1, "the session was kept");
    assert!(
        rig.view().attempts <= 4,
        "one failed attempt at the resume URL, then the gateway URL: {:?}",
        rig.view()
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_replay_that_makes_progress_is_not_cut_off_by_hello_timeout() {
    // A 2 s heartbeat: its ACK, queued behind the paced replay like every other frame, may
    // be late once, which liveness tolerates while frames arrive.
    let rig = Rig::start(
        "qqbot",
        hb(Duration::from_secs(2)),
        true,
        "hello-timeout = \"300ms\"\n",
    )
    .await;
    rig.connected().await;
    rig.mock
        .set_fault(Fault::SlowReplay(Duration::from_millis(50)));
    rig.proxy.as_ref().unwrap().blackhole_existing();
    rig.mock.emit(20);
    rig.until(
        Duration::from_secs(10),
        "a resume with the whole replay",
        |r| (r.spool_ids().len() >= 20 && r.view().state == State::Connected).then_some(()),
    )
    .await;
    let s = rig.mock.stats();
    assert_eq!(
        (s.resumes, s.identifies),
        (1, 1),
        "one resume carried a 1 s replay past a 300 ms hello-timeout"
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qq_sends_no_websocket_pings_unless_asked_and_discord_does() {
    for (kind, extra, pings) in [
        ("qqbot", "", false),
        ("qqbot", "ws-ping = true\n", true),
        ("discord", "", true),
    ] {
        let rig = Rig::start(kind, hb(Duration::from_millis(200)), false, extra).await;
        rig.connected().await;
        let heartbeats = rig.mock.stats().heartbeats;
        rig.until(Duration::from_secs(5), "six heartbeats", |r| {
            (r.mock.stats().heartbeats >= heartbeats + 6).then_some(())
        })
        .await;
        let sent = rig.mock.stats().ws_pings;
        assert_eq!(sent > 0, pings, "{kind} {extra:?}: {sent} WebSocket pings");
        rig.shutdown().await;
    }
}

/// The platform forgets the access tokens it issued, and a connection attempt fails, so the
/// gateway URL is discovered again with the cached token: `/gateway/bot` answers 401. That
/// stopped the gateway for good (exit 78) with a valid AppSecret. Only the token endpoint can
/// reject the credential: the stale token is dropped, a new one fetched, and the adapter
/// connects again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_token_at_gateway_bot_is_replaced_never_fatal() {
    let rig = Rig::start("qqbot", hb(HB), false, "").await;
    rig.connected().await;
    let tokens = rig.mock.stats().http_requests;
    rig.mock.expire_access_tokens();
    // Close the session, and let the next connection get no Hello: the attempt fails and
    // the gateway URL is forgotten.
    rig.mock.set_fault(Fault::Close(4009));
    rig.mock.set_fault(Fault::NoHello);
    rig.until(Duration::from_secs(10), "a failed attempt", |r| {
        let v = r.view();
        v.last_error
            .as_deref()
            .is_some_and(|e| e.contains("Hello"))
            .then_some(())
    })
    .await;
    rig.mock.clear_fault();
    rig.until(Duration::from_secs(10), "connected with a new token", |r| {
        let v = r.view();
        assert_ne!(v.state, State::Fatal, "{v:?}");
        (v.state == State::Connected).then_some(())
    })
    .await;
    assert!(
        rig.mock.stats().http_requests > tokens + 1,
        "a new token was fetched"
    );
    rig.shutdown().await;
}

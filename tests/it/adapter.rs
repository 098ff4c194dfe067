//! One adapter against the mock platform over real loopback sockets: zombie detection,
//! resume, close codes, connect failures, reconnect spread.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::config;
use hermes_svc::gateway::adapter::proxy::ProxyEnv;
use hermes_svc::gateway::adapter::{AdapterExit, Deps, Shared};
use hermes_svc::gateway::health::{ComponentKind, Registry, State};
use hermes_svc::gateway::spool::Spool;
use hermes_svc::mock_platform::{Fault, MockPlatform};
use tokio::sync::watch;

use crate::adapter_rig::{chatter, hb, ms, start_adapter, toml_for, Rig, HB};
use crate::harness::scratch_dir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_is_detected_resumed_at_once_and_loses_nothing() {
    let rig = Rig::start("qqbot", hb(HB), true, "").await;
    rig.connected().await;
    let talk = chatter(&rig.mock, Duration::from_millis(20));
    tokio::time::sleep(HB * 2).await;

    let fault = Instant::now();
    rig.proxy.as_ref().unwrap().blackhole_existing();
    let detected = rig
        .until(HB * 4, "zombie detection", |r| {
            (r.view().reconnects >= 1).then(Instant::now)
        })
        .await;
    let resumed = rig
        .until(Duration::from_secs(2), "RESUMED", |r| {
            (r.mock.stats().resumes >= 1).then(Instant::now)
        })
        .await;
    let ack = HB / 4;
    let latency = detected - fault;
    println!(
        "half-open: detected after {:.0} ms ({:.2} intervals), resumed {:.0} ms after detection",
        ms(latency),
        latency.as_secs_f64() / HB.as_secs_f64(),
        ms(resumed - detected)
    );
    assert!(
        latency <= HB + ack + Duration::from_millis(150),
        "{latency:?}"
    );
    assert!(rig
        .view()
        .last_error
        .unwrap_or_default()
        .contains("half-open"));
    // No close handshake is awaited: the new connection follows at once.
    assert!(
        resumed - detected < Duration::from_millis(300),
        "{:?}",
        resumed - detected
    );
    assert_eq!(rig.mock.stats().identifies, 1, "resumed, not re-identified");
    assert!(rig.mock.stats().last_resume_seq.is_some_and(|s| s > 1));

    tokio::time::sleep(HB * 2).await;
    drop(talk);
    let generated = rig.mock.generated_event_ids();
    let ids = rig
        .until(Duration::from_secs(5), "the spool to catch up", |r| {
            let ids = r.spool_ids();
            (ids.len() >= generated.len()).then_some(ids)
        })
        .await;
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "no event twice");
    let mut want = generated.clone();
    want.sort();
    assert_eq!(
        sorted, want,
        "every event sent before, during and after the fault"
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_write_path_is_detected_on_the_second_missed_answer() {
    let rig = Rig::start("discord", hb(HB), false, "").await;
    rig.connected().await;
    let _talk = chatter(&rig.mock, Duration::from_millis(20));
    tokio::time::sleep(HB).await;
    let fault = Instant::now();
    rig.mock.set_fault(Fault::DropClientFrames);
    let detected = rig
        .until(HB * 6, "write-path detection", |r| {
            (r.view().reconnects >= 1).then(Instant::now)
        })
        .await;
    let latency = detected - fault;
    println!("write path dead: detected after {:.0} ms", ms(latency));
    // The first unanswered probe goes out within an interval of the fault; while frames still
    // arrive each miss is declared at the next probe of its kind, so the second miss (the
    // verdict) comes one interval later: more than one interval, at most three.
    assert!(
        latency > HB,
        "the first miss is tolerated while frames arrive: {latency:?}"
    );
    assert!(
        latency <= HB * 3 + Duration::from_millis(150),
        "{latency:?}"
    );
    let err = rig.view().last_error.unwrap_or_default();
    assert!(err.contains("write path dead"), "{err}");
    rig.until(Duration::from_secs(3), "resume", |r| {
        (r.mock.stats().resumes >= 1).then_some(())
    })
    .await;
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_ack_is_detected_and_a_slow_one_is_not() {
    let interval = Duration::from_secs(1);
    let ack = Duration::from_millis(500);
    let extra = "ack-timeout = \"500ms\"\n";
    let slow = Rig::start("discord", hb(interval), false, extra).await;
    let none = Rig::start("discord", hb(interval), false, extra).await;
    slow.connected().await;
    none.connected().await;
    slow.mock.set_fault(Fault::SlowAck(ack.mul_f64(0.8)));
    none.mock.set_fault(Fault::NoAck);
    none.until(interval * 4, "no-ACK detection", |r| {
        (r.view().reconnects >= 1).then_some(())
    })
    .await;
    // Over the same span and more, the slow but timely ACKs never trip the detector.
    let end = Instant::now() + interval * 4;
    while Instant::now() < end {
        assert_eq!(
            slow.view().reconnects,
            0,
            "slow ACK at 0.8x the deadline was declared missed"
        );
        assert_eq!(slow.view().state, State::Connected);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        slow.mock.stats().acks >= 3,
        "ACKs kept coming: {:?}",
        slow.mock.stats()
    );
    slow.shutdown().await;
    none.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_codes_and_ops_are_handled_per_the_table() {
    let rig = Rig::start("qqbot", hb(HB), false, "").await;
    rig.connected().await;
    let mut resumes = 0;
    for code in [4000, 4009, 1000, 1001, 1006] {
        tokio::time::sleep(Duration::from_millis(150)).await;
        rig.mock.set_fault(Fault::Close(code));
        resumes += 1;
        rig.until(
            Duration::from_secs(3),
            &format!("resume after close {code}"),
            |r| {
                (r.mock.stats().resumes >= resumes && r.view().state == State::Connected)
                    .then_some(())
            },
        )
        .await;
        assert_eq!(
            rig.mock.stats().identifies,
            1,
            "close {code} must resume, not identify"
        );
    }
    // op 7: reconnect and resume at once.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let t = Instant::now();
    rig.mock.set_fault(Fault::Reconnect);
    resumes += 1;
    rig.until(Duration::from_secs(3), "resume after op 7", |r| {
        (r.mock.stats().resumes >= resumes).then_some(())
    })
    .await;
    assert!(
        t.elapsed() < Duration::from_millis(300),
        "op 7 resumes at once: {:?}",
        t.elapsed()
    );
    // op 9 true: resume; op 9 false: identify afresh.
    tokio::time::sleep(Duration::from_millis(150)).await;
    rig.mock.set_fault(Fault::InvalidSession(true));
    resumes += 1;
    rig.until(Duration::from_secs(3), "resume after op 9 true", |r| {
        (r.mock.stats().resumes >= resumes).then_some(())
    })
    .await;
    assert_eq!(rig.mock.stats().identifies, 1);
    tokio::time::sleep(Duration::from_millis(150)).await;
    rig.mock.set_fault(Fault::InvalidSession(false));
    // The new Identify waits for its slot: one per 5 s per bucket.
    rig.until(Duration::from_secs(8), "identify after op 9 false", |r| {
        (r.mock.stats().identifies == 2 && r.view().state == State::Connected).then_some(())
    })
    .await;
    assert_eq!(rig.mock.stats().resumes, resumes);
    rig.shutdown().await;

    for code in [4010, 4011, 4012, 4013, 4014, 4914, 4915] {
        let mut rig = Rig::start("qqbot", hb(HB), false, "").await;
        rig.connected().await;
        rig.mock.set_fault(Fault::Close(code));
        match rig.exit().await {
            AdapterExit::Fatal(reason) => assert!(reason.contains(&code.to_string()), "{reason}"),
            other => panic!("close {code}: expected fatal, got {other:?}"),
        }
        assert_eq!(rig.view().state, State::Fatal);
    }
}

/// Watch attempts for `window` and check they are spaced by the backoff, not a busy loop.
async fn assert_backs_off(rig: &Rig, what: &str, window: Duration) {
    let first = rig
        .until(Duration::from_secs(5), "a first attempt", |r| {
            (r.view().attempts >= 1).then(|| r.view().attempts)
        })
        .await;
    let t = Instant::now();
    tokio::time::sleep(window).await;
    let n = rig.view().attempts - first;
    // backoff-min 100 ms, connect and hello timeouts 1 s: at most one attempt per 100 ms.
    let max = (window.as_millis() / 100) as u64 + 1;
    println!("{what}: {n} attempts in {:?}", t.elapsed());
    assert!(n >= 1, "{what}: it keeps trying");
    assert!(
        n <= max,
        "{what}: {n} attempts in {window:?} is a busy loop"
    );
    let v = rig.view();
    assert!(v.fresh, "{what}: a retrying adapter stays fresh: {v:?}");
    assert_ne!(v.state, State::Connected);
    assert!(v.last_error.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_failures_back_off_within_bounds() {
    let window = Duration::from_secs(3);
    // A name that cannot resolve.
    let rig = Rig::start(
        "discord",
        hb(HB),
        false,
        "gateway-url = \"wss://hermes-svc-test.invalid/ws\"\n",
    )
    .await;
    assert_backs_off(&rig, "dns failure", window).await;
    rig.shutdown().await;
    // A port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let rig = Rig::start(
        "discord",
        hb(HB),
        false,
        &format!("gateway-url = \"ws://127.0.0.1:{port}/ws\"\n"),
    )
    .await;
    assert_backs_off(&rig, "refused port", window).await;
    rig.shutdown().await;
    // Accepts, but answers the upgrade with plain HTTP.
    let rig = Rig::start_faulty("discord", hb(HB), false, "", Fault::NoUpgrade).await;
    assert_backs_off(&rig, "no upgrade", window).await;
    rig.shutdown().await;
    // Upgrades, but never says Hello.
    let rig = Rig::start_faulty(
        "discord",
        hb(HB),
        false,
        "hello-timeout = \"300ms\"\n",
        Fault::NoHello,
    )
    .await;
    assert_backs_off(&rig, "no hello", window).await;
    assert!(rig.view().last_error.unwrap_or_default().contains("Hello"));
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_adapters_dropped_at_once_come_back_spread_out() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mock = MockPlatform::start(hb(Duration::from_secs(2)))
        .await
        .unwrap();
    let dir = scratch_dir("hundred");
    let spool = Arc::new(Spool::open(&dir.path().join("inbox")).unwrap());
    let registry = Registry::new();
    let text = toml_for("discord", &mock.http_base(), "").replace("100ms", "500ms");
    let mut stops = vec![];
    for _ in 0..100 {
        // Each its own gateway: one that shares a token would space their Identify calls
        // by the platform's 5 s rule, which is not what this test measures.
        let shared = Shared::new(ProxyEnv::default()).unwrap();
        let (_, stop, task) = start_adapter(&text, spool.clone(), &registry, &shared);
        stops.push((stop, task));
    }
    let end = Instant::now() + Duration::from_secs(20);
    while registry
        .snapshot()
        .components
        .iter()
        .any(|c| c.state != State::Connected)
    {
        assert!(Instant::now() < end, "not all connected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let t0 = Instant::now();
    mock.set_fault(Fault::Close(1001));
    let mut back: Vec<Option<Duration>> = vec![None; 100];
    let end = Instant::now() + Duration::from_secs(10);
    while back.iter().any(Option::is_none) {
        assert!(Instant::now() < end, "not all came back");
        for (i, c) in registry.snapshot().components.iter().enumerate() {
            if back[i].is_none() && c.reconnects >= 1 && c.state == State::Connected {
                back[i] = Some(t0.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut times: Vec<f64> = back.into_iter().map(|d| ms(d.unwrap())).collect();
    times.sort_by(f64::total_cmp);
    let pct = |p: usize| times[(times.len() - 1) * p / 100];
    println!(
        "100 adapters closed at once: back after p0 {:.0} ms, p10 {:.0}, p50 {:.0}, p90 {:.0}, p100 {:.0}",
        pct(0), pct(10), pct(50), pct(90), pct(100)
    );
    let mut hist = [0usize; 6];
    for t in &times {
        hist[((*t / 100.0) as usize).min(5)] += 1;
    }
    println!("histogram (100 ms buckets): {hist:?}");
    assert!(
        pct(90) - pct(10) >= 200.0,
        "reconnects must spread out: {times:?}"
    );
    assert!(
        hist.iter().all(|&n| n <= 40),
        "no bucket holds the herd: {hist:?}"
    );
    for (stop, task) in stops {
        let _ = stop.send(true);
        let _ = task.await;
    }
}

/// An HTTP proxy on loopback: answers `CONNECT` with `reply` and, on 200, tunnels to the
/// target. Records each request head, so a test can see where it was asked to go and how.
struct ConnectProxy {
    addr: std::net::SocketAddr,
    heads: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ConnectProxy {
    async fn start(reply: &'static str) -> ConnectProxy {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(std::sync::Mutex::new(vec![]));
        let seen = heads.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut head = vec![];
                    while !head.ends_with(b"\r\n\r\n") {
                        let mut b = [0u8];
                        if client.read(&mut b).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(b[0]);
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let target = head
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or_default()
                        .to_owned();
                    seen.lock().unwrap().push(head);
                    let _ = client
                        .write_all(format!("HTTP/1.1 {reply}\r\n\r\n").as_bytes())
                        .await;
                    if !reply.starts_with("200") {
                        return;
                    }
                    if let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                });
            }
        });
        ConnectProxy { addr, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn http_proxy(url: String) -> ProxyEnv {
    ProxyEnv::from_matcher(
        hyper_util::client::proxy::matcher::Matcher::builder()
            .http(url)
            .build(),
    )
}

/// With `HTTP_PROXY` set (as a drop-in would set it), the WebSocket goes through a CONNECT
/// tunnel, with the proxy's credentials, and the session works through it end to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_websocket_goes_through_an_http_proxy() {
    let proxy = ConnectProxy::start("200 Connection established").await;
    let url = format!("http://al%40ice:pw@{}", proxy.addr);
    let rig = Rig::start_proxied("qqbot", move |_| http_proxy(url)).await;
    rig.connected().await;
    rig.mock.emit(3);
    rig.until(Duration::from_secs(10), "3 events spooled", |r| {
        (r.spool_ids().len() == 3).then_some(())
    })
    .await;
    let heads = proxy.heads();
    assert_eq!(heads.len(), 1, "{heads:?}");
    let target = rig.mock.addr().to_string();
    assert!(
        heads[0].starts_with(&format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n")),
        "{heads:?}"
    );
    // base64("al@ice:pw")
    assert!(
        heads[0].contains("Proxy-Authorization: Basic YWxAaWNlOnB3\r\n"),
        "{heads:?}"
    );
    rig.shutdown().await;
}

/// A proxy that refuses the tunnel is a connection failure like any other: retried with
/// backoff, with the proxy's answer in the component's last error (and no credentials).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_proxy_is_reported_and_retried() {
    let proxy = ConnectProxy::start("407 Proxy Authentication Required").await;
    let url = format!("http://{}", proxy.addr);
    let rig = Rig::start_proxied("qqbot", move |_| http_proxy(url)).await;
    let error = rig
        .until(Duration::from_secs(10), "a second attempt", |r| {
            let v = r.view();
            (v.attempts >= 2).then_some(v.last_error)
        })
        .await
        .unwrap_or_default();
    assert!(
        error.contains(&format!(
            "proxy http://{}/: CONNECT {}: HTTP/1.1 407 Proxy Authentication Required",
            proxy.addr,
            rig.mock.addr()
        )),
        "{error}"
    );
    assert!(error.contains("the proxy wants credentials"), "{error}");
    assert_ne!(rig.view().state, State::Connected);
    rig.shutdown().await;
}

/// A thousand idle adapters are mostly their task futures, so state that only a connect, a
/// proxy or TLS needs must stay out of them (boxed, allocated while in use). Inline, the TLS
/// connection alone made each task 11.8 KB (docs/benchmarks.md).
#[test]
fn an_adapter_task_stays_small() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cfg = config::parse(
        std::path::Path::new("t.toml"),
        "[[adapter]]\nname = \"a\"\nkind = \"discord\"\ntoken-env = \"T\"\n",
    )
    .unwrap();
    let registry = Registry::new();
    let (_stop, rx) = watch::channel(false);
    let dir = scratch_dir("task-size");
    let task = hermes_svc::platform::receive(
        cfg.adapters[0].clone(),
        vec![],
        Deps {
            spool: Arc::new(Spool::open(dir.path()).unwrap()),
            heartbeat: registry.register(
                "a",
                ComponentKind::Adapter("discord"),
                Duration::from_secs(1),
            ),
            shared: Shared::new(ProxyEnv::default()).unwrap(),
            shutdown: rx,
        },
    );
    let size = std::mem::size_of_val(&task);
    assert!(size <= 6 << 10, "an adapter task is {size} bytes");
}

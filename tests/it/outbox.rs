//! The outbox end to end: a real gateway process, the mock platform's send endpoints, and
//! SIGKILL at the worst moments.

use std::time::Duration;

use hermes_svc::gateway::outbox::Policy;

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

/// A 30 s platform outage with 1,000 messages queued: all arrive after it, in order per
/// target, while inbound events keep reaching the spool and `WATCHDOG=1` keeps coming.
#[test]
fn an_outage_queues_a_thousand_messages_without_stopping_inbound_or_the_watchdog() {
    use std::os::unix::net::UnixDatagram;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    const OUTAGE: Duration = Duration::from_secs(30);
    const WATCHDOG: Duration = Duration::from_secs(3);
    let rig = Rig::new("obout", "");
    let sock_path = rig.home.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let feeds = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let listener = {
        let (feeds, done) = (feeds.clone(), done.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(n) = sock.recv(&mut buf) {
                    if String::from_utf8_lossy(&buf[..n]).contains("WATCHDOG=1") {
                        feeds.lock().unwrap().push(Instant::now());
                    }
                }
            }
        })
    };

    rig.mock.set_send_fault(
        hermes_svc::mock_platform::Platform::Discord,
        hermes_svc::mock_platform::SendFault::Down(OUTAGE),
    );
    let outage_ends = Instant::now() + OUTAGE;
    let mut gw = {
        let mut cmd_child = rig.gateway_with_env(&[
            ("NOTIFY_SOCKET", sock_path.to_str().unwrap()),
            ("WATCHDOG_USEC", &WATCHDOG.as_micros().to_string()),
        ]);
        assert!(rig.wait_api(&mut cmd_child));
        cmd_child
    };
    let targets = ["channel:101", "channel:102", "channel:103", "channel:104"];
    // Four agents, one per target, each submitting its 250 in order.
    rig.rt.block_on(async {
        let mut tasks = vec![];
        for target in targets {
            let client = rig.client();
            tasks.push(tokio::spawn(async move {
                for i in 0..250 {
                    let body = hermes_svc::api::wire::SendBody {
                        adapter: "dc".into(),
                        target: target.into(),
                        text: format!("{target} #{i}"),
                        reply_to: None,
                        idempotency_key: format!("{target}-{i}"),
                        policy: None,
                        attachments: vec![],
                    };
                    client.submit(&body).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert!(
        Instant::now() < outage_ends,
        "all 1,000 were queued during the outage"
    );
    // Inbound keeps flowing meanwhile.
    rig.mock.emit(20);
    let client = rig.client();
    crate::harness::wait_for(Duration::from_secs(20), "20 inbound events", || {
        let page = rig
            .rt
            .block_on(client.events(None, Duration::ZERO, 1000))
            .ok()?;
        (page.events.len() >= 20).then_some(())
    });
    assert!(
        rig.posts().is_empty(),
        "nothing is posted during the outage"
    );
    // The state file says so (one written after the submits: an older one predates them).
    let since = std::time::SystemTime::now();
    crate::harness::wait_for(
        Duration::from_secs(15),
        "the queue in the state file",
        || {
            let s = rig.state()?;
            let written = humantime::parse_rfc3339(s["updated_at"].as_str()?).ok()?;
            (written > since && s["outbox"]["depth"].as_u64()? > 0).then_some(())
        },
    );

    rig.wait_drained(&gw, OUTAGE + Duration::from_secs(90));
    assert!(Instant::now() >= outage_ends);
    let posts = rig.posts();
    assert_eq!(posts.len(), 1000, "every message, once");
    for target in targets {
        let id = target.trim_start_matches("channel:");
        let got: Vec<&str> = posts
            .iter()
            .filter(|p| p.target_id == id)
            .map(|p| p.content.as_str())
            .collect();
        let want: Vec<String> = (0..250).map(|i| format!("{target} #{i}")).collect();
        assert_eq!(got, want, "{target}: in the order queued");
    }
    sigterm(&mut gw);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    listener.join().unwrap();
    let feeds = feeds.lock().unwrap();
    assert!(feeds.len() > 10, "the watchdog was fed throughout");
    let worst = feeds.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(
        worst < WATCHDOG,
        "WATCHDOG=1 never stopped for as long as WatchdogSec ({worst:?})"
    );
}

/// A 429 with `retry_after`: no request to the platform before it expires, and the messages
/// still arrive once each, in order.
#[test]
fn a_429_is_honoured_before_the_next_request() {
    use hermes_svc::gateway::outbox::Policy;
    use hermes_svc::mock_platform::{Platform, SendFault};

    let rig = Rig::new("ob429", "");
    let retry_after = Duration::from_millis(1500);
    rig.mock.set_send_fault(
        Platform::Discord,
        SendFault::RateLimited {
            posts: 2,
            retry_after,
        },
    );
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    for i in 0..3 {
        rig.submit(
            &format!("rl-{i}"),
            ("dc", "channel:77"),
            &format!("rl {i}"),
            None,
            Policy::AtMostOnce,
        )
        .unwrap();
    }
    rig.wait_drained(&gw, Duration::from_secs(30));
    sigterm(&mut gw);
    let attempts = rig.mock.send_attempts();
    let limited: Vec<_> = attempts.iter().filter(|a| a.status == Some(429)).collect();
    assert_eq!(limited.len(), 2, "{attempts:?}");
    for l in &limited {
        let wait = l.retry_after.expect("the 429 said how long");
        for later in attempts.iter().filter(|a| a.received_at > l.received_at) {
            assert!(
                later.received_at >= l.received_at + wait,
                "a request {:?} after a 429 that asked for {wait:?}",
                later.received_at - l.received_at
            );
        }
    }
    let contents: Vec<String> = rig.posts().into_iter().map(|p| p.content).collect();
    assert_eq!(contents, ["rl 0", "rl 1", "rl 2"]);
}

/// A client that hangs up while its submit waits for the journal's fsync does not strand the
/// message: the line is in the journal, so the message goes out, with no other send to wake
/// the worker. The fsync is stretched to 2 s so that the hang-up falls inside it.
#[test]
fn a_message_from_a_client_that_hung_up_is_delivered() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    let rig = Rig::new("obhangup", "");
    let mut gw = rig.gateway("stall:outbox-sync:2000");
    assert!(rig.wait_api(&mut gw));
    let key = "obhangup-1";
    let body = serde_json::json!({
        "adapter": "dc",
        "target": "channel:4242",
        "text": "sent by a client that hung up",
        "idempotency_key": key,
    })
    .to_string();
    let mut stream = UnixStream::connect(rig.profile_home().join("state/api/agent.sock")).unwrap();
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let journal = rig.profile_home().join("outbox/journal.jsonl");
    crate::harness::wait_for(
        Duration::from_secs(10),
        "the message in the journal",
        || {
            std::fs::read_to_string(&journal)
                .ok()
                .filter(|j| j.contains(key))
        },
    );
    // Hang up while the submit waits for its sync.
    drop(stream);
    crate::harness::wait_for(Duration::from_secs(20), "the message on Discord", || {
        rig.posts()
            .iter()
            .any(|p| p.content == "sent by a client that hung up")
            .then_some(())
    });
    sigterm(&mut gw);
}

/// `send` whose answer does not come in time says the outcome is unknown, exits 75 (not 1,
/// "no gateway answers") and names its key; the retry with that key is the same message, so
/// the text is posted once. The first fsync is stretched past the client's 15 s grace.
#[test]
fn send_without_an_answer_names_its_key_and_a_retry_with_it_posts_once() {
    let rig = Rig::new("obsendto", "");
    let mut gw = rig.gateway("stall:outbox-sync:16000");
    assert!(rig.wait_api(&mut gw));
    let text = "sent once despite a timeout";
    let send = |key: Option<&str>| {
        let mut cmd = rig.hermes();
        cmd.args(["send", "-p", "obsendto", "--to", "dc:channel:4242"]);
        if let Some(key) = key {
            cmd.args(["--idempotency-key", key]);
        }
        cmd.arg(text).output().unwrap()
    };
    let first = send(None);
    let stderr = String::from_utf8_lossy(&first.stderr).into_owned();
    assert_eq!(first.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("outcome unknown"), "{stderr}");
    let key = stderr
        .split("--idempotency-key ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("a key to retry with: {stderr}"))
        .to_owned();
    let again = send(Some(&key));
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(String::from_utf8_lossy(&again.stdout).contains("already queued"));
    rig.wait_drained(&gw, Duration::from_secs(30));
    let posted = rig.posts().iter().filter(|p| p.content == text).count();
    assert_eq!(posted, 1);
    sigterm(&mut gw);
}

/// A journal the gateway cannot open (a symbolic link, a FIFO) made it exit 1 before any
/// adapter started: nothing received, and under systemd a restart loop to `failed`. Now it
/// keeps receiving, with the outbox unavailable: the API answers 503 with the reason, the
/// state file and `send` say why, and doctor names the fix (HSV022).
#[test]
fn a_journal_that_cannot_be_opened_leaves_the_gateway_receiving() {
    use hermes_svc::mock_platform::MockConfig;
    use nix::sys::stat::Mode;

    for case in ["link", "fifo"] {
        let profile = format!("objournal{case}");
        let config = MockConfig {
            dispatch_every: Some(Duration::from_millis(200)),
            ..MockConfig::default()
        };
        let rig = Rig::with_mock(&profile, "", config);
        let dir = rig.profile_home().join("outbox");
        std::fs::create_dir_all(&dir).unwrap();
        let journal = dir.join("journal.jsonl");
        match case {
            "link" => std::os::unix::fs::symlink("/etc/hostname", &journal).unwrap(),
            _ => nix::unistd::mkfifo(&journal, Mode::from_bits_truncate(0o600)).unwrap(),
        }
        let mut gw = rig.gateway("");
        assert!(rig.wait_api(&mut gw), "{case}: {}", rig.log());

        // Receiving goes on.
        let inbox = rig.profile_home().join("inbox");
        crate::harness::wait_for(Duration::from_secs(20), "an event spooled", || {
            (!hermes_svc::gateway::spool::read(&inbox, None)
                .unwrap_or_default()
                .is_empty())
            .then_some(())
        });
        // Sending is refused, saying why.
        let out = rig
            .hermes()
            .args(["send", "-p", &profile, "--to", "dc:channel:1", "hello"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{case}: {stderr}");
        assert!(
            stderr.contains("outbox_unavailable") && stderr.contains("journal.jsonl"),
            "{case}: {stderr}"
        );
        let state = crate::harness::wait_for(Duration::from_secs(20), "the state file", || {
            rig.state()
                .filter(|s| s["outbox"]["unavailable"].is_string())
        });
        let why = state["outbox"]["unavailable"].as_str().unwrap();
        assert!(
            why.contains("journal.jsonl") && why.contains("restart the gateway"),
            "{case}: {why}"
        );
        // doctor names it, with a fix that does not repeat the failure.
        let out = rig
            .hermes()
            .args(["doctor", "-p", &profile, "--json"])
            .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/ob-bus")
            .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/ob-bus")
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        let finding = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == "HSV022")
            .unwrap_or_else(|| panic!("{case}: {report}"))
            .clone();
        assert!(
            finding["fix"].as_str().unwrap().starts_with("mv "),
            "{finding}"
        );
        assert!(gw.try_wait().unwrap().is_none(), "{case}: {}", rig.log());
        sigterm(&mut gw);
    }
}

/// A message whose sends failed through an outage waits out a growing backoff (up to 30 s):
/// it went out 22-29 s after the platform came back, when the adapter was long connected.
/// Now the adapter's reconnection retries it at once.
#[test]
fn waiting_messages_go_out_as_soon_as_the_adapter_is_back() {
    use hermes_svc::mock_platform::Fault;
    use std::time::Instant;

    let rig = Rig::new("obback", "");
    let mut gw = rig.gateway("");
    assert!(rig.wait_api(&mut gw));
    let connected = |rig: &Rig| {
        rig.state().is_some_and(|s| {
            s["components"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["name"] == "dc" && c["state"] == "connected")
            })
        })
    };
    crate::harness::wait_for(Duration::from_secs(20), "dc connected", || {
        connected(&rig).then_some(())
    });
    // The platform goes away: the session closes, and every new connection is dropped.
    rig.mock.set_fault(Fault::Close(4009));
    rig.mock.set_fault(Fault::Refuse);
    let text = "sent once the platform is back";
    let id = rig
        .submit(
            "obback-1",
            ("dc", "channel:4242"),
            text,
            None,
            Policy::AtMostOnce,
        )
        .unwrap()
        .id;
    // Six failed attempts, the sixth over (`attempts` counts one as it begins): the next
    // waits 15-30 s.
    crate::harness::wait_for(Duration::from_secs(90), "six failed attempts", || {
        let m = rig.message(&id);
        (m.attempts >= 6 && m.state == hermes_svc::gateway::outbox::State::Queued).then_some(())
    });
    rig.mock.clear_fault();
    let back = Instant::now();
    crate::harness::wait_for(Duration::from_secs(60), "the message on Discord", || {
        rig.posts().iter().any(|p| p.content == text).then_some(())
    });
    assert!(
        back.elapsed() < Duration::from_secs(10),
        "went out {:?} after the platform came back",
        back.elapsed()
    );
    assert!(
        rig.log().contains("waiting messages are retried now"),
        "{}",
        rig.log()
    );
    sigterm(&mut gw);
}

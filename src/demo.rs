//! `hermes-svc demo`: the gateway's resilience, shown end to end with no credentials.
//!
//! It starts a mock QQ Bot / Discord / Feishu / Telegram / Weixin platform on loopback behind
//! a TCP proxy, runs a real gateway process for a temporary profile (five adapters and a cron
//! job, written by `profile`), and plays systemd for it: it receives `READY=1`, `STATUS=` and
//! `WATCHDOG=1` on a notify socket of its own (`observe` collects them and the log). Then it
//! makes the proxy swallow every byte in both directions without a FIN (a half-open
//! connection, the field's 18-hour outage), and shows the gateway detect it on every
//! connection, resume QQ and Discord with the last seq, open a new Feishu long connection
//! (Feishu has no resume: the platform pushes again what was not acked), drop the Telegram and
//! Weixin polls at their deadlines and poll again, and lose no event.

mod observe;
mod profile;

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::exit_code;
use crate::gateway::spool;
use crate::mock_platform::weixin::WeixinConfig;
use crate::mock_platform::{BlackholeProxy, MockConfig, MockPlatform};
use observe::{collect_log, collect_notes, lines, print_status, Clock, Gateway, Scratch};

/// The mock's heartbeat interval, and its Feishu PingInterval (`ClientConfig`'s default).
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Run the demo; exits 0 when nothing was lost and the fault was detected and resumed.
pub(crate) async fn run(flow: Duration) -> anyhow::Result<u8> {
    let clock = Clock(Instant::now());
    let scratch = Scratch(std::env::temp_dir().join(format!("hermes-demo-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&scratch.0);
    std::fs::create_dir_all(&scratch.0)?;

    let mock = MockPlatform::start(MockConfig {
        heartbeat_interval: HEARTBEAT,
        // The server's long-poll hold sets the Weixin poll's deadline: short, as the others.
        weixin: WeixinConfig {
            longpolling_timeout_ms: profile::POLL_TIMEOUT_S * 1000,
            ..WeixinConfig::default()
        },
        ..MockConfig::default()
    })
    .await
    .context("failed to start the mock platform")?;
    let proxy = BlackholeProxy::start(mock.addr())
        .await
        .context("failed to start the proxy")?;
    mock.set_advertised_ws_url(format!("ws://{}/ws", proxy.addr()));
    mock.set_feishu_ws_base(format!("ws://{}", proxy.addr()));
    let hermes_home = scratch.0.join("hermes");
    let proxied = format!("http://{}", proxy.addr());
    let profile_home = profile::write(&hermes_home, &mock.http_base(), &proxied)?;
    println!(
        "hermes-svc demo: a real gateway process against a mock QQ Bot + Discord + Feishu + \
         Telegram + Weixin platform"
    );
    println!(
        "  mock platform  {} (heartbeat and Feishu ping interval {:?})",
        mock.http_base(),
        HEARTBEAT
    );
    println!(
        "  tcp proxy      {} (where the fault is injected)",
        proxy.addr()
    );
    println!("  profile home   {}", profile_home.display());
    println!(
        "  adapters       qq (qqbot), dc (discord), fs (feishu), tg (telegram), wx (weixin); \
         cron job 'tick' every 2 s\n"
    );

    // Play systemd: a notify socket, and a 1 s watchdog the gateway must feed.
    let notify_path = scratch.0.join("notify");
    let notify = UnixDatagram::bind(&notify_path)?;
    notify.set_read_timeout(Some(Duration::from_millis(100)))?;
    let exe = std::env::current_exe().context("failed to find this binary")?;
    let mut child = Command::new(exe)
        .args(["gateway", "run", "--profile", "demo"])
        .env("HERMES_HOME", &hermes_home)
        .env("HERMES_LOCK_DIR", scratch.0.join("locks"))
        .env("NOTIFY_SOCKET", &notify_path)
        .env("WATCHDOG_USEC", "2000000")
        .env_remove("WATCHDOG_PID")
        // The mock is on loopback: a proxy set for real platforms must not be asked for it.
        .env("NO_PROXY", "127.0.0.1,localhost,::1")
        .env("HERMES_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("failed to start the gateway")?;
    let stderr = child.stderr.take().expect("piped");
    let gateway = Gateway(child);
    let log = collect_log(stderr);
    let notes = collect_notes(notify);
    let mut shown = 0;
    let mut watchdogs = 0;
    let mut show_notes = |clock: &Clock| {
        let notes = lines(&notes);
        for (_, n) in &notes[shown..] {
            if n == "WATCHDOG=1" {
                watchdogs += 1;
                continue;
            }
            clock.say(format!("systemd <- {}", n.replace('\n', "  ")));
        }
        shown = notes.len();
    };

    // Wait for READY=1.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !lines(&notes).iter().any(|(_, n)| n.contains("READY=1")) {
        if Instant::now() > deadline {
            bail!("the gateway did not send READY=1 within 20 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    show_notes(&clock);

    let emit_for = |d: Duration| {
        let mock = &mock;
        async move {
            let end = Instant::now() + d;
            while Instant::now() < end {
                emit_one(mock);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    clock.say(format!(
        "platform sends a message to each bot every 100 ms for {flow:?}"
    ));
    emit_for(flow).await;
    show_notes(&clock);
    print_status(&clock, &profile_home);

    // A poll answered just now is followed by the next one at once; a moment without events
    // lets every poll settle into its long wait, so the fault finds one on the wire.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = mock.stats();
    let feishu_before = mock.feishu_stats().connections;
    let fault_at = Instant::now();
    proxy.blackhole_existing();
    clock.say("FAULT: the proxy now swallows every byte both ways, with no FIN and no close frame");
    // Keep the platform talking during and after the fault: those events must not be lost.
    let (resumed, reconnected) = {
        let (mut resumed_at, mut reconnected_at) = (None, None);
        let end = Instant::now() + flow.max(Duration::from_secs(3));
        while Instant::now() < end {
            emit_one(&mock);
            if resumed_at.is_none() && mock.stats().resumes >= before.resumes + 2 {
                resumed_at = Some(Instant::now());
            }
            if reconnected_at.is_none() && mock.feishu_stats().connections > feishu_before {
                reconnected_at = Some(Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (resumed_at, reconnected_at)
    };
    show_notes(&clock);
    let detections: Vec<(Instant, String)> = lines(&log)
        .iter()
        .filter(|(t, l)| {
            *t >= fault_at
                && (l.contains("connection is dead")
                    || l.contains("dead connection")
                    || (l.contains("long connection lost") && l.contains("half-open")))
        })
        .cloned()
        .collect();
    for (t, line) in &detections {
        let adapter = line
            .split("adapter=")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("?");
        let took = t.duration_since(fault_at).as_secs_f64();
        if matches!(adapter, "tg" | "wx") {
            clock.say(format!(
                "{adapter}: hung poll detected after {took:.2} s (its deadline: {} s timeout + {} s \
                 grace), poll dropped and sent again",
                profile::POLL_TIMEOUT_S,
                profile::POLL_GRACE_S
            ));
            continue;
        }
        let probe = if adapter == "fs" { "ping" } else { "heartbeat" };
        clock.say(format!(
            "{adapter}: half-open detected after {took:.2} s ({:.2} {probe} intervals), socket dropped without a close handshake",
            took / HEARTBEAT.as_secs_f64()
        ));
    }
    let after = mock.stats();
    if let Some(r) = resumed {
        clock.say(format!(
            "qq and dc RESUMED with their last seq ({} resumes, last seq {:?}) {:.2} s after the fault",
            after.resumes - before.resumes,
            after.last_resume_seq,
            r.duration_since(fault_at).as_secs_f64()
        ));
    }
    if let Some(r) = reconnected {
        clock.say(format!(
            "fs: a new long connection {:.2} s after the fault; Feishu pushes again what was not acked",
            r.duration_since(fault_at).as_secs_f64()
        ));
    }

    // Let the spool catch up with everything the platform generated, then account for it.
    let mut generated = mock.generated_event_ids();
    generated.extend(mock.feishu_events().into_iter().map(|e| e.event_id));
    generated.extend(mock.telegram_update_ids().iter().map(i64::to_string));
    generated.extend(mock.weixin_message_ids());
    let inbox = profile_home.join("inbox");
    let deadline = Instant::now() + Duration::from_secs(10);
    let (stored, unique) = loop {
        let events = spool::read(&inbox, None).unwrap_or_default();
        let mut ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        let total = ids.len();
        ids.sort_unstable();
        ids.dedup();
        let have: std::collections::HashSet<&str> = ids.iter().copied().collect();
        let missing = generated
            .iter()
            .filter(|g| !have.contains(g.as_str()))
            .count();
        if missing == 0 || Instant::now() > deadline {
            break (total, ids.len());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // An ack follows its event's spool append, so the last one may still be on its way.
    while !mock.feishu_unacked().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lost = generated.len().saturating_sub(unique);
    let feishu_events = mock.feishu_events();
    let feishu_unacked = mock.feishu_unacked().len();
    let pushed_again = feishu_events.iter().filter(|e| e.deliveries > 1).count();
    let duplicated = stored - unique;
    print_status(&clock, &profile_home);

    // Stop it as systemd would.
    let mut gateway = gateway;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gateway.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )?;
    let status = gateway.0.wait()?;
    show_notes(&clock);
    let cron_runs = std::fs::read_to_string(profile_home.join("logs/cron.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("finished"))
        .count();
    clock.say(format!("gateway stopped on SIGTERM: {status}"));

    println!("\nsummary");
    println!("  events generated by the platform  {}", generated.len());
    println!("  events in the spool               {unique} (lost {lost}, duplicated {duplicated})");
    println!(
        "  feishu events acked               {} of {} ({pushed_again} pushed again)",
        feishu_events.len() - feishu_unacked,
        feishu_events.len()
    );
    println!("  half-open detections              {}", detections.len());
    println!("  watchdog pings received           {watchdogs}");
    println!("  cron runs                         {cron_runs}");
    let ok = lost == 0
        && duplicated == 0
        && feishu_unacked == 0
        && detections.len() >= 5
        && resumed.is_some()
        && reconnected.is_some()
        && status.code() == Some(0);
    println!(
        "  result                            {}",
        if ok { "OK" } else { "FAILED" }
    );
    Ok(if ok {
        exit_code::OK
    } else {
        exit_code::FAILURE
    })
}

/// One message to each bot.
fn emit_one(mock: &MockPlatform) {
    mock.emit(1);
    mock.feishu_emit(1);
    mock.telegram_emit(1);
    mock.weixin_emit(1);
}

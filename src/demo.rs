//! `hermes-svc demo`: the gateway's resilience, shown end to end with no credentials.
//!
//! It starts a mock QQ Bot / Discord / Feishu platform on loopback behind a TCP proxy, runs a
//! real gateway process for a temporary profile (three adapters and a cron job), and plays
//! systemd for it: it receives `READY=1`, `STATUS=` and `WATCHDOG=1` on a notify socket of its
//! own. Then it makes the proxy swallow every byte in both directions without a FIN (a
//! half-open connection, the field's 18-hour outage), and shows the gateway detect it on every
//! connection, resume QQ and Discord with the last seq, open a new Feishu long connection
//! (Feishu has no resume: the platform pushes again what was not acked), and lose no event.

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::exit_code;
use crate::gateway::spool;
use crate::mock_platform::{BlackholeProxy, FeishuConfig, MockConfig, MockPlatform};

/// The mock's heartbeat interval, and its Feishu PingInterval (`ClientConfig`'s default).
const HEARTBEAT: Duration = Duration::from_secs(1);

/// A temporary directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The gateway child, killed if the demo ends early.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Clock(Instant);

impl Clock {
    fn say(&self, msg: impl AsRef<str>) {
        println!(
            "[{:>5.1}s] {}",
            self.0.elapsed().as_secs_f64(),
            msg.as_ref()
        );
    }
}

fn write_profile(
    home: &Path,
    mock: &MockPlatform,
    feishu: &FeishuConfig,
) -> anyhow::Result<PathBuf> {
    let profile_home = home.join("profiles/demo");
    std::fs::create_dir_all(&profile_home)?;
    let base = mock.http_base();
    std::fs::write(
        profile_home.join("gateway.toml"),
        format!(
            r#"# Written by `hermes-svc demo`: three adapters against the built-in mock platform.
[gateway]
max-outage = "5m"

[[adapter]]
name = "qq"
kind = "qqbot"
app-id = "102000000"
secret-env = "DEMO_QQ_SECRET"
api-base = "{base}"
token-url = "{base}/app/getAppAccessToken"
backoff-min = "200ms"

[[adapter]]
name = "dc"
kind = "discord"
token-env = "DEMO_DISCORD_TOKEN"
api-base = "{base}"
backoff-min = "200ms"

[[adapter]]
name = "fs"
kind = "feishu"
app-id = "{app_id}"
secret-env = "DEMO_FEISHU_SECRET"
api-base = "{base}"
backoff-min = "200ms"

[[cron]]
name = "tick"
schedule = "*/2 * * * * *"
command = ["/bin/sh", "-c", "echo tick"]
timeout = "10s"
"#,
            app_id = feishu.app_id
        ),
    )?;
    crate::atomic_file::write(
        &profile_home.join(".env"),
        format!(
            "DEMO_QQ_SECRET=demo-secret\nDEMO_DISCORD_TOKEN=demo-token\nDEMO_FEISHU_SECRET={}\n",
            feishu.app_secret
        )
        .as_bytes(),
        0o600,
    )?;
    Ok(profile_home)
}

/// Run the demo; exits 0 when nothing was lost and the fault was detected and resumed.
pub(crate) async fn run(flow: Duration) -> anyhow::Result<u8> {
    let clock = Clock(Instant::now());
    let scratch = Scratch(std::env::temp_dir().join(format!("hermes-demo-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&scratch.0);
    std::fs::create_dir_all(&scratch.0)?;

    let mock = MockPlatform::start(MockConfig {
        heartbeat_interval: HEARTBEAT,
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
    let profile_home = write_profile(&hermes_home, &mock, &FeishuConfig::default())?;
    println!(
        "hermes-svc demo: a real gateway process against a mock QQ Bot + Discord + Feishu platform"
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
    println!("  adapters       qq (qqbot), dc (discord), fs (feishu); cron job 'tick' every 2 s\n");

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
    let log: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    {
        let log = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                log.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((Instant::now(), line));
            }
        });
    }

    // Collect notify messages on a thread; print the interesting ones as they come.
    let notes: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    {
        let notes = notes.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match notify.recv(&mut buf) {
                    Ok(n) => notes.lock().unwrap_or_else(|e| e.into_inner()).push((
                        Instant::now(),
                        String::from_utf8_lossy(&buf[..n]).into_owned(),
                    )),
                    Err(e)
                        if e.kind() == std::io::ErrorKind::WouldBlock
                            || e.kind() == std::io::ErrorKind::TimedOut => {}
                    Err(_) => return,
                }
            }
        });
    }
    let mut shown = 0;
    let mut watchdogs = 0;
    let mut show_notes = |clock: &Clock| {
        let notes = notes.lock().unwrap_or_else(|e| e.into_inner());
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
    while !notes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|(_, n)| n.contains("READY=1"))
    {
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
                mock.emit(1);
                mock.feishu_emit(1);
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
            mock.emit(1);
            mock.feishu_emit(1);
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
    let detections: Vec<(Instant, String)> = log
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(t, l)| {
            *t >= fault_at
                && (l.contains("connection is dead")
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
        let took = t.duration_since(fault_at);
        let probe = if adapter == "fs" { "ping" } else { "heartbeat" };
        clock.say(format!(
            "{adapter}: half-open detected after {:.2} s ({:.2} {probe} intervals), socket dropped without a close handshake",
            took.as_secs_f64(),
            took.as_secs_f64() / HEARTBEAT.as_secs_f64()
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
        && detections.len() >= 3
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

fn print_status(clock: &Clock, profile_home: &Path) {
    let Some(state) =
        crate::gateway::state_file::StateFile::read(&profile_home.join("state/gateway.json"))
    else {
        return;
    };
    clock.say(format!("state file: {}", state.summary));
    for c in state.components {
        println!(
            "         {:<5} {:<8} {:<10} last proof of life {:>5} ms ago, reconnects {}{}",
            c.name,
            c.kind,
            c.state,
            c.last_beat_age_ms,
            c.reconnects,
            c.last_error
                .map(|e| format!(", last error: {e}"))
                .unwrap_or_default()
        );
    }
}

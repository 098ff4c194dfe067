//! `hermes-svc demo`: the gateway's resilience, shown end to end with no credentials.
//!
//! It starts a mock of every platform a wing serves on loopback behind a TCP proxy, runs a
//! real gateway process for a temporary profile (an adapter of each kind and a cron job, written by `profile`), and plays systemd for it: it receives `READY=1`, `STATUS=` and
//! `WATCHDOG=1` on a notify socket of its own (`observe` collects them and the log). Then it
//! makes the proxy swallow every byte in both directions without a FIN (a half-open
//! connection, the field's 18-hour outage), and shows the gateway detect it on every
//! connection, resume QQ and Discord with the last seq, open new connections for the rest
//! (none has a resume: Feishu, Slack and DingTalk push again what was not acked, Mattermost's
//! posts are read back by REST), drop the Telegram,
//! Weixin and Matrix polls at their deadlines and poll again, and lose no event. Behind the gateway an
//! echo agent (`echo_agent`, on the OpenAI bridge) answers every message: a message said during
//! the fault is answered in its chat once the gateway is back, and no message is answered twice.

mod echo_agent;
mod observe;
mod profile;

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::exit_code;
use crate::gateway::spool;
use crate::mock_platform::dingtalk::DingTalkConfig;
use crate::mock_platform::weixin::WeixinConfig;
use crate::mock_platform::{BlackholeProxy, MockConfig, MockPlatform, MockStats, SlackConfig};
use observe::{
    collect_log, collect_notes, lines, print_status, Clock, Gateway, Lines, Notify, Scratch,
};

/// The mock's heartbeat interval, and its Feishu PingInterval (`ClientConfig`'s default).
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Run the demo; exits 0 when nothing was lost and the fault was detected and resumed.
pub(crate) async fn run(flow: Duration) -> anyhow::Result<u8> {
    let clock = Clock(Instant::now());
    let scratch = Scratch(std::env::temp_dir().join(format!("hermes-demo-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&scratch.0);
    std::fs::create_dir_all(&scratch.0)?;

    let (mock, proxy) = start_platform().await?;
    let (agent_url, heard) = echo_agent::start()
        .await
        .context("failed to start the echo agent")?;
    let hermes_home = scratch.0.join("hermes");
    let proxied = format!("http://{}", proxy.addr());
    let profile_home = profile::write(&hermes_home, &mock.http_base(), &proxied, &agent_url)?;
    print_setup(&mock, &proxy, &profile_home, &agent_url);

    let (mut gateway, log, mut notify) = start_gateway(&scratch.0, &hermes_home)?;
    notify.wait_ready().await?;
    notify.show(&clock);

    clock.say(format!(
        "platform sends a message to each bot every 100 ms for {flow:?}"
    ));
    emit_for(&mock, flow).await;
    notify.show(&clock);
    print_status(&clock, &profile_home);

    let fault = Fault::inject(&clock, &mock, &proxy, flow).await;
    notify.show(&clock);
    let detections = detections(&log, fault.at);
    for (t, line) in &detections {
        say_detection(&clock, fault.at, *t, line);
    }
    fault.say_recovery(&clock, &mock);

    let tally = Tally::settle(&mock, &profile_home).await;
    let conversation = Conversation::settle(&clock, &mock, &heard, fault.at).await;
    print_status(&clock, &profile_home);

    let status = stop(&mut gateway)?;
    notify.show(&clock);
    let cron_runs = cron_runs(&profile_home);
    clock.say(format!("gateway stopped on SIGTERM: {status}"));

    let summary = Summary {
        tally,
        conversation,
        detections: detections.len(),
        watchdogs: notify.watchdogs,
        cron_runs,
        resumed: fault.resumed.is_some(),
        reconnected: fault.reconnected.is_some() && fault.slack_reconnected.is_some(),
        status,
    };
    summary.print();
    Ok(if summary.ok() {
        exit_code::OK
    } else {
        exit_code::FAILURE
    })
}

/// The mock platform behind the fault proxy: every long connection and every poll the gateway
/// makes goes through the proxy, so one switch there cuts them all.
async fn start_platform() -> anyhow::Result<(MockPlatform, BlackholeProxy)> {
    let mock = MockPlatform::start(MockConfig {
        heartbeat_interval: HEARTBEAT,
        // The server's long-poll hold sets the Weixin poll's deadline: short, as the others.
        weixin: WeixinConfig {
            longpolling_timeout_ms: profile::POLL_TIMEOUT_S * 1000,
            ..WeixinConfig::default()
        },
        // Slack pings its clients and drops one that stops answering; a socket the fault cut
        // is then no longer given events (each of which it would lose until redelivered).
        slack: SlackConfig {
            server_ping: Some(HEARTBEAT),
            ..SlackConfig::default()
        },
        // DingTalk pushes a robot message again when no ack came: soon and until one does, in
        // the demo, so what the cut socket swallowed is back within the tally's wait.
        dingtalk: DingTalkConfig {
            ack_timeout: Duration::from_secs(2),
            max_retries: 10,
            ..DingTalkConfig::default()
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
    mock.set_slack_ws_base(format!("ws://{}", proxy.addr()));
    mock.set_dingtalk_ws_base(format!("ws://{}", proxy.addr()));
    Ok((mock, proxy))
}

/// Where everything is, so a reader can look at the profile and the mock while it runs.
fn print_setup(mock: &MockPlatform, proxy: &BlackholeProxy, profile_home: &Path, agent: &str) {
    println!(
        "hermes-svc demo: a real gateway process against a mock QQ Bot + Discord + Feishu + \
         Slack + Telegram + Weixin + Matrix + Mattermost + WeCom + DingTalk platform"
    );
    println!(
        "  mock platform  {} (heartbeat, Feishu and Slack ping interval {:?})",
        mock.http_base(),
        HEARTBEAT
    );
    println!(
        "  tcp proxy      {} (where the fault is injected)",
        proxy.addr()
    );
    println!("  profile home   {}", profile_home.display());
    println!("  agent          {agent}: a built-in echo agent, behind the OpenAI bridge");
    println!(
        "  adapters       qq (qqbot), dc (discord), fs (feishu), sl (slack), tg (telegram), \
         wx (weixin), mx (matrix), mm (mattermost), wc (wecom),\n  dt (dingtalk); cron job 'tick' every 2 s\n"
    );
}

/// Start the gateway as systemd would: a notify socket of our own, and a 2 s watchdog
/// (`WATCHDOG_USEC`) it must feed. Returns the child, its log and its notify messages.
fn start_gateway(scratch: &Path, hermes_home: &Path) -> anyhow::Result<(Gateway, Lines, Notify)> {
    let notify_path = scratch.join("notify");
    let notify = UnixDatagram::bind(&notify_path)?;
    notify.set_read_timeout(Some(Duration::from_millis(100)))?;
    let exe = std::env::current_exe().context("failed to find this binary")?;
    let mut child = Command::new(exe)
        .args(["gateway", "run", "--profile", "demo"])
        .env("HERMES_HOME", hermes_home)
        .env("HERMES_LOCK_DIR", scratch.join("locks"))
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
    Ok((gateway, log, Notify::new(notes)))
}

/// Keep the platform talking for `d`, one message to each bot every 100 ms.
async fn emit_for(mock: &MockPlatform, d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        emit_one(mock);
        // Not during the fault: WeCom has no ack, so what a dead socket swallowed is the
        // platform's to push again, and the mock models no such push.
        mock.wecom_emit(1);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The half-open fault, and when the gateway was back: the platform saw QQ and Discord
/// resume, and a new Feishu long connection.
struct Fault {
    at: Instant,
    before: MockStats,
    resumed: Option<Instant>,
    reconnected: Option<Instant>,
    /// When Slack's next Socket Mode connection came up.
    slack_reconnected: Option<Instant>,
}

impl Fault {
    /// Make the proxy swallow every byte, and keep the platform talking during and after the
    /// fault: those events must not be lost.
    async fn inject(
        clock: &Clock,
        mock: &MockPlatform,
        proxy: &BlackholeProxy,
        flow: Duration,
    ) -> Self {
        // A poll answered just now is followed by the next one at once; a moment without
        // events lets every poll settle into its long wait, so the fault finds one on the wire.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = mock.stats();
        let feishu_before = mock.feishu_stats().connections;
        let slack_before = mock.slack_stats().connections;
        let at = Instant::now();
        proxy.blackhole_existing();
        clock.say(
            "FAULT: the proxy now swallows every byte both ways, with no FIN and no close frame",
        );
        mock.telegram_emit_text(CHAT, GREETING);
        clock.say(format!(
            "a person says {GREETING:?} to the bot on tg (chat {CHAT}) while the connection is dead"
        ));
        let (mut resumed, mut reconnected, mut slack_reconnected) = (None, None, None);
        let end = Instant::now() + flow.max(Duration::from_secs(3));
        while Instant::now() < end {
            emit_one(mock);
            if resumed.is_none() && mock.stats().resumes >= before.resumes + 2 {
                resumed = Some(Instant::now());
            }
            if reconnected.is_none() && mock.feishu_stats().connections > feishu_before {
                reconnected = Some(Instant::now());
            }
            if slack_reconnected.is_none() && mock.slack_stats().connections > slack_before {
                slack_reconnected = Some(Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self {
            at,
            before,
            resumed,
            reconnected,
            slack_reconnected,
        }
    }

    /// Say how each long connection came back, as the platform saw it.
    fn say_recovery(&self, clock: &Clock, mock: &MockPlatform) {
        let after = mock.stats();
        if let Some(r) = self.resumed {
            clock.say(format!(
                "qq and dc RESUMED with their last seq ({} resumes, last seq {:?}) {:.2} s after the fault",
                after.resumes - self.before.resumes,
                after.last_resume_seq,
                r.duration_since(self.at).as_secs_f64()
            ));
        }
        if let Some(r) = self.reconnected {
            clock.say(format!(
                "fs: a new long connection {:.2} s after the fault; Feishu pushes again what was not acked",
                r.duration_since(self.at).as_secs_f64()
            ));
        }
        if let Some(r) = self.slack_reconnected {
            clock.say(format!(
                "sl: a new Socket Mode connection {:.2} s after the fault; Slack delivers again what was not acked",
                r.duration_since(self.at).as_secs_f64()
            ));
        }
    }
}

/// The gateway's own log lines, since `since`, that say it found a connection dead.
fn detections(log: &Lines, since: Instant) -> Vec<(Instant, String)> {
    lines(log)
        .iter()
        .filter(|(t, l)| {
            *t >= since
                && (l.contains("connection is dead")
                    || l.contains("dead connection")
                    || (l.contains("connection lost") && l.contains("half-open")))
        })
        .cloned()
        .collect()
}

/// Say how long one adapter took to find the fault, measured against what bounds it: the
/// heartbeat (or Feishu ping) interval for a long connection, the deadline for a poll.
fn say_detection(clock: &Clock, fault_at: Instant, t: Instant, line: &str) {
    let adapter = line
        .split("adapter=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("?");
    let took = t.duration_since(fault_at).as_secs_f64();
    if matches!(adapter, "tg" | "wx" | "mx") {
        clock.say(format!(
            "{adapter}: hung poll detected after {took:.2} s (its deadline: {} s timeout + {} s \
             grace), poll dropped and sent again",
            profile::POLL_TIMEOUT_S,
            profile::POLL_GRACE_S
        ));
        return;
    }
    let probe = if matches!(adapter, "fs" | "sl" | "mm" | "wc" | "dt") {
        "ping"
    } else {
        "heartbeat"
    };
    clock.say(format!(
        "{adapter}: half-open detected after {took:.2} s ({:.2} {probe} intervals), socket dropped without a close handshake",
        took / HEARTBEAT.as_secs_f64()
    ));
}

/// Every event the platform generated, accounted for in the spool: the proof that nothing
/// was lost or stored twice.
struct Tally {
    generated: usize,
    unique: usize,
    lost: usize,
    duplicated: usize,
    feishu_events: usize,
    feishu_unacked: usize,
    pushed_again: usize,
}

impl Tally {
    /// Let the spool catch up with everything the platform generated (10 s at most), then
    /// account for it.
    async fn settle(mock: &MockPlatform, profile_home: &Path) -> Self {
        let mut generated = mock.generated_event_ids();
        generated.extend(mock.feishu_events().into_iter().map(|e| e.event_id));
        generated.extend(mock.telegram_update_ids().iter().map(i64::to_string));
        generated.extend(mock.weixin_message_ids());
        generated.extend(mock.slack_events().into_iter().map(|e| e.event_id));
        generated.extend(mock.matrix_message_ids());
        generated.extend(mock.mattermost_posts().into_iter().map(|p| p.id));
        generated.extend(mock.wecom_events().into_iter().map(|e| e.msgid));
        generated.extend(mock.dingtalk_events().into_iter().map(|e| e.msg_id));
        let inbox = profile_home.join("inbox");
        let deadline = Instant::now() + Duration::from_secs(10);
        let (stored, unique, missing) = wait_for_spool(&inbox, &generated, deadline).await;
        // An ack follows its event's spool append, so the last one may still be on its way.
        while !mock.feishu_unacked().is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let feishu_events = mock.feishu_events();
        Self {
            generated: generated.len(),
            unique,
            lost: missing,
            duplicated: stored - unique,
            feishu_events: feishu_events.len(),
            feishu_unacked: mock.feishu_unacked().len(),
            pushed_again: feishu_events.iter().filter(|e| e.deliveries > 1).count(),
        }
    }
}

/// Wait until every generated event is in the spool, or `deadline`; returns how many events
/// the spool holds, how many distinct ones (the bots' own echoes among them), and how many
/// generated ones it lacks.
async fn wait_for_spool(
    inbox: &Path,
    generated: &[String],
    deadline: Instant,
) -> (usize, usize, usize) {
    loop {
        let events = spool::read(inbox, None).unwrap_or_default();
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
            return (total, ids.len(), missing);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The conversation: the demo's one message said during the fault, and the agent's answers.
const GREETING: &str = "hello, agent";
/// The Telegram chat (a direct message: the user id is the chat id) the demo's person writes
/// from, the one sender its access rules admit.
pub(crate) const CHAT: i64 = 1001;

/// What the agent answered, as the platform saw it.
struct Conversation {
    /// Answers to the greeting posted in its chat: exactly one is right.
    greeting_answers: usize,
    /// Messages the agent answered, and answers the platform got.
    turns: usize,
    answers: usize,
    /// Answers posted more than once (the same text to the same chat).
    doubled: usize,
}

impl Conversation {
    /// Wait (15 s at most) until the greeting's answer is posted and every turn's answer is
    /// out, then count.
    async fn settle(
        clock: &Clock,
        mock: &MockPlatform,
        heard: &echo_agent::Heard,
        fault_at: Instant,
    ) -> Self {
        let want = format!("echo: {GREETING}");
        let deadline = Instant::now() + Duration::from_secs(15);
        let answers = |mock: &MockPlatform| -> Vec<crate::mock_platform::Post> {
            mock.posts()
                .into_iter()
                .filter(|p| p.content.starts_with("echo: "))
                .collect()
        };
        loop {
            let posts = answers(mock);
            let greeted = posts.iter().any(|p| p.content == want);
            if (greeted && posts.len() >= heard.count()) || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let posts = answers(mock);
        let greeting: Vec<_> = posts.iter().filter(|p| p.content == want).collect();
        if let Some(p) = greeting.first() {
            clock.say(format!(
                "the agent's answer {want:?} reached tg chat {} {:.2} s after the fault began",
                p.target_id,
                p.received_at.duration_since(fault_at).as_secs_f64()
            ));
        }
        let mut keys: Vec<(String, String, String)> = posts
            .iter()
            .map(|p| {
                (
                    format!("{:?}", p.platform),
                    p.target_id.clone(),
                    p.content.clone(),
                )
            })
            .collect();
        let all = keys.len();
        keys.sort();
        keys.dedup();
        Self {
            greeting_answers: greeting.len(),
            turns: heard.count(),
            answers: all,
            doubled: all - keys.len(),
        }
    }

    fn ok(&self) -> bool {
        self.greeting_answers == 1 && self.doubled == 0 && self.answers >= self.turns
    }
}

/// Stop the gateway as systemd would, with SIGTERM, and wait for it: a clean stop exits 0.
fn stop(gateway: &mut Gateway) -> anyhow::Result<ExitStatus> {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gateway.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )?;
    Ok(gateway.0.wait()?)
}

/// How many times the cron job ran to its end, from the jobs' log.
fn cron_runs(profile_home: &Path) -> usize {
    std::fs::read_to_string(profile_home.join("logs/cron.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("finished"))
        .count()
}

/// What the demo proved, in a few lines, and whether it proved it.
struct Summary {
    tally: Tally,
    conversation: Conversation,
    detections: usize,
    watchdogs: usize,
    cron_runs: usize,
    resumed: bool,
    reconnected: bool,
    status: ExitStatus,
}

impl Summary {
    /// Nothing lost or stored twice, every Feishu event acked, every adapter found the
    /// fault, QQ and Discord resumed, Feishu connected afresh, and the gateway stopped cleanly.
    fn ok(&self) -> bool {
        let t = &self.tally;
        t.lost == 0
            && t.duplicated == 0
            && self.conversation.ok()
            && t.feishu_unacked == 0
            && self.detections >= 7
            && self.resumed
            && self.reconnected
            && self.status.code() == Some(0)
    }

    fn print(&self) {
        let t = &self.tally;
        println!("\nsummary");
        println!("  events generated by the platform  {}", t.generated);
        println!(
            "  events in the spool               {} (lost {}, duplicated {})",
            t.unique, t.lost, t.duplicated
        );
        println!(
            "  feishu events acked               {} of {} ({} pushed again)",
            t.feishu_events - t.feishu_unacked,
            t.feishu_events,
            t.pushed_again
        );
        let c = &self.conversation;
        println!(
            "  messages the agent answered       {} ({} answers posted, {} twice; {GREETING:?}: {} answer)",
            c.turns, c.answers, c.doubled, c.greeting_answers
        );
        println!("  half-open detections              {}", self.detections);
        println!("  watchdog pings received           {}", self.watchdogs);
        println!("  cron runs                         {}", self.cron_runs);
        println!(
            "  result                            {}",
            if self.ok() { "OK" } else { "FAILED" }
        );
    }
}

/// One message to each bot.
fn emit_one(mock: &MockPlatform) {
    mock.emit(1);
    mock.feishu_emit(1);
    mock.telegram_emit(1);
    mock.weixin_emit(1);
    mock.slack_emit(1);
    mock.matrix_emit(1);
    mock.mattermost_emit(1);
    mock.dingtalk_emit(1);
}

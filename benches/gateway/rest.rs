//! At rest: what one idle profile costs while nothing happens. One gateway process per adapter
//! kind, each with one adapter on the platform's real timing (QQ and Discord heartbeats every
//! 41.25 s, Feishu's pings every 120 s, the long polls' default timeouts, Slack's 5 s ping,
//! Matrix's 30 s sync), no traffic, under a systemd-like `WATCHDOG_USEC` of 30 s; beside them
//! a bare tokio-tungstenite client with one connection on the same 41.25 s heartbeat (and one
//! on Slack's 5 s), and a `sleep` process, the floor of any process. All run at once (they are idle; each one's
//! figures are read from its own /proc entry), so the section takes one window, not nine.
//!
//! Wake-ups are the scheduler's count of times the process was put on a CPU
//! (`/proc/PID/task/*/schedstat`), which is what powertop and a laptop's energy report count.
//! Every `WATCHDOG=1` datagram is timed too: no gap may exceed half `WatchdogSec`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_svc::config::Secret;
use hermes_svc::mock_platform::feishu::{ClientConfig, FeishuConfig};
use hermes_svc::mock_platform::{MockConfig, MockPlatform};
use hermes_svc::platform::weixin::WeixinLogin;

use crate::binary::{gateway_bin, spawn_gateway_with, Gateway, BIN};
use crate::independent::Independent;
use crate::proc::{schedstat, wait_for_quiet_machine};
use crate::scratch;
use crate::thousand::bare;

/// QQ's and Discord's real heartbeat interval.
const HEARTBEAT: Duration = Duration::from_millis(41_250);
/// The unit's `WatchdogSec=` default.
const WATCHDOG: Duration = Duration::from_secs(30);
/// benches/independent's default credentials.
const TELEGRAM_TOKEN: &str = "7000000001:AAindependent-poll-server-telegram";
const WEIXIN_TOKEN: &str = "independent-weixin-bot-token";
const SLACK_APP_TOKEN: &str = "xapp-1-A0INDEP-1-independent";
const SLACK_BOT_TOKEN: &str = "xoxb-independent";
const MATRIX_TOKEN: &str = "mx-indep-token";
const MATRIX_USER: &str = "@bot:indep.test";

/// A process being measured.
struct Subject {
    label: String,
    server: &'static str,
    pid: u32,
    /// When each `WATCHDOG=1` arrived (gateways only).
    watchdog: Option<Arc<Mutex<Vec<Instant>>>>,
    /// Killed and reaped when dropped, a gateway or not.
    _process: Gateway,
}

/// One row of the table.
struct Rest {
    label: String,
    server: &'static str,
    wakeups_per_s: f64,
    cpu_pct: f64,
    watchdog: Option<(usize, Duration)>,
}

/// A profile with one adapter, started as a service would be; ready once it said `READY=1`.
async fn gateway(
    home: &Path,
    label: &str,
    server: &'static str,
    toml: String,
    env: &str,
) -> Subject {
    let dir = home.join(format!("profiles/{label}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("gateway.toml"), toml).unwrap();
    std::fs::write(dir.join(".env"), env).unwrap();
    let notify_path = home.join(format!("{label}.notify"));
    let notify = tokio::net::UnixDatagram::bind(&notify_path).unwrap();
    let usec = WATCHDOG.as_micros().to_string();
    let gw = spawn_gateway_with(
        home,
        label,
        Some(&notify_path),
        &[("WATCHDOG_USEC", usec.as_str())],
    );
    let pid = gw.0.id();
    let times = Arc::new(Mutex::new(vec![]));
    let (ready_tx, ready) = tokio::sync::oneshot::channel();
    let seen = times.clone();
    tokio::spawn(async move {
        let mut ready_tx = Some(ready_tx);
        let mut buf = vec![0u8; 4096];
        while let Ok(len) = notify.recv(&mut buf).await {
            let text = String::from_utf8_lossy(&buf[..len]);
            if text.lines().any(|l| l == "WATCHDOG=1") {
                seen.lock().unwrap().push(Instant::now());
            }
            if text.lines().any(|l| l == "READY=1") {
                if let Some(tx) = ready_tx.take() {
                    let _ = tx.send(());
                }
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(60), ready)
        .await
        .unwrap_or_else(|_| panic!("{label}: no READY=1 within 60 s"))
        .unwrap();
    Subject {
        label: label.to_owned(),
        server,
        pid,
        watchdog: Some(times),
        _process: gw,
    }
}

fn child(label: &str, server: &'static str, child: std::process::Child) -> Subject {
    Subject {
        label: label.to_owned(),
        server,
        pid: child.id(),
        watchdog: None,
        _process: Gateway(child),
    }
}

/// `cargo bench --bench gateway -- rest`: the table for docs/benchmarks.md. `HSV_BENCH_WINDOW`
/// sets the window (60 s).
pub(crate) async fn rest_figures() {
    let window = Duration::from_secs(
        std::env::var("HSV_BENCH_WINDOW")
            .ok()
            .and_then(|w| w.parse().ok())
            .unwrap_or(60),
    );
    let bin = gateway_bin();
    let python = Independent::python();
    let home = scratch("rest");
    let log = |name: &str| home.join(format!("{name}.log"));
    let qq = Independent::start(&python, HEARTBEAT, &log("qq"));
    let poll = Independent::start_poll(
        &python,
        &[
            "--telegram-token",
            TELEGRAM_TOKEN,
            "--weixin-token",
            WEIXIN_TOKEN,
        ],
        &log("poll"),
    );
    let slack = Independent::start_slack(&python, &log("slack"));
    let matrix = Independent::start_matrix(&python, &log("matrix"));
    let feishu = FeishuConfig {
        client_config: ClientConfig {
            ping_interval: 120,
            ..ClientConfig::default()
        },
        ..FeishuConfig::default()
    };
    let (feishu_app, feishu_secret) = (feishu.app_id.clone(), feishu.app_secret.clone());
    let mock = MockPlatform::start(MockConfig {
        feishu,
        ..MockConfig::default()
    })
    .await
    .unwrap();
    wait_for_quiet_machine().await;

    let q = qq.base();
    let mut subjects = vec![
        gateway(
            &home,
            "qqbot",
            "independent",
            format!(
                "[[adapter]]\nname = \"a\"\nkind = \"qqbot\"\napp-id = \"102000001\"\n\
                 secret-env = \"S\"\napi-base = \"{q}\"\ntoken-url = \"{q}/app/getAppAccessToken\"\n"
            ),
            "S=bench-secret\n",
        )
        .await,
        gateway(
            &home,
            "discord",
            "independent",
            format!(
                "[[adapter]]\nname = \"a\"\nkind = \"discord\"\ntoken-env = \"T\"\napi-base = \"{q}\"\n"
            ),
            "T=bench-token\n",
        )
        .await,
        gateway(
            &home,
            "feishu",
            "mock",
            format!(
                "[[adapter]]\nname = \"a\"\nkind = \"feishu\"\napp-id = \"{feishu_app}\"\n\
                 secret-env = \"S\"\napi-base = \"{}\"\n",
                mock.http_base()
            ),
            &format!("S={}\n", feishu_secret),
        )
        .await,
        gateway(
            &home,
            "telegram",
            "independent",
            format!(
                "[[adapter]]\nname = \"a\"\nkind = \"telegram\"\ntoken-env = \"T\"\napi-base = \"{}\"\n",
                poll.base()
            ),
            &format!("T={TELEGRAM_TOKEN}\n"),
        )
        .await,
    ];
    let weixin_home = home.join("profiles/weixin");
    WeixinLogin::new(
        Secret::new(WEIXIN_TOKEN.into()),
        poll.base(),
        "bench@im.bot".into(),
        "bench@im.wechat".into(),
    )
    .write(&weixin_home.join("weixin/a.json"))
    .unwrap();
    subjects.push(
        gateway(
            &home,
            "weixin",
            "independent",
            format!(
                "[[adapter]]\nname = \"a\"\nkind = \"weixin\"\napi-base = \"{}\"\n",
                poll.base()
            ),
            "",
        )
        .await,
    );
    subjects.push(
        gateway(
            &home,
            "slack",
            "independent",
            format!(
                "[[adapter]]\nname = \"a\"\nkind = \"slack\"\napp-token-env = \"A\"\n\
                 bot-token-env = \"B\"\napi-base = \"{}\"\n",
                slack.base()
            ),
            &format!("A={SLACK_APP_TOKEN}\nB={SLACK_BOT_TOKEN}\n"),
        )
        .await,
    );
    subjects.push(
        gateway(
            &home,
            "matrix",
            "independent",
            format!(
                "[[adapter]]\nname = \"a\"\nkind = \"matrix\"\nhomeserver = \"{}\"\n\
                 user-id = \"{MATRIX_USER}\"\ntoken-env = \"T\"\n",
                matrix.base()
            ),
            &format!("T={MATRIX_TOKEN}\n"),
        )
        .await,
    );
    let url = format!("ws://127.0.0.1:{}/websocket", qq.port);
    subjects.push(child(
        "bare tokio-tungstenite client, 1 connection, 41.25 s heartbeat",
        "independent",
        bare::spawn(&url, 1, HEARTBEAT),
    ));
    // Slack's probe: what a 5 s ping and its answer cost with nothing else.
    subjects.push(child(
        "bare tokio-tungstenite client, 1 connection, 5 s heartbeat",
        "independent",
        bare::spawn(&url, 1, Duration::from_secs(5)),
    ));
    subjects.push(child(
        "`sleep` (the floor)",
        "",
        std::process::Command::new("sleep")
            .arg("86400")
            .spawn()
            .unwrap(),
    ));
    eprintln!(
        "rest: {} processes up; settling, then measuring {window:?}",
        subjects.len()
    );
    // Past start-up: the first heartbeats, the first state files, the bare client's connect.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let start: Vec<((u64, u64), usize)> = subjects
        .iter()
        .map(|s| {
            let dogs = s.watchdog.as_ref().map_or(0, |w| w.lock().unwrap().len());
            (schedstat(s.pid), dogs)
        })
        .collect();
    let t0 = Instant::now();
    tokio::time::sleep(window).await;
    let secs = t0.elapsed().as_secs_f64();
    let rows: Vec<Rest> = subjects
        .iter()
        .zip(start)
        .map(|(s, ((cpu0, wake0), dogs0))| {
            let (cpu1, wake1) = schedstat(s.pid);
            let watchdog = s.watchdog.as_ref().map(|w| {
                let times = w.lock().unwrap();
                let within = &times[dogs0.saturating_sub(1)..];
                let gap = within
                    .windows(2)
                    .map(|p| p[1] - p[0])
                    .max()
                    .unwrap_or_default();
                (times.len() - dogs0, gap)
            });
            Rest {
                label: s.label.clone(),
                server: s.server,
                wakeups_per_s: (wake1 - wake0) as f64 / secs,
                cpu_pct: (cpu1 - cpu0) as f64 / 1e9 / secs * 100.0,
                watchdog,
            }
        })
        .collect();
    drop(subjects);
    drop((qq, poll, slack, matrix, mock));
    print(&rows, secs, &bin);
    let _ = std::fs::remove_dir_all(home);
}

fn print(rows: &[Rest], secs: f64, bin: &str) {
    println!("### At rest: one idle profile, one adapter, {secs:.0} s, `WATCHDOG_USEC` = 30 s\n");
    println!(
        "| process | server | wake-ups per second | CPU, % of one core | `WATCHDOG=1` (count, longest gap) |"
    );
    println!("|---|---|---|---|---|");
    for r in rows {
        let dog = r.watchdog.map_or("—".to_owned(), |(n, gap)| {
            format!("{n}, {:.2} s", gap.as_secs_f64())
        });
        println!(
            "| {} | {} | {:.2} | {:.4}% | {dog} |",
            r.label, r.server, r.wakeups_per_s, r.cpu_pct
        );
    }
    println!(
        "\nTargets: at most 1 wake-up a second per idle profile; no `WATCHDOG=1` gap over 15 s \
         (half `WatchdogSec`). Measured binary: {}\n",
        if bin == BIN {
            "cargo's bench build (dev-dependency features on)"
        } else {
            "a plain release build (`HSV_BENCH_BIN`)"
        }
    );
}

//! Gateway figures: zombie detection latency, detection-to-RESUMED time, the cost of 1,000
//! connections, and loss under injected faults. `cargo bench --bench gateway` prints Markdown
//! for docs/benchmarks.md. Everything runs on loopback against the built-in mock platform.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::config::{self, Secret};
use hermes_svc::gateway::adapter::{self, Deps};
use hermes_svc::gateway::health::{ComponentKind, Registry, State};
use hermes_svc::gateway::spool::{self, Spool};
use hermes_svc::mock_platform::{BlackholeProxy, Fault, MockConfig, MockPlatform};
use tokio::sync::watch;

const BIN: &str = env!("CARGO_BIN_EXE_hermes-svc");

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hsv-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// One half-open trial: returns (detection latency, detection -> connected again).
async fn zombie_trial(interval: Duration, dir: &Path) -> (Duration, Duration) {
    let mock = MockPlatform::start(MockConfig {
        heartbeat_interval: interval,
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let proxy = BlackholeProxy::start(mock.addr()).await.unwrap();
    mock.set_advertised_ws_url(format!("ws://{}/ws", proxy.addr()));
    let text = format!(
        "[[adapter]]\nname = \"z\"\nkind = \"discord\"\ntoken-env = \"X\"\napi-base = \"{}\"\nbackoff-min = \"100ms\"\n",
        mock.http_base()
    );
    let spec = config::parse(Path::new("bench.toml"), &text)
        .unwrap()
        .adapters[0]
        .clone();
    let registry = Registry::new();
    let hb = registry.register(
        "z",
        ComponentKind::Adapter("discord"),
        Duration::from_secs(30),
    );
    let (stop, rx) = watch::channel(false);
    let spool = Arc::new(Spool::open(dir).unwrap());
    let task = tokio::spawn(adapter::run(
        spec,
        Some(Secret::new("t".into())),
        Deps {
            spool,
            heartbeat: hb,
            shared: adapter::Shared::new(Default::default()).unwrap(),
            shutdown: rx,
        },
    ));
    let view = || registry.snapshot().components[0].clone();
    while view().state != State::Connected {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A random phase relative to the heartbeat schedule.
    tokio::time::sleep(interval + interval.mul_f64(fastrand::f64())).await;
    let attempts_before = view().attempts;
    let fault = Instant::now();
    proxy.blackhole_existing();
    let detected = loop {
        if view().reconnects >= 1 {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let resumed = loop {
        // A new attempt has begun and reached RESUMED (the state goes through Connecting).
        let v = view();
        if v.attempts > attempts_before && v.state == State::Connected && mock.stats().resumes >= 1
        {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let _ = stop.send(true);
    let _ = task.await;
    (detected - fault, resumed - detected)
}

async fn zombie_latency() {
    let interval = Duration::from_secs(1);
    let mut detect = vec![];
    let mut resume = vec![];
    let dir = scratch("zombie");
    for round in 0..5 {
        let trials: Vec<_> = (0..10)
            .map(|i| {
                let d = dir.join(format!("{round}-{i}"));
                tokio::spawn(async move { zombie_trial(interval, &d).await })
            })
            .collect();
        for t in trials {
            let (d, r) = t.await.unwrap();
            detect.push(d.as_secs_f64() / interval.as_secs_f64());
            resume.push(r.as_secs_f64() * 1e3);
        }
    }
    detect.sort_by(f64::total_cmp);
    resume.sort_by(f64::total_cmp);
    println!(
        "### Zombie detection ({} half-open trials, heartbeat interval {interval:?})\n",
        detect.len()
    );
    println!("| figure | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| detection latency, in heartbeat intervals | {:.2} | {:.2} | {:.2} | p99 ≤ 1.25 |",
        pct(&detect, 0.5),
        pct(&detect, 0.99),
        detect[detect.len() - 1]
    );
    println!(
        "| detection to RESUMED, ms | {:.1} | {:.1} | {:.1} | p99 ≤ 200 |\n",
        pct(&resume, 0.5),
        pct(&resume, 0.99),
        resume[resume.len() - 1]
    );
    let _ = std::fs::remove_dir_all(dir);
}

struct Gateway(Child);
impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The gateway binary to measure. `cargo bench` builds `BIN` with the dev-dependency features
/// (tokio's test-util clock among them); `HSV_BENCH_BIN` points at a plain release build.
/// Two mistakes would measure the wrong program, and both are refused:
/// - `BIN` is target/release/hermes-svc itself, which `cargo bench` has just overwritten, so
///   pointing `HSV_BENCH_BIN` at that path measures the dev-featured build under a plain name;
/// - a copy older than the newest source file measures code that is no longer there.
///
/// Checked once, when the bench starts: a source edited during a long soak does not change
/// the binary already being measured.
fn gateway_bin() -> String {
    static BIN_CHECKED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN_CHECKED.get_or_init(check_gateway_bin).clone()
}

fn check_gateway_bin() -> String {
    let Ok(bin) = std::env::var("HSV_BENCH_BIN") else {
        return BIN.to_owned();
    };
    let how = "run `cargo build --release && cp target/release/hermes-svc /tmp/hsv-prod` and set \
               HSV_BENCH_BIN=/tmp/hsv-prod";
    let real = |p: &str| std::fs::canonicalize(p).ok();
    let Some(path) = real(&bin) else {
        panic!("HSV_BENCH_BIN={bin} does not exist; {how}");
    };
    assert!(
        Some(&path) != real(BIN).as_ref(),
        "HSV_BENCH_BIN={bin} is the file `cargo bench` just rebuilt with dev-dependency \
         features; {how}"
    );
    let built = std::fs::metadata(&path).and_then(|m| m.modified()).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if let Some(newer) = newest_file(&src).filter(|(t, _)| *t > built) {
        panic!(
            "HSV_BENCH_BIN={bin} is older than {}, so it is not the code in this tree; {how}",
            newer.1.display()
        );
    }
    bin
}

/// The most recently modified file under `dir`, with its time.
fn newest_file(dir: &Path) -> Option<(std::time::SystemTime, PathBuf)> {
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if let Ok(t) = meta.modified() {
                if newest.as_ref().is_none_or(|(n, _)| t > *n) {
                    newest = Some((t, entry.path()));
                }
            }
        }
    }
    newest
}

fn spawn_gateway(home: &Path, profile: &str, notify: Option<&Path>) -> Gateway {
    let mut cmd = Command::new(gateway_bin());
    cmd.args(["gateway", "run", "--profile", profile])
        .env("HERMES_HOME", home)
        .env("HERMES_LOCK_DIR", home.join("locks"))
        .env("HERMES_LOG", "warn")
        .env_remove("WATCHDOG_USEC")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // READY=1 and STATUS= tell the moment every adapter is ready, to the millisecond (the
    // state file is rewritten only every few seconds).
    match notify {
        Some(path) => cmd.env("NOTIFY_SOCKET", path),
        None => cmd.env_remove("NOTIFY_SOCKET"),
    };
    Gateway(cmd.spawn().unwrap())
}

fn proc_status(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Nanoseconds the process has spent on a CPU, from the scheduler's own accounting (precise,
/// unlike the tick-sampled utime/stime, which are noisy at well under 1% on a VM).
fn cpu_ns(pid: u32) -> u64 {
    schedstat(pid).0
}

/// The whole machine's CPU time so far, from /proc/stat: (busy, total) in ticks. Over a window
/// it shows whether something else was running (a build, a test suite) while we measured.
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let total: u64 = f.iter().take(8).sum();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// Context switches over all threads: (voluntary, involuntary). Involuntary ones are
/// preemptions, by the platform process among others when both share the machine.
fn ctxt_switches(pid: u32) -> (u64, u64) {
    let mut total = (0, 0);
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        for line in status.lines() {
            let n = |v: &str| v.trim().parse::<u64>().unwrap_or(0);
            if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
                total.0 += n(v);
            } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                total.1 += n(v);
            }
        }
    }
    total
}

/// Over all threads: (nanoseconds on a CPU, times scheduled onto a CPU). The second counts
/// wake-ups, which is what an idle gateway's CPU time is made of.
fn schedstat(pid: u32) -> (u64, u64) {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| {
                    let s = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
                    let mut f = s.split_whitespace();
                    let ns = f.next()?.parse::<u64>().ok()?;
                    let slices = f.nth(1)?.parse::<u64>().ok()?;
                    Some((ns, slices))
                })
                .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
        })
        .unwrap_or((0, 0))
}

async fn wait_summary(state: &Path, want: &str, limit: Duration) {
    let end = Instant::now() + limit;
    loop {
        if let Ok(t) = std::fs::read_to_string(state) {
            if t.contains(want) {
                return;
            }
        }
        assert!(Instant::now() < end, "state never said {want:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Sockets the process holds (`socket:` links in /proc/PID/fd), and how many of them are TCP
/// (the WebSockets plus any HTTP connection), matched by inode against /proc/PID/net/tcp{,6}.
fn sockets(pid: u32) -> (usize, usize) {
    let inodes: Vec<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    l.to_str()?
                        .strip_prefix("socket:[")?
                        .strip_suffix(']')?
                        .parse()
                        .ok()
                })
                .collect()
        })
        .unwrap_or_default();
    let mine: HashSet<u64> = inodes.iter().copied().collect();
    let mut tcp = 0;
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        tcp += text
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(9)?.parse::<u64>().ok())
            .filter(|i| mine.contains(i))
            .count();
    }
    (inodes.len(), tcp)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    QqBot,
    Discord,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::QqBot => "qqbot",
            Kind::Discord => "discord",
        }
    }
}

/// benches/independent/qq_discord_server.py as a child process: started, its port parsed
/// from its one line of stdout, stopped with SIGTERM when dropped.
struct Independent {
    child: Child,
    port: u16,
    http: reqwest::Client,
}

impl Independent {
    /// The venv python from `scripts/bench-deps` (its last line of stdout).
    fn python() -> String {
        let root = env!("CARGO_MANIFEST_DIR");
        let out = Command::new(format!("{root}/scripts/bench-deps"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/bench-deps");
        assert!(out.status.success(), "scripts/bench-deps failed");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .last()
            .expect("scripts/bench-deps printed no python path")
            .trim()
            .to_owned()
    }

    fn start(python: &str, interval: Duration, log: &Path) -> Self {
        use std::io::BufRead;
        let root = env!("CARGO_MANIFEST_DIR");
        let mut child = Command::new(python)
            .arg(format!("{root}/benches/independent/qq_discord_server.py"))
            .args(["--port", "0", "--heartbeat-interval-ms"])
            .arg(interval.as_millis().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start the independent server");
        let mut line = String::new();
        let _ = std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let port = line
            .trim()
            .strip_prefix("listening http://127.0.0.1:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "independent server said {line:?}; its stderr is in {}",
                    log.display()
                )
            });
        Self {
            child,
            port,
            http: reqwest::Client::new(),
        }
    }

    async fn stats(&self) -> serde_json::Value {
        let url = format!("http://127.0.0.1:{}/_independent/stats", self.port);
        self.http
            .get(url)
            .send()
            .await
            .expect("GET /_independent/stats")
            .json()
            .await
            .expect("stats are JSON")
    }
}

impl Drop for Independent {
    fn drop(&mut self) {
        use nix::sys::signal::{kill, Signal};
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The platform side of one configuration.
enum Server {
    Mock(MockPlatform),
    Independent(Independent),
}

/// What the platform has seen so far.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    heartbeats: u64,
    connections: u64,
    identifies: u64,
    resumes: u64,
    /// 4009 closes for a missed heartbeat (the independent server enforces the deadline).
    timeouts: Option<u64>,
}

impl Server {
    fn http_base(&self) -> String {
        match self {
            Server::Mock(m) => m.http_base(),
            Server::Independent(i) => format!("http://127.0.0.1:{}", i.port),
        }
    }

    fn pid(&self) -> Option<u32> {
        match self {
            Server::Mock(_) => None,
            Server::Independent(i) => Some(i.child.id()),
        }
    }

    async fn seen(&self) -> Seen {
        match self {
            Server::Mock(m) => {
                let s = m.stats();
                Seen {
                    heartbeats: s.heartbeats,
                    connections: s.connections,
                    identifies: s.identifies,
                    resumes: s.resumes,
                    timeouts: None,
                }
            }
            Server::Independent(i) => {
                let v = i.stats().await;
                let n = |k: &str| v[k].as_u64().unwrap_or(0);
                Seen {
                    heartbeats: n("heartbeats"),
                    connections: n("ws_connects"),
                    identifies: n("identifies"),
                    resumes: n("resumes"),
                    timeouts: Some(n("heartbeat_timeouts")),
                }
            }
        }
    }
}

/// `gateway.toml` and `.env` for `n` adapters of one kind, each with its own credential (the
/// session start limit spaces Identify calls 5 s apart per credential), discovering the gateway
/// and (QQ) fetching tokens from `base`, as a real start does. `HSV_BENCH_WS_PING=true|false`
/// overrides the kind's `ws-ping` default (off for qqbot, on for discord), to measure its cost.
fn many_adapters(kind: Kind, n: usize, base: &str) -> (String, String) {
    let mut toml = String::new();
    let mut env = String::new();
    let ws_ping = std::env::var("HSV_BENCH_WS_PING")
        .ok()
        .filter(|v| v == "true" || v == "false")
        .map(|v| format!("ws-ping = {v}\n"))
        .unwrap_or_default();
    for i in 0..n {
        match kind {
            Kind::QqBot => toml.push_str(&format!(
                "[[adapter]]\nname = \"a{i}\"\nkind = \"qqbot\"\napp-id = \"{}\"\nsecret-env = \"QQ_SECRET\"\napi-base = \"{base}\"\ntoken-url = \"{base}/app/getAppAccessToken\"\n",
                102_000_000 + i
            )),
            Kind::Discord => {
                toml.push_str(&format!(
                    "[[adapter]]\nname = \"a{i}\"\nkind = \"discord\"\ntoken-env = \"TOKEN_{i}\"\napi-base = \"{base}\"\n"
                ));
                env.push_str(&format!("TOKEN_{i}=bench-token-{i}\n"));
            }
        }
        toml.push_str(&ws_ping);
    }
    if kind == Kind::QqBot {
        env.push_str("QQ_SECRET=bench-secret\n");
    }
    (toml, env)
}

/// One reading of the gateway (and the platform) during the measured window.
#[derive(Clone, Copy, Debug)]
struct Sample {
    at: Instant,
    cpu_ns: u64,
    wakeups: u64,
    switches: (u64, u64),
    machine: (u64, u64),
    platform_cpu_ns: u64,
    rss_kib: u64,
    sockets: (usize, usize),
    seen: Seen,
}

async fn sample(pid: u32, server: &Server) -> Sample {
    let (cpu, wakeups) = schedstat(pid);
    Sample {
        at: Instant::now(),
        cpu_ns: cpu,
        wakeups,
        switches: ctxt_switches(pid),
        machine: machine_ticks(),
        platform_cpu_ns: server.pid().map_or(0, cpu_ns),
        rss_kib: proc_status(pid, "VmRSS:"),
        sockets: sockets(pid),
        seen: server.seen().await,
    }
}

/// What one configuration measured.
struct Measured {
    kind: Kind,
    server: &'static str,
    n: usize,
    ready_after: Duration,
    cpu_to_ready: Duration,
    sockets_15s: (usize, usize),
    rss_ready_kib: u64,
    hwm_kib: u64,
    /// The first sample (two intervals after ready), the window's last, then one a minute.
    window: (Sample, Sample),
    soak: Vec<Sample>,
}

fn env_secs(key: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(key)
            .ok()
            .and_then(|w| w.parse().ok())
            .unwrap_or(default),
    )
}

/// Wait for "n/n adapters ready" in a READY=1/STATUS= datagram or in the state file.
async fn wait_ready(notify: &std::os::unix::net::UnixDatagram, state: &Path, n: usize) {
    let want = format!("{n}/{n} adapters ready");
    let end = Instant::now() + Duration::from_secs(180);
    let mut buf = vec![0u8; 4096];
    let mut polls = 0u32;
    loop {
        while let Ok(len) = notify.recv(&mut buf) {
            if String::from_utf8_lossy(&buf[..len]).contains(&want) {
                return;
            }
        }
        polls += 1;
        if polls % 10 == 0 {
            if let Ok(t) = std::fs::read_to_string(state) {
                if t.contains(&want) {
                    return;
                }
            }
        }
        assert!(Instant::now() < end, "the gateway never said {want:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Wait (up to five minutes) until the machine has been nearly idle for five seconds: a build
/// or test suite running alongside shows up in a sub-1% CPU figure as noise several times the
/// effect being measured. The window's own "whole machine busy" row says how well that held.
async fn wait_for_quiet_machine() {
    let give_up = Instant::now() + Duration::from_secs(300);
    loop {
        let a = machine_ticks();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let b = machine_ticks();
        let busy = (b.0 - a.0) as f64 / (b.1 - a.1).max(1) as f64 * 100.0;
        if busy < 10.0 {
            return;
        }
        if Instant::now() > give_up {
            eprintln!("the machine is still {busy:.0}% busy; measuring anyway");
            return;
        }
        eprintln!("the machine is {busy:.0}% busy; waiting for it to settle");
    }
}

async fn measure(kind: Kind, server: Server, label: &'static str, n: usize) -> Measured {
    let interval = Duration::from_secs(5);
    let window = env_secs("HSV_BENCH_WINDOW", 60);
    let soak = env_secs("HSV_BENCH_SOAK", 0);
    let home = scratch(&format!("thousand-{}-{label}", kind.name()));
    let ph = home.join("profiles/many");
    std::fs::create_dir_all(&ph).unwrap();
    let (toml, env) = many_adapters(kind, n, &server.http_base());
    std::fs::write(ph.join("gateway.toml"), toml).unwrap();
    std::fs::write(ph.join(".env"), env).unwrap();
    let notify_path = home.join("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify.set_nonblocking(true).unwrap();

    let started = Instant::now();
    let gw = spawn_gateway(&home, "many", Some(&notify_path));
    let pid = gw.0.id();
    let at_15s = tokio::spawn(async move {
        tokio::time::sleep_until((started + Duration::from_secs(15)).into()).await;
        sockets(pid)
    });
    wait_ready(&notify, &ph.join("state/gateway.json"), n).await;
    let ready_after = started.elapsed();
    let cpu_to_ready = Duration::from_nanos(cpu_ns(pid));
    let rss_ready_kib = proc_status(pid, "VmRSS:");
    eprintln!(
        "{n} {} / {label}: ready after {:.2} s; measuring {window:?}{}",
        kind.name(),
        ready_after.as_secs_f64(),
        if soak > window {
            format!(", RSS for {soak:?}")
        } else {
            String::new()
        }
    );
    // Let the first-heartbeat jitter settle, then measure.
    tokio::time::sleep(interval * 2).await;
    let sockets_15s = at_15s.await.unwrap();
    let first = sample(pid, &server).await;
    let minute = Duration::from_secs(60);
    let mut offsets: Vec<Duration> = (1..=soak.as_secs() / 60)
        .map(|k| minute * k as u32)
        .collect();
    offsets.push(window);
    offsets.sort();
    offsets.dedup();
    let mut window_end = None;
    let mut soak_samples = vec![first];
    for off in offsets {
        tokio::time::sleep_until((first.at + off).into()).await;
        let s = sample(pid, &server).await;
        if off == window {
            window_end = Some(s);
        }
        if soak > Duration::ZERO && off.as_secs() % 60 == 0 {
            soak_samples.push(s);
        }
    }
    let hwm_kib = proc_status(pid, "VmHWM:");
    drop(gw);
    drop(server);
    let _ = std::fs::remove_dir_all(home);
    Measured {
        kind,
        server: label,
        n,
        ready_after,
        cpu_to_ready,
        sockets_15s,
        rss_ready_kib,
        hwm_kib,
        window: (first, window_end.unwrap()),
        soak: if soak > Duration::ZERO {
            soak_samples
        } else {
            vec![]
        },
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn cpu_pct(a: &Sample, b: &Sample, ns: fn(&Sample) -> u64) -> f64 {
    (ns(b) - ns(a)) as f64 / 1e9 / (b.at - a.at).as_secs_f64() * 100.0
}

fn beats_per_s(a: &Sample, b: &Sample) -> f64 {
    (b.seen.heartbeats - a.seen.heartbeats) as f64 / (b.at - a.at).as_secs_f64()
}

fn socket_text((all, tcp): (usize, usize)) -> String {
    format!("{all} ({tcp} TCP)")
}

/// One table per adapter kind, the built-in mock and the independent server side by side.
fn print_thousand(results: &[Measured]) {
    for kind in [Kind::QqBot, Kind::Discord] {
        let cols: Vec<Option<&Measured>> = ["mock", "independent"]
            .iter()
            .map(|s| results.iter().find(|r| r.kind == kind && r.server == *s))
            .collect();
        let Some(any) = cols.iter().flatten().next() else {
            continue;
        };
        let n = any.n;
        let window = any.window.1.at - any.window.0.at;
        let ws_ping = std::env::var("HSV_BENCH_WS_PING")
            .map(|v| format!(", ws-ping = {v}"))
            .unwrap_or_default();
        println!(
            "### One gateway, {n} `{}` adapters, heartbeat every 5 s{ws_ping} ({:.0} s measured)\n",
            kind.name(),
            window.as_secs_f64()
        );
        println!("| figure | built-in mock | independent server | target |");
        println!("|---|---|---|---|");
        let row = |figure: &str, target: &str, f: &dyn Fn(&Measured) -> String| {
            let cells: Vec<String> = cols.iter().map(|c| c.map_or("—".into(), f)).collect();
            println!("| {figure} | {} | {} | {target} |", cells[0], cells[1]);
        };
        row(&format!("time to \"{n}/{n} adapters ready\""), "", &|m| {
            format!("{:.2} s", m.ready_after.as_secs_f64())
        });
        row("gateway CPU time until ready", "", &|m| {
            format!("{:.2} s", m.cpu_to_ready.as_secs_f64())
        });
        row("sockets held 15 s after start", "", &|m| {
            socket_text(m.sockets_15s)
        });
        row("sockets held at the end", "", &|m| {
            socket_text(m.window.1.sockets)
        });
        row("RSS at ready", "", &|m| mib(m.rss_ready_kib));
        row("RSS after the window", "≤ 32 MiB", &|m| {
            mib(m.window.1.rss_kib)
        });
        row("peak RSS (VmHWM)", "", &|m| mib(m.hwm_kib));
        row("CPU over the window, % of one core", "≤ 0.7%", &|m| {
            format!("{:.2}%", cpu_pct(&m.window.0, &m.window.1, |s| s.cpu_ns))
        });
        row(
            "gateway wake-ups per second (threads scheduled onto a CPU)",
            "",
            &|m| {
                let (a, b) = m.window;
                format!(
                    "{:.0}",
                    (b.wakeups - a.wakeups) as f64 / (b.at - a.at).as_secs_f64()
                )
            },
        );
        row(
            "gateway context switches per second, voluntary / involuntary",
            "",
            &|m| {
                let (a, b) = m.window;
                let secs = (b.at - a.at).as_secs_f64();
                format!(
                    "{:.0} / {:.1}",
                    (b.switches.0 - a.switches.0) as f64 / secs,
                    (b.switches.1 - a.switches.1) as f64 / secs
                )
            },
        );
        row(
            "heartbeats per second seen by the platform",
            &format!("{}", n / 5),
            &|m| format!("{:.1}", beats_per_s(&m.window.0, &m.window.1)),
        );
        row(
            "WebSockets / identifies / resumes / 4009 closes seen by the platform",
            &format!("{n} / {n} / 0 / 0"),
            &|m| {
                let s = m.window.1.seen;
                let t = s.timeouts.map_or("n/a".into(), |t| t.to_string());
                format!("{} / {} / {} / {t}", s.connections, s.identifies, s.resumes)
            },
        );
        row(
            "platform process CPU over the window, % of one core",
            "",
            &|m| match m.server {
                "mock" => "(in the bench process)".into(),
                _ => format!(
                    "{:.1}%",
                    cpu_pct(&m.window.0, &m.window.1, |s| s.platform_cpu_ns)
                ),
            },
        );
        row(
            "whole machine busy over the window, % of all cores (anything else running?)",
            "",
            &|m| {
                let (a, b) = m.window;
                let busy = (b.machine.0 - a.machine.0) as f64;
                let total = (b.machine.1 - a.machine.1).max(1) as f64;
                format!("{:.1}%", busy / total * 100.0)
            },
        );
        println!();
    }
    for m in results.iter().filter(|m| !m.soak.is_empty()) {
        println!(
            "### RSS over time: {} `{}` adapters, {} server\n",
            m.n,
            m.kind.name(),
            m.server
        );
        println!("| minutes after the window began | RSS | CPU over the minute before | heartbeats/s | sockets | machine busy |");
        println!("|---|---|---|---|---|---|");
        for (i, s) in m.soak.iter().enumerate() {
            let (cpu, rate, busy) = match i {
                0 => ("".into(), "".into(), "".into()),
                _ => {
                    let p = &m.soak[i - 1];
                    let busy = (s.machine.0 - p.machine.0) as f64
                        / (s.machine.1 - p.machine.1).max(1) as f64;
                    (
                        format!("{:.2}%", cpu_pct(p, s, |s| s.cpu_ns)),
                        format!("{:.1}", beats_per_s(p, s)),
                        format!("{:.1}%", busy * 100.0),
                    )
                }
            };
            println!(
                "| {:.0} | {} | {cpu} | {rate} | {} | {busy} |",
                (s.at - m.soak[0].at).as_secs_f64() / 60.0,
                mib(s.rss_kib),
                socket_text(s.sockets)
            );
        }
        let (a, b) = (m.soak[0].rss_kib, m.soak[m.soak.len() - 1].rss_kib);
        let max = m.soak.iter().map(|s| s.rss_kib).max().unwrap();
        println!(
            "\nRSS first {} → last {} ({:+.2} MiB), highest {}.\n",
            mib(a),
            mib(b),
            (b as f64 - a as f64) / 1024.0,
            mib(max)
        );
    }
}

/// 1,000 adapters of each kind against the built-in mock and against the independent server
/// (benches/independent), discovering the gateway and fetching tokens as a real start does.
/// `HSV_BENCH_ONLY` (e.g. `qqbot/independent,discord`) picks configurations, `HSV_BENCH_ADAPTERS`
/// the count, `HSV_BENCH_WINDOW` the measured window (60 s) and `HSV_BENCH_SOAK` (seconds) an
/// RSS reading every minute for that long.
async fn thousand_connections() {
    let n: usize = std::env::var("HSV_BENCH_ADAPTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let only = std::env::var("HSV_BENCH_ONLY").unwrap_or_default();
    let picked = |kind: Kind, server: &str| {
        only.is_empty()
            || only.split(',').map(str::trim).any(|o| {
                o == kind.name() || o == server || o == format!("{}/{server}", kind.name())
            })
    };
    let interval = Duration::from_secs(5);
    let python = (picked(Kind::QqBot, "independent") || picked(Kind::Discord, "independent"))
        .then(Independent::python);
    let bin = gateway_bin();
    if bin == BIN {
        eprintln!(
            "measuring {bin}, cargo's bench build with dev-dependency features; set \
             HSV_BENCH_BIN to a copy of a plain `cargo build --release` for recorded figures"
        );
    } else {
        eprintln!("measuring {bin}");
    }
    let logs = scratch("independent-logs");
    let mut results = vec![];
    for kind in [Kind::QqBot, Kind::Discord] {
        for label in ["mock", "independent"] {
            if !picked(kind, label) {
                continue;
            }
            wait_for_quiet_machine().await;
            let server = match label {
                "mock" => Server::Mock(
                    MockPlatform::start(MockConfig {
                        heartbeat_interval: interval,
                        ..MockConfig::default()
                    })
                    .await
                    .unwrap(),
                ),
                _ => Server::Independent(Independent::start(
                    python.as_deref().unwrap(),
                    interval,
                    &logs.join(format!("{}.log", kind.name())),
                )),
            };
            results.push(measure(kind, server, label, n).await);
        }
    }
    print_thousand(&results);
    println!(
        "Measured binary: {}\n",
        if bin == BIN {
            "cargo's bench build (dev-dependency features on)"
        } else {
            "a plain release build (`HSV_BENCH_BIN`)"
        }
    );
    // Anything the independent server complained about (tracebacks, aiohttp warnings).
    for kind in [Kind::QqBot, Kind::Discord] {
        let log = logs.join(format!("{}.log", kind.name()));
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if !text.trim().is_empty() {
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            eprintln!("independent server ({}) stderr, last lines:", kind.name());
            for l in tail.into_iter().rev() {
                eprintln!("  {l}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(logs);
}

async fn faults_and_loss() {
    let mock = MockPlatform::start(MockConfig {
        heartbeat_interval: Duration::from_secs(1),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let proxy = BlackholeProxy::start(mock.addr()).await.unwrap();
    mock.set_advertised_ws_url(format!("ws://{}/ws", proxy.addr()));
    let home = scratch("loss");
    let ph = home.join("profiles/loss");
    std::fs::create_dir_all(&ph).unwrap();
    let base = mock.http_base();
    std::fs::write(
        ph.join("gateway.toml"),
        format!(
            "[[adapter]]\nname = \"qq\"\nkind = \"qqbot\"\napp-id = \"1\"\nsecret-env = \"S\"\napi-base = \"{base}\"\ntoken-url = \"{base}/app/getAppAccessToken\"\nbackoff-min = \"100ms\"\n\
             [[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"T\"\napi-base = \"{base}\"\nbackoff-min = \"100ms\"\n"
        ),
    )
    .unwrap();
    std::fs::write(ph.join(".env"), "S=s\nT=t\n").unwrap();
    let _gw = spawn_gateway(&home, "loss", None);
    wait_summary(
        &ph.join("state/gateway.json"),
        "2/2 adapters ready",
        Duration::from_secs(30),
    )
    .await;
    let faults = [
        Fault::None, // half-open through the proxy
        Fault::Close(4000),
        Fault::Close(1006),
        Fault::Reconnect,
        Fault::InvalidSession(true),
    ];
    let emits = 5_000; // one event per session each: 10,000 dispatches
    let mut injected = 0;
    let started = Instant::now();
    for i in 0..emits {
        mock.emit(1);
        if i % 250 == 125 && injected < 20 {
            match faults[injected % faults.len()] {
                Fault::None => proxy.blackhole_existing(),
                f => mock.set_fault(f),
            }
            injected += 1;
        }
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    let generated: HashSet<String> = mock.generated_event_ids().into_iter().collect();
    let end = Instant::now() + Duration::from_secs(30);
    let (stored, unique) = loop {
        let events = spool::read(&ph.join("inbox"), None).unwrap_or_default();
        let ids: HashSet<String> = events.iter().map(|e| e.id.clone()).collect();
        if generated.is_subset(&ids) || Instant::now() > end {
            break (events.len(), ids);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let lost = generated.difference(&unique).count();
    let dup = stored - unique.len();
    let s = mock.stats();
    println!(
        "### Loss under faults ({} dispatches, {injected} injected faults over {:.0} s)\n",
        generated.len(),
        started.elapsed().as_secs_f64()
    );
    println!("| figure | value | target |");
    println!("|---|---|---|");
    println!("| lost events | {lost} | 0 |");
    println!("| duplicated events | {dup} | 0 |");
    println!(
        "| resumes / identifies seen by the platform | {} / {} | |\n",
        s.resumes, s.identifies
    );
    let _ = std::fs::remove_dir_all(home);
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let only = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    rt.block_on(async {
        if only.as_deref().is_none_or(|o| o == "zombie") {
            zombie_latency().await;
        }
        if only.as_deref().is_none_or(|o| o == "loss") {
            faults_and_loss().await;
        }
        if only.as_deref().is_none_or(|o| o == "thousand") {
            thousand_connections().await;
        }
    });
}

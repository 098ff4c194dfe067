//! One profile on several "hosts" (each its own home, lock directory and process), one active
//! at a time, against a real three-member etcd cluster on loopback (Debian's etcd-server) and
//! the mock platform, which records every connection's frames and every post.
//!
//! What is asserted is what a platform would see: which connection identified, when each one
//! sent its first and last frame (no two ever overlap), and which messages were posted.

use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hermes_svc::mock_platform::{MockConfig, MockPlatform, MockStats};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::harness::{scratch_dir, wait_for, TempDir, BIN};
use crate::mock_runtime::{mock_runtime, start_mock};

const PROFILE: &str = "cl";
const TOKEN: &str = "cluster-bot-token";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A real etcd cluster of three members on loopback, each its own process and data directory.
pub(crate) struct Etcd {
    dir: PathBuf,
    members: Vec<Member>,
    cluster: String,
}

struct Member {
    name: String,
    client: u16,
    peer: u16,
    child: Option<Child>,
}

impl Etcd {
    pub(crate) fn start(dir: &Path) -> Etcd {
        let members: Vec<Member> = (1..=3)
            .map(|i| Member {
                name: format!("e{i}"),
                client: free_port(),
                peer: free_port(),
                child: None,
            })
            .collect();
        let cluster = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer))
            .collect::<Vec<_>>()
            .join(",");
        let mut etcd = Etcd {
            dir: dir.to_owned(),
            members,
            cluster,
        };
        for i in 0..3 {
            etcd.start_member(i);
        }
        etcd.wait_healthy();
        etcd
    }

    fn start_member(&mut self, i: usize) {
        let m = &self.members[i];
        let data = self.dir.join(&m.name);
        let log = fs::File::create(self.dir.join(format!("{}.log", m.name))).unwrap();
        let client = format!("http://127.0.0.1:{}", m.client);
        let peer = format!("http://127.0.0.1:{}", m.peer);
        let child = Command::new("etcd")
            .args(["--name", &m.name, "--data-dir"])
            .arg(&data)
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args([
                "--initial-cluster",
                &self.cluster,
                "--initial-cluster-state",
                "new",
            ])
            .args(["--initial-cluster-token", "hermes-svc-test"])
            // Loopback: elections in a second, not the WAN defaults.
            .args(["--heartbeat-interval", "100", "--election-timeout", "1000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("etcd runs (scripts/ensure-deps installs etcd-server)");
        self.members[i].child = Some(child);
    }

    pub(crate) fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("http://127.0.0.1:{}", m.client))
            .collect()
    }

    /// Every running member answers `/health` with `"health":"true"` (it has a leader).
    fn wait_healthy(&self) {
        for m in self.members.iter().filter(|m| m.child.is_some()) {
            wait_for(Duration::from_secs(30), "an etcd member's health", || {
                http_get(m.client, "/health").filter(|b| b.contains("\"true\""))
            });
        }
    }

    /// The member that leads now, by its `/v3/maintenance/status` answer.
    fn leader(&self) -> usize {
        wait_for(Duration::from_secs(10), "an etcd leader", || {
            self.members.iter().position(|m| {
                m.child.is_some()
                    && http_post(m.client, "/v3/maintenance/status", "{}").is_some_and(|b| {
                        let v: serde_json::Value = serde_json::from_str(&b).unwrap_or_default();
                        v["leader"] == v["header"]["member_id"] && !v["leader"].is_null()
                    })
            })
        })
    }

    fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn restart(&mut self, i: usize) {
        self.start_member(i);
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// A one-request HTTP/1.0 exchange with etcd's gateway; the body, on a 200.
fn http(port: u16, request: &str) -> Option<String> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.lines()
        .next()?
        .contains(" 200 ")
        .then(|| body.to_owned())
}

fn http_get(port: u16, path: &str) -> Option<String> {
    http(port, &format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n"))
}

fn http_post(port: u16, path: &str, body: &str) -> Option<String> {
    http(
        port,
        &format!(
            "POST {path} HTTP/1.0\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// One host's gateway for the profile: its own home, lock directory, notify socket and log.
struct Host {
    node: String,
    home: PathBuf,
    log: PathBuf,
    notify: UnixDatagram,
    child: Child,
}

/// The profile's `gateway.toml`: one Discord adapter on the mock, and the cluster.
fn config(mock: &MockPlatform, etcd: &Etcd, node: &str, ttl: &str) -> String {
    let endpoints = etcd
        .endpoints()
        .iter()
        .map(|e| format!("{e:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"CL_TOKEN\"\n\
         api-base = \"{}\"\n\n[cluster]\nendpoints = [{endpoints}]\nnode = \"{node}\"\n\
         lease-ttl = \"{ttl}\"\ntakeover-delay = \"0s\"\n",
        mock.http_base()
    )
}

impl Host {
    fn start(dir: &Path, node: &str, gateway_toml: &str, faults: &str) -> Host {
        let root = dir.join(node);
        let home = root.join("hermes/profiles").join(PROFILE);
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(root.join("locks")).unwrap();
        fs::write(home.join("gateway.toml"), gateway_toml).unwrap();
        let env = home.join(".env");
        fs::write(&env, format!("CL_TOKEN={TOKEN}\n")).unwrap();
        fs::set_permissions(&env, fs::Permissions::from_mode(0o600)).unwrap();
        let sock_path = root.join("notify.sock");
        let _ = fs::remove_file(&sock_path);
        let notify = UnixDatagram::bind(&sock_path).unwrap();
        notify.set_nonblocking(true).unwrap();
        let log = root.join("gateway.log");
        let child = Command::new(BIN)
            .args(["gateway", "run", "--profile", PROFILE])
            .env("HERMES_HOME", root.join("hermes"))
            .env("HERMES_LOCK_DIR", root.join("locks"))
            .env("NOTIFY_SOCKET", &sock_path)
            .env("RUST_LOG", "info")
            .env("HERMES_TEST_FAULT", faults)
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .env_remove("CL_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Host {
            node: node.into(),
            home,
            log,
            notify,
            child,
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Every notification sent since the last look, in order.
    fn notifications(&self) -> Vec<String> {
        let mut out = vec![];
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.notify.recv(&mut buf) {
            out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        out
    }

    /// The state file's `cluster` object, once it has one.
    fn cluster_state(&self) -> Option<serde_json::Value> {
        let text = fs::read_to_string(self.home.join("state/gateway.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        Some(v["cluster"].clone()).filter(|c| !c.is_null())
    }

    fn role(&self) -> Option<String> {
        self.cluster_state()?["role"].as_str().map(str::to_owned)
    }

    /// Wait for its exit, up to `within`; how it exited.
    fn exited(&mut self, within: Duration) -> std::process::ExitStatus {
        wait_for(within, &format!("{} to exit", self.node), || {
            self.child.try_wait().unwrap()
        })
    }

    /// Post `text` to the chat through this host's local API, without waiting for an answer
    /// (the host may be frozen: the request then waits in its socket).
    fn post_message(&self, text: &str) -> UnixStream {
        let body = serde_json::json!({
            "adapter": "dc", "target": "channel:4242", "text": text, "idempotency_key": text,
        })
        .to_string();
        let mut s = UnixStream::connect(self.home.join("state/api/agent.sock")).unwrap();
        write!(
            s,
            "POST /v1/messages HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        s
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = kill(self.pid(), Signal::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stats(rt: &tokio::runtime::Runtime, mock: &MockPlatform) -> MockStats {
    let _guard = rt.enter();
    mock.stats()
}

/// No two connections' clients ever sent frames within one stretch of time.
fn never_two_at_once(stats: &MockStats) {
    for (i, a) in stats.spans.iter().enumerate() {
        for b in &stats.spans[i + 1..] {
            assert!(
                !a.acted_together(b),
                "two sessions acted at once: {a:?} and {b:?}"
            );
        }
    }
}

struct Rig {
    rt: tokio::runtime::Runtime,
    mock: MockPlatform,
    etcd: Etcd,
    dir: TempDir,
}

impl Rig {
    fn new(tag: &str) -> Rig {
        let dir = scratch_dir(tag);
        let rt = mock_runtime();
        let mock = start_mock(&rt, MockConfig::default());
        let etcd = Etcd::start(dir.path());
        Rig {
            rt,
            mock,
            etcd,
            dir,
        }
    }

    fn host(&self, node: &str, ttl: &str) -> Host {
        self.host_with(node, ttl, "")
    }

    /// A host with `HERMES_TEST_FAULT=faults`.
    fn host_with(&self, node: &str, ttl: &str, faults: &str) -> Host {
        let toml = config(&self.mock, &self.etcd, node, ttl);
        Host::start(self.dir.path(), node, &toml, faults)
    }

    fn stats(&self) -> MockStats {
        stats(&self.rt, &self.mock)
    }

    /// Wait until the mock has seen `n` identifies.
    fn identified(&self, n: u64, within: Duration) -> Instant {
        wait_for(within, &format!("identify number {n}"), || {
            let s = self.stats();
            (s.identifies + s.resumes >= n).then(|| *s.identify_times.last().unwrap())
        })
    }

    fn active_then_standby(&self, ttl: &str) -> (Host, Host) {
        self.active_then_standby_with(ttl, "")
    }

    fn active_then_standby_with(&self, ttl: &str, faults: &str) -> (Host, Host) {
        let a = self.host_with("host-a", ttl, faults);
        self.identified(1, Duration::from_secs(30));
        wait_for(Duration::from_secs(10), "host-a active", || {
            (a.role().as_deref() == Some("active")).then_some(())
        });
        let b = self.host("host-b", ttl);
        wait_for(Duration::from_secs(20), "host-b standing by", || {
            let said = b.notifications().join("\n");
            (said.contains("READY=1") && said.contains("STATUS=standby (active: host-a since "))
                .then_some(())
        });
        assert_eq!(b.role().as_deref(), Some("standby"));
        assert_eq!(self.stats().identifies, 1, "the standby connected");
        (a, b)
    }
}

/// A standby is ready, says who is active, and connects nothing; once the active is killed
/// it takes over within the lease, and the two never act at once.
#[test]
fn a_standby_takes_over_when_the_active_is_killed() {
    let rig = Rig::new("clfail");
    let (a, b) = rig.active_then_standby("5s");
    let state = b.cluster_state().unwrap();
    assert!(
        state["active"]
            .as_str()
            .unwrap()
            .starts_with("host-a since "),
        "{state}"
    );
    let killed = Instant::now();
    kill(a.pid(), Signal::SIGKILL).unwrap();
    let took = rig.identified(2, Duration::from_secs(15));
    let after = took.duration_since(killed);
    // TTL 5 s, takeover-delay 0: within TTL + delay + 2 s.
    assert!(after < Duration::from_secs(7), "took over after {after:?}");
    wait_for(Duration::from_secs(10), "host-b active", || {
        (b.role().as_deref() == Some("active")).then_some(())
    });
    never_two_at_once(&rig.stats());
    drop(a);
}

/// A clean stop revokes the lease: the standby takes over at once, not when a 30 s lease
/// runs out.
#[test]
fn a_clean_stop_hands_over_at_once() {
    let rig = Rig::new("clhand");
    let (mut a, b) = rig.active_then_standby("30s");
    let stopped = Instant::now();
    kill(a.pid(), Signal::SIGTERM).unwrap();
    let took = rig.identified(2, Duration::from_secs(10));
    assert!(
        a.exited(Duration::from_secs(10)).success(),
        "{}",
        a.log_text()
    );
    let after = took.duration_since(stopped);
    assert!(
        after < Duration::from_secs(5),
        "handed over after {after:?}"
    );
    assert!(
        a.log_text().contains("released the cluster's keys"),
        "{}",
        a.log_text()
    );
    never_two_at_once(&rig.stats());
    drop(b);
}

/// An active frozen past its lease (SIGSTOP, as a VM pause) is replaced; when it wakes, it
/// sends nothing, not even a message an agent handed its API while it was frozen, and ends
/// its run saying it was fenced. Its run loop is held for 3 s once it notices (a test
/// fault), so that its other tasks, which wake at the same moment, meet the fence on their
/// own: the outbox worker, the API and the Discord session's heartbeat.
#[test]
fn a_frozen_active_wakes_fenced_and_sends_nothing() {
    let rig = Rig::new("clfreeze");
    let (mut a, b) = rig.active_then_standby_with("5s", "stall:fence-noticed:3000");
    kill(a.pid(), Signal::SIGSTOP).unwrap();
    rig.identified(2, Duration::from_secs(15));
    wait_for(Duration::from_secs(10), "host-b active", || {
        (b.role().as_deref() == Some("active")).then_some(())
    });
    // Written into the frozen API's socket: read the moment the process wakes.
    let _pending = a.post_message("from the deposed active");
    kill(a.pid(), Signal::SIGCONT).unwrap();
    let status = a.exited(Duration::from_secs(10));
    let log = a.log_text();
    assert_eq!(status.code(), Some(75), "{log}");
    assert!(log.contains("fenced"), "{log}");
    // The standby's own message goes out, so the mock is reachable and posting works.
    let _ours = b.post_message("from the new active");
    wait_for(Duration::from_secs(10), "the new active's post", || {
        let _g = rig.rt.enter();
        rig.mock
            .posts()
            .iter()
            .any(|p| p.content == "from the new active")
            .then_some(())
    });
    let _g = rig.rt.enter();
    let posts = rig.mock.posts();
    assert!(
        !posts.iter().any(|p| p.content == "from the deposed active"),
        "the deposed active posted: {posts:?}"
    );
    never_two_at_once(&rig.stats());
}

/// Losing the etcd leader is no failover; losing quorum fences the active within its lease,
/// and a new run waits as a standby (no exit, no restart loop) until quorum returns, then
/// takes over again.
#[test]
fn etcd_faults_fence_only_when_quorum_is_lost() {
    let mut rig = Rig::new("clquorum");
    let mut a = rig.host("host-a", "5s");
    rig.identified(1, Duration::from_secs(30));
    let leader = rig.etcd.leader();
    rig.etcd.kill(leader);
    // Two leases' worth: the active renews through the new leader and stays.
    let calm = Instant::now() + Duration::from_secs(10);
    while Instant::now() < calm {
        assert!(a.child.try_wait().unwrap().is_none(), "{}", a.log_text());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(rig.stats().identifies, 1, "the active reconnected");
    assert_eq!(a.role().as_deref(), Some("active"));
    // Down to one member of three: no quorum.
    let second = (0..3).find(|&i| i != leader).unwrap();
    let lost = Instant::now();
    rig.etcd.kill(second);
    let status = a.exited(Duration::from_secs(10));
    let fenced_after = lost.elapsed();
    let log = a.log_text();
    assert_eq!(status.code(), Some(75), "{log}");
    assert!(
        log.contains("fenced: the etcd lease was not renewed"),
        "{log}"
    );
    assert!(
        fenced_after < Duration::from_secs(5),
        "fenced after {fenced_after:?}"
    );
    let spans = rig.stats().spans;
    let closed = spans[0].closed.expect("the fenced run's connection closed");
    assert!(closed.duration_since(lost) < Duration::from_secs(5));
    // What its manager does next: run it again. It stands by, ready, and does not exit.
    drop(a);
    let b = rig.host("host-a", "5s");
    wait_for(Duration::from_secs(20), "a standby with no quorum", || {
        let said = b.notifications().join("\n");
        (said.contains("READY=1") && said.contains("STATUS=standby (campaigning: etcd at "))
            .then_some(())
    });
    rig.etcd.restart(second);
    rig.etcd.restart(leader);
    rig.identified(2, Duration::from_secs(30));
    let mut b = b;
    assert!(b.child.try_wait().unwrap().is_none(), "{}", b.log_text());
    assert_eq!(rig.stats().identifies, 2);
    never_two_at_once(&rig.stats());
}

/// A cluster the gateway cannot be configured for is refused before anything connects,
/// naming the file and the key; no restart would help, so it says so with its exit status.
#[test]
fn a_cluster_ca_that_cannot_be_read_is_refused_naming_it() {
    let dir = scratch_dir("clbadca");
    let toml = "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"CL_TOKEN\"\n\
                api-base = \"http://127.0.0.1:9\"\n\n[cluster]\n\
                endpoints = [\"https://127.0.0.1:9\"]\nca = \"/nonexistent/etcd-ca.pem\"\n";
    let mut host = Host::start(dir.path(), "host-x", toml, "");
    let status = host.exited(Duration::from_secs(10));
    let log = host.log_text();
    assert_eq!(status.code(), Some(78), "{log}");
    assert!(
        log.contains("[cluster] ca = /nonexistent/etcd-ca.pem: No such file or directory"),
        "{log}"
    );
}

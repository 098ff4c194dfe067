//! The parts of a cluster test or bench: a real three-member etcd cluster (Debian's
//! etcd-server) on its network's address, and one "host" per gateway process (its own network
//! namespace, home, lock directory, notify socket and log) for one profile with a Discord
//! adapter. Included by benches/gateway with `#[path]`.

use std::fs;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::harness::{free_port, wait_for, BIN};
use crate::netns::Netns;
use crate::tls::Certs;

pub(crate) const PROFILE: &str = "cl";
/// The bot token every host uses: the one the mock's Bot API honours (its Discord takes any).
pub(crate) const TOKEN: &str = "123456:mock-telegram-token";

/// A real etcd cluster of three members, each its own process and data directory. Clients
/// reach them over TLS on one address (etcd's network's); their peers, and the test's own
/// look at their health, on loopback.
pub(crate) struct Etcd {
    dir: PathBuf,
    ip: Ipv4Addr,
    /// The CA that signed the members' certificate, which clients trust.
    ca: PathBuf,
    chain: PathBuf,
    key: PathBuf,
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
    /// Serving `certs`' certificate, which must name `ip`.
    ///
    /// Its ports come from [`free_port`], and another test may bind one before etcd does: a
    /// member that exits before the cluster is healthy has the whole cluster started again on
    /// fresh ports, at most three times.
    pub(crate) fn start(dir: &Path, ip: Ipv4Addr, certs: &Certs) -> Etcd {
        for attempt in 1.. {
            let mut etcd = Etcd::on_fresh_ports(&dir.join(format!("try{attempt}")), ip, certs);
            for i in 0..3 {
                etcd.start_member(i);
            }
            match etcd.healthy() {
                Ok(()) => return etcd,
                Err(exited) if attempt < 3 => eprintln!("etcd, attempt {attempt}: {exited}"),
                Err(exited) => panic!("etcd, attempt {attempt}: {exited}"),
            }
        }
        unreachable!()
    }

    fn on_fresh_ports(dir: &Path, ip: Ipv4Addr, certs: &Certs) -> Etcd {
        fs::create_dir_all(dir).unwrap();
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
        Etcd {
            dir: dir.to_owned(),
            ip,
            ca: certs.ca.clone(),
            chain: certs.chain.clone(),
            key: certs.key.clone(),
            members,
            cluster,
        }
    }

    fn start_member(&mut self, i: usize) {
        let m = &self.members[i];
        let data = self.dir.join(&m.name);
        let log = fs::File::create(self.dir.join(format!("{}.log", m.name))).unwrap();
        let client = format!("https://{}:{}", self.ip, m.client);
        let listen = format!("{client},http://127.0.0.1:{}", m.client);
        let peer = format!("http://127.0.0.1:{}", m.peer);
        let child = Command::new("etcd")
            .args(["--name", &m.name, "--data-dir"])
            .arg(&data)
            .args([
                "--listen-client-urls",
                &listen,
                "--advertise-client-urls",
                &client,
            ])
            .arg("--cert-file")
            .arg(&self.chain)
            .arg("--key-file")
            .arg(&self.key)
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
            .map(|m| format!("https://{}:{}", self.ip, m.client))
            .collect()
    }

    /// Every running member answers `/health` with `"health":"true"` (it has a leader); or
    /// which member exited meanwhile, with the end of its log.
    fn healthy(&mut self) -> Result<(), String> {
        for m in self.members.iter_mut() {
            let Some(child) = m.child.as_mut() else {
                continue;
            };
            let (name, port) = (&m.name, m.client);
            let log = self.dir.join(format!("{name}.log"));
            wait_for(Duration::from_secs(30), "an etcd member's health", || {
                if let Ok(Some(status)) = child.try_wait() {
                    let text = fs::read_to_string(&log).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(5).collect();
                    return Some(Err(format!("member {name} exited ({status}): {tail:?}")));
                }
                http_get(port, "/health")
                    .filter(|b| b.contains("\"true\""))
                    .map(Ok)
            })?;
        }
        Ok(())
    }

    /// The member that leads now, by its `/v3/maintenance/status` answer.
    pub(crate) fn leader(&self) -> usize {
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

    /// A member that does not lead: the first, which every client asks first, unless it
    /// leads.
    pub(crate) fn follower(&self) -> usize {
        match self.leader() {
            0 => 1,
            _ => 0,
        }
    }

    /// Every running member healthy (it has a leader), after a restart.
    pub(crate) fn wait_healthy(&mut self) {
        self.healthy().unwrap_or_else(|exited| panic!("{exited}"));
    }

    /// Stop member `i` (SIGSTOP), or let it go on (SIGCONT): its kernel still accepts
    /// connections, and nothing answers on them.
    pub(crate) fn signal(&self, i: usize, signal: Signal) {
        let child = self.members[i].child.as_ref().expect("a running member");
        kill(Pid::from_raw(child.id() as i32), signal).unwrap();
    }

    pub(crate) fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub(crate) fn restart(&mut self, i: usize) {
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

/// One host's gateway for the profile: its own network namespace, home, lock directory,
/// notify socket and log.
pub(crate) struct Host {
    pub(crate) node: String,
    /// Shared with the host's next run, which a test starts in the same namespace.
    pub(crate) net: Arc<Netns>,
    pub(crate) home: PathBuf,
    pub(crate) log: PathBuf,
    pub(crate) notify: UnixDatagram,
    pub(crate) child: Child,
}

/// The profile's `gateway.toml`: one Discord adapter on the platform at `api_base`, and the
/// cluster.
pub(crate) fn config(api_base: &str, etcd: &Etcd, node: &str, ttl: &str) -> String {
    let discord = format!(
        "[[adapter]]\nname = \"dc\"\nkind = \"discord\"\ntoken-env = \"CL_TOKEN\"\n\
         api-base = \"{api_base}\"\n"
    );
    with_cluster(&discord, etcd, node, ttl)
}

/// `adapters` (tables whose token is `CL_TOKEN`) and the `[cluster]` table for `etcd`.
pub(crate) fn with_cluster(adapters: &str, etcd: &Etcd, node: &str, ttl: &str) -> String {
    let endpoints = etcd
        .endpoints()
        .iter()
        .map(|e| format!("{e:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{adapters}\n[cluster]\nendpoints = [{endpoints}]\nca = {:?}\nnode = \"{node}\"\n\
         lease-ttl = \"{ttl}\"\ntakeover-delay = \"0s\"\n",
        etcd.ca.display().to_string()
    )
}

impl Host {
    /// A gateway in `net` that trusts the CA at `trust` for the platform's TLS (the system's
    /// store when `None`).
    pub(crate) fn start(
        net: Arc<Netns>,
        trust: Option<&Path>,
        dir: &Path,
        node: &str,
        gateway_toml: &str,
        faults: &str,
    ) -> Host {
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
        let mut command = net.command(BIN);
        if let Some(ca) = trust {
            command.env("SSL_CERT_FILE", ca).env_remove("SSL_CERT_DIR");
        }
        let child = command
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
            net,
            home,
            log,
            notify,
            child,
        }
    }

    pub(crate) fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    pub(crate) fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Every notification sent since the last look, in order.
    pub(crate) fn notifications(&self) -> Vec<String> {
        let mut out = vec![];
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.notify.recv(&mut buf) {
            out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        out
    }

    /// The state file's `cluster` object, once it has one.
    pub(crate) fn cluster_state(&self) -> Option<serde_json::Value> {
        let text = fs::read_to_string(self.home.join("state/gateway.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        Some(v["cluster"].clone()).filter(|c| !c.is_null())
    }

    pub(crate) fn role(&self) -> Option<String> {
        self.cluster_state()?["role"].as_str().map(str::to_owned)
    }

    /// `doctor --json`'s findings about this host's profile (no manager is asked: the bus
    /// addresses lead nowhere, which doctor reports as HSV000 and goes on).
    pub(crate) fn doctor(&self) -> Vec<serde_json::Value> {
        let hermes_home = self.home.parent().unwrap().parent().unwrap();
        let out = Command::new(BIN)
            .args(["doctor", "--json"])
            .env("HERMES_HOME", hermes_home)
            .env(
                "DBUS_SYSTEM_BUS_ADDRESS",
                "unix:path=/nonexistent/cl-system-bus",
            )
            .env(
                "DBUS_SESSION_BUS_ADDRESS",
                "unix:path=/nonexistent/cl-user-bus",
            )
            .env("XDG_RUNTIME_DIR", "/nonexistent/cl-runtime")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{e}: {text}\n{}", String::from_utf8_lossy(&out.stderr)));
        v["findings"].as_array().cloned().unwrap_or_default()
    }

    /// Wait for its exit, up to `within`; how it exited.
    pub(crate) fn exited(&mut self, within: Duration) -> std::process::ExitStatus {
        wait_for(within, &format!("{} to exit", self.node), || {
            self.child.try_wait().unwrap()
        })
    }

    /// Post `text` to the chat through this host's local API, without waiting for an answer
    /// (the host may be frozen: the request then waits in its socket).
    pub(crate) fn post_message(&self, text: &str) -> UnixStream {
        post_message(&self.api_socket(), text).unwrap()
    }

    /// Submit `text` (its own idempotency key) through this host's API: the answer's status
    /// and body.
    pub(crate) fn submit(&self, text: &str) -> (u16, serde_json::Value) {
        submit(&self.api_socket(), text).expect("the API answers")
    }

    pub(crate) fn api_socket(&self) -> PathBuf {
        self.home.join("state/api/agent.sock")
    }

    /// A message as this host's API shows it.
    pub(crate) fn message(&self, id: &str) -> serde_json::Value {
        use std::io::Read;
        let mut s = UnixStream::connect(self.api_socket()).unwrap();
        write!(
            s,
            "GET /v1/messages/{id} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n"
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).unwrap_or_default()
    }
}

/// Write a submit of `text` (its own idempotency key) for the Discord adapter into the API
/// at `socket`, without waiting for the answer.
pub(crate) fn post_message(socket: &Path, text: &str) -> std::io::Result<UnixStream> {
    let body = serde_json::json!({
        "adapter": "dc", "target": "channel:4242", "text": text, "idempotency_key": text,
    })
    .to_string();
    let mut s = UnixStream::connect(socket)?;
    write!(
        s,
        "POST /v1/messages HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )?;
    Ok(s)
}

/// Submit `text` through the API at `socket`: the answer's status and body; `None` when no
/// answer came (no API there, or it went away).
pub(crate) fn submit(socket: &Path, text: &str) -> Option<(u16, serde_json::Value)> {
    use std::io::Read;
    let mut s = post_message(socket, text).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, serde_json::from_str(body).unwrap_or_default()))
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = kill(self.pid(), Signal::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

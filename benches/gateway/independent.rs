//! The independent platform servers (benches/independent, Python and aiohttp) as child
//! processes, so the gateway is also measured against platforms it was not written with.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One of benches/independent's servers as a child process: started, its port parsed from
/// its one line of stdout, stopped with SIGTERM when dropped.
pub(crate) struct Independent {
    pub(crate) child: Child,
    pub(crate) port: u16,
    http: reqwest::Client,
}

impl Independent {
    /// The venv python from `scripts/bench-deps` (its last line of stdout).
    pub(crate) fn python() -> String {
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

    pub(crate) fn start(python: &str, interval: Duration, log: &Path) -> Self {
        let interval = interval.as_millis().to_string();
        Self::spawn(
            python,
            "qq_discord_server.py",
            &["--heartbeat-interval-ms", &interval],
            log,
        )
    }

    /// Like [`Independent::start`], and every session dispatches a message every `every`;
    /// clients reach it through a front at `public_ws` (`wss://HOST:PORT`).
    pub(crate) fn start_dispatching(
        python: &str,
        interval: Duration,
        every: Duration,
        public_ws: &str,
        log: &Path,
    ) -> Self {
        let interval = interval.as_millis().to_string();
        let every = every.as_millis().to_string();
        Self::spawn(
            python,
            "qq_discord_server.py",
            &[
                "--heartbeat-interval-ms",
                &interval,
                "--dispatch-every-ms",
                &every,
                "--public-ws",
                public_ws,
            ],
            log,
        )
    }

    /// benches/independent/slack_server.py (Socket Mode and the Web API), with its defaults.
    pub(crate) fn start_slack(python: &str, log: &Path) -> Self {
        Self::spawn(python, "slack_server.py", &[], log)
    }

    /// benches/independent/mattermost_server.py (REST v4 and the WebSocket), with its defaults.
    pub(crate) fn start_mattermost(python: &str, log: &Path) -> Self {
        Self::spawn(python, "mattermost_server.py", &[], log)
    }

    /// benches/independent/wecom_server.py (the AI bot's long connection), with its defaults.
    pub(crate) fn start_wecom(python: &str, log: &Path) -> Self {
        Self::spawn(python, "wecom_server.py", &[], log)
    }

    /// benches/independent/dingtalk_server.py (Stream and the robot API) with `args`.
    pub(crate) fn start_dingtalk(python: &str, args: &[&str], log: &Path) -> Self {
        Self::spawn(python, "dingtalk_server.py", args, log)
    }

    /// benches/independent/matrix_server.py (the client-server API), with its defaults.
    pub(crate) fn start_matrix(python: &str, log: &Path) -> Self {
        Self::spawn(python, "matrix_server.py", &[], log)
    }

    /// benches/independent/poll_server.py (Telegram and Weixin long polls) with `args`.
    pub(crate) fn start_poll(python: &str, args: &[&str], log: &Path) -> Self {
        Self::spawn(python, "poll_server.py", args, log)
    }

    fn spawn(python: &str, script: &str, args: &[&str], log: &Path) -> Self {
        use std::io::BufRead;
        let root = env!("CARGO_MANIFEST_DIR");
        let mut child = Command::new(python)
            .arg(format!("{root}/benches/independent/{script}"))
            .args(["--port", "0"])
            .args(args)
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

    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `POST` to one of the server's `/_control/...` routes; its JSON answer.
    pub(crate) async fn control(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        let resp = self
            .http
            .post(format!("{}/_control/{path}", self.base()))
            .json(&body)
            .send()
            .await
            .expect("POST /_control");
        assert!(resp.status().is_success(), "{path}: {}", resp.status());
        resp.json().await.expect("control answers are JSON")
    }

    /// `POST /_control/emit` with `body`: the ids its answer lists under `field`.
    pub(crate) async fn emit_ids(&self, body: serde_json::Value, field: &str) -> Vec<String> {
        let answer = self.control("emit", body).await;
        let ids = answer[field]
            .as_array()
            .unwrap_or_else(|| panic!("emit answered no {field}: {answer}"));
        ids.iter()
            .map(|v| v.as_str().expect("ids are strings").to_owned())
            .collect()
    }

    /// One count of `GET /_independent/stats`; 0 if it has none.
    pub(crate) async fn stat(&self, name: &str) -> u64 {
        self.stats().await[name].as_u64().unwrap_or(0)
    }

    pub(crate) async fn stats(&self) -> serde_json::Value {
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

    /// `GET /_posts`: every post accepted so far (`content`, `received_unix_ms`, ...) and
    /// every attempt.
    pub(crate) async fn posts(&self) -> serde_json::Value {
        let url = format!("http://127.0.0.1:{}/_posts", self.port);
        self.http
            .get(url)
            .send()
            .await
            .expect("GET /_posts")
            .json()
            .await
            .expect("posts are JSON")
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

//! Slack Socket Mode detection latency (issue 31): how many ping intervals the adapter takes
//! to drop a half-open connection, and one whose pongs stopped while envelopes still arrive.
//! Both must be dropped within the ping interval plus the pong deadline (a fifth of the
//! interval by default). Same trials as the Feishu section, against the mock Slack and the
//! independent server (benches/independent/slack_server.py).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::{MockConfig, MockPlatform, SlackConfig, SlackFault};
use serde_json::json;

use crate::detection::{row, trial, Detection};
use crate::independent::Independent;
use crate::scratch;

/// The adapter's ping interval; its pong deadline is a fifth of it.
const PING_S: u64 = 1;
const TRIALS: usize = 30;
const AT_ONCE: usize = 10;
/// benches/independent/slack_server.py's default app-level token.
const INDEPENDENT_APP_TOKEN: &str = "xapp-1-A0INDEP-1-independent";

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// Nothing more written or read.
    HalfOpen,
    /// Envelopes keep coming; nothing the client sends is read, so no pong.
    NoPong,
}

/// What the adapter connects to: a mock of its own per trial, or the one independent server
/// (every trial its own connection; faults apply to the server's open sockets).
#[derive(Clone)]
enum Server {
    Mock,
    Independent(Arc<Independent>),
}

async fn slack_trial(server: Server, fault: Fault, dir: &Path) -> Detection {
    let mock = match server {
        Server::Mock => Some(Arc::new(
            MockPlatform::start(MockConfig::default()).await.unwrap(),
        )),
        Server::Independent(_) => None,
    };
    let (base, token) = match (&mock, &server) {
        (Some(m), _) => (m.http_base(), SlackConfig::default().app_token),
        (None, Server::Independent(i)) => (i.base(), INDEPENDENT_APP_TOKEN.to_owned()),
        (None, Server::Mock) => unreachable!("a mock trial has its mock"),
    };
    let text = format!(
        "[[adapter]]\nname = \"s\"\nkind = \"slack\"\napp-token-env = \"A\"\n\
         bot-token-env = \"B\"\napi-base = \"{base}\"\nping-interval = \"{PING_S}s\"\n\
         backoff-min = \"100ms\"\n"
    );
    // With pongs stopped, envelopes keep coming (about 50 a second): the connection is not
    // silent, so only the pong deadline can tell.
    let chatter = (fault == Fault::NoPong).then(|| {
        let (mock, server) = (mock.clone(), server.clone());
        tokio::spawn(async move {
            loop {
                match (&mock, &server) {
                    (Some(m), _) => {
                        m.slack_emit(1);
                    }
                    (None, Server::Independent(i)) => {
                        i.control("emit", json!({"count": 1})).await;
                    }
                    (None, Server::Mock) => {}
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    });
    let ping = Duration::from_secs(PING_S);
    let inject = || match (&mock, &server) {
        (Some(m), _) => m.slack_set_fault(match fault {
            Fault::HalfOpen => SlackFault::Silence,
            Fault::NoPong => SlackFault::Deaf,
        }),
        (None, Server::Independent(i)) => {
            let kind = match fault {
                Fault::HalfOpen => "silence",
                Fault::NoPong => "deaf",
            };
            let i = i.clone();
            tokio::spawn(async move { i.control("fault", json!({"kind": kind})).await });
        }
        (None, Server::Mock) => {}
    };
    let d = trial(&text, &token, dir, ping, inject, |v, before| {
        v.attempts > before.attempts && v.state == State::Connected
    })
    .await;
    if let Some(c) = chatter {
        c.abort();
    }
    d
}

/// Detection latencies in ping intervals, reconnect times in ms, and how many trials gave
/// the expected reason. Against the independent server, trials run one at a time (a fault
/// there applies to every open socket).
async fn trials(
    server: Server,
    fault: Fault,
    reason: &str,
    dir: &Path,
) -> (Vec<f64>, Vec<f64>, usize) {
    let at_once = match server {
        Server::Mock => AT_ONCE,
        Server::Independent(_) => 1,
    };
    let (mut detect, mut back, mut right) = (vec![], vec![], 0);
    for round in 0..TRIALS / at_once {
        let runs: Vec<_> = (0..at_once)
            .map(|i| {
                let d = dir.join(format!("{round}-{i}"));
                let server = server.clone();
                tokio::spawn(async move { slack_trial(server, fault, &d).await })
            })
            .collect();
        for r in runs {
            let d = r.await.unwrap();
            detect.push(d.detected.as_secs_f64() / PING_S as f64);
            back.push(d.back.as_secs_f64() * 1e3);
            right += usize::from(d.error.contains(reason));
        }
        if let Server::Independent(i) = &server {
            i.control("clear", json!({})).await;
        }
    }
    (detect, back, right)
}

pub(crate) async fn slack_detection() {
    let dir = scratch("slack");
    let python = Independent::python();
    let independent = Arc::new(Independent::start_slack(
        &python,
        &dir.join("independent.log"),
    ));
    println!(
        "### Slack Socket Mode: detection in units of the ping interval ({TRIALS} trials each, \
         ping interval {PING_S} s, pong deadline 0.2 interval)\n"
    );
    println!("| server | figure | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|---|");
    let bound = "every trial ≤ 1.20";
    for (name, server) in [
        ("built-in mock", Server::Mock),
        (
            "independent server",
            Server::Independent(independent.clone()),
        ),
    ] {
        let half_open = trials(
            server.clone(),
            Fault::HalfOpen,
            "half-open",
            &dir.join("half-open"),
        )
        .await;
        let no_pong = trials(
            server,
            Fault::NoPong,
            "stopped answering pings",
            &dir.join("no-pong"),
        )
        .await;
        row(
            &format!("{name} | half-open: detection, in ping intervals"),
            &half_open.0,
            2,
            bound,
        );
        row(
            &format!("{name} | no pong (envelopes flowing): detection, in ping intervals"),
            &no_pong.0,
            2,
            bound,
        );
        row(
            &format!("{name} | half-open: drop to connected again, ms"),
            &half_open.1,
            1,
            "",
        );
        row(
            &format!("{name} | no pong: drop to connected again, ms"),
            &no_pong.1,
            1,
            "",
        );
        println!(
            "| {name} | dropped for the right reason | half-open {}/{TRIALS}, no pong {}/{TRIALS} | | | |",
            half_open.2, no_pong.2
        );
    }
    println!();
    let _ = std::fs::remove_dir_all(dir);
}

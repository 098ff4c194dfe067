//! Matrix (issue 31): how long a hung `/sync` takes to be dropped, against its deadline, and
//! what 1,000 messages under 20 injected faults (a limited timeline among them) leave in the
//! spool. The adapter runs in this process against the built-in mock and against the
//! independent server (benches/independent/matrix_server.py, written from the research note
//! and the spec, not from the adapter).
//!
//! A hung sync is made as the long-poll section makes one: the server reads the request and
//! never answers. The fault is armed while a sync is held; one message then answers the held
//! sync, the adapter stores it and syncs again, and that sync hangs. Detection is timed from
//! the server counting the hung sync to the adapter leaving `connected`; the bound is the
//! sync's deadline, `poll-timeout` + `poll-grace`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::gateway::health::State;
use hermes_svc::mock_platform::{MatrixConfig, MatrixFault, MockConfig, MockPlatform};
use serde_json::json;

use crate::detection::Running;
use crate::hung::{self, Holds};
use crate::independent::Independent;
use crate::scratch;
use crate::wing::{stored, trial_count, wait_stored, Tally};

const TIMEOUT_S: u64 = 2;
const GRACE_S: u64 = 1;
/// benches/independent/matrix_server.py's defaults.
const INDEPENDENT_TOKEN: &str = "mx-indep-token";
const INDEPENDENT_USER: &str = "@bot:indep.test";

/// The faults a flood cycles through, with the messages said under each.
#[derive(Clone, Copy, Debug)]
enum Fault {
    Hang,
    ServerError,
    RateLimit,
    RepeatBatch,
    /// A hung sync, and more messages meanwhile than a sync carries (the adapter's filter
    /// asks for 50): the next sync's timeline is limited, and the gap is paged.
    Limited,
}

const FAULTS: [(Fault, usize); 5] = [
    (Fault::Hang, 40),
    (Fault::ServerError, 40),
    (Fault::RateLimit, 40),
    (Fault::RepeatBatch, 40),
    (Fault::Limited, 90),
];

enum Server {
    Mock(Arc<MockPlatform>),
    Independent(Independent),
}

impl Server {
    async fn start(independent: Option<&str>, dir: &Path) -> Server {
        std::fs::create_dir_all(dir).unwrap();
        match independent {
            None => Server::Mock(Arc::new(
                MockPlatform::start(MockConfig::default()).await.unwrap(),
            )),
            Some(python) => {
                Server::Independent(Independent::start_matrix(python, &dir.join("server.log")))
            }
        }
    }

    fn adapter(&self, dir: &Path) -> Running {
        let (base, user, token) = match self {
            Server::Mock(m) => {
                let c = MatrixConfig::default();
                (m.http_base(), c.user_id, c.access_token)
            }
            Server::Independent(i) => (
                i.base(),
                INDEPENDENT_USER.to_owned(),
                INDEPENDENT_TOKEN.to_owned(),
            ),
        };
        let toml = format!(
            "[[adapter]]\nname = \"m\"\nkind = \"matrix\"\nhomeserver = \"{base}\"\n\
             user-id = \"{user}\"\ntoken-env = \"MX\"\npoll-timeout = \"{TIMEOUT_S}s\"\n\
             poll-grace = \"{GRACE_S}s\"\nbackoff-min = \"100ms\"\nbackoff-max = \"1s\"\n"
        );
        Running::start(&toml, &[&token], dir)
    }

    /// Arm `fault` for the next sync, or (`lasting`) until [`Server::clear`].
    async fn arm(&self, fault: Fault, lasting: bool) {
        match self {
            Server::Mock(m) => {
                let f = match fault {
                    Fault::Hang | Fault::Limited => MatrixFault::HangSyncs,
                    Fault::ServerError => MatrixFault::ServerError {
                        status: 502,
                        html: true,
                    },
                    Fault::RateLimit => MatrixFault::RateLimited {
                        retry_after_ms: Some(1000),
                        header_secs: None,
                    },
                    Fault::RepeatBatch => MatrixFault::RepeatBatch,
                };
                match lasting {
                    true => m.matrix_set_fault(f),
                    false => m.matrix_set_fault_for(f, 1),
                }
            }
            Server::Independent(i) => {
                let mut body = match fault {
                    Fault::Hang | Fault::Limited => json!({"fault": "hang"}),
                    Fault::ServerError => json!({"fault": "5xx", "status": 502, "html": true}),
                    Fault::RateLimit => {
                        json!({"fault": "429", "retry_after_ms": 1000, "header_secs": null})
                    }
                    Fault::RepeatBatch => json!({"fault": "repeat_batch"}),
                };
                if !lasting {
                    body["count"] = json!(1);
                }
                i.control("fault", body).await;
            }
        }
    }

    async fn syncs(&self) -> u64 {
        match self {
            Server::Mock(m) => m.matrix_stats().syncs,
            Server::Independent(i) => i.stat("syncs").await,
        }
    }

    async fn limited(&self) -> u64 {
        match self {
            Server::Mock(m) => m.matrix_stats().limited,
            Server::Independent(i) => i.stat("limited").await,
        }
    }
}

/// The hung-sync trial's view of the server.
impl Holds for Server {
    async fn emit(&self, n: usize) -> Vec<String> {
        match self {
            Server::Mock(m) => m.matrix_emit(n),
            Server::Independent(i) => i.emit_ids(json!({"n": n}), "event_ids").await,
        }
    }

    async fn hang(&self) {
        self.arm(Fault::Hang, true).await;
    }

    async fn clear(&self) {
        match self {
            Server::Mock(m) => m.matrix_clear_fault(),
            Server::Independent(i) => {
                i.control("clear", json!({})).await;
            }
        }
    }

    async fn hung(&self) -> u64 {
        match self {
            Server::Mock(m) => m.matrix_stats().hung,
            Server::Independent(i) => i.stat("hung").await,
        }
    }
}

/// The adapter is past its first sync (a baseline, which stores nothing) and holds a cursor.
async fn past_baseline(server: &Server, dir: &Path, run: &Running) -> Vec<String> {
    run.until(|v| v.state == State::Connected).await;
    let end = Instant::now() + Duration::from_secs(20);
    while server.syncs().await < 2 {
        assert!(Instant::now() < end, "no second sync");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let first = server.emit(1).await;
    wait_stored(dir, &first, Duration::from_secs(20)).await;
    first
}

/// One hung-sync trial: seconds from the server holding the sync it will never answer to the
/// adapter dropping it, and whether the reason given was a dead connection.
async fn hung_sync(independent: Option<String>, dir: PathBuf) -> (f64, bool) {
    let server = Server::start(independent.as_deref(), &dir).await;
    let run = server.adapter(&dir);
    let first = past_baseline(&server, &dir, &run).await;
    hung::timed(&server, run, &dir, first).await
}

/// 1,000 messages in twenty batches, each with the next fault of [`FAULTS`] armed for one
/// sync; then what the spool holds: what was stored, whether in order, the limited timelines
/// answered, and the seconds.
async fn flood(independent: Option<String>, dir: &Path) -> (Tally, bool, u64, f64) {
    let server = Server::start(independent.as_deref(), dir).await;
    let run = server.adapter(dir);
    let mut ids = past_baseline(&server, dir, &run).await;
    let started = Instant::now();
    for i in 0..20 {
        let (fault, n) = FAULTS[i % FAULTS.len()];
        let syncs = server.syncs().await;
        server.arm(fault, false).await;
        if matches!(fault, Fault::Limited) {
            // The hung sync is held before the messages come, so they pile up past it.
            let hung = server.hung().await;
            server.emit(1).await.into_iter().for_each(|id| ids.push(id));
            while server.hung().await == hung {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            ids.extend(server.emit(n - 1).await);
        } else {
            ids.extend(server.emit(n).await);
        }
        // Let the fault strike (two more syncs) before the next is armed over it.
        let end = Instant::now() + Duration::from_secs(60);
        while server.syncs().await < syncs + 2 && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    wait_stored(dir, &ids, Duration::from_secs(120)).await;
    let took = started.elapsed().as_secs_f64();
    let limited = server.limited().await;
    let s = stored(dir);
    run.stop().await;
    (Tally::of(&s, &ids), s == ids, limited, took)
}

pub(crate) async fn matrix_figures() {
    let python = Independent::python();
    let dir = scratch("matrix");
    println!(
        "### Matrix: hung-sync detection ({} trials each, poll-timeout {TIMEOUT_S} s + \
         poll-grace {GRACE_S} s = a {} s deadline)\n",
        trial_count(),
        TIMEOUT_S + GRACE_S
    );
    println!("| server | p50, s | p99, s | max, s | target |");
    println!("|---|---|---|---|---|");
    let mut reasons = vec![];
    for (independent, name) in [(false, "built-in mock"), (true, "independent server")] {
        let d = dir.join(independent.to_string());
        let one = |d| hung_sync(independent.then(|| python.clone()), d);
        let deadline = TIMEOUT_S + GRACE_S;
        reasons.push(hung::row_of(name, independent, deadline, &d, one).await);
    }
    println!(
        "\nDropped as \"a dead connection\": {}.\n",
        reasons.join(", ")
    );

    println!("### Matrix: 1,000 messages under 20 injected faults\n");
    println!("| server | stored | lost | duplicated | in order | limited timelines | took, s |");
    println!("|---|---|---|---|---|---|---|");
    for (independent, name) in [(false, "built-in mock"), (true, "independent server")] {
        let d = dir.join(format!("flood-{independent}"));
        let py = independent.then(|| python.clone());
        let (tally, order, limited, took) = flood(py, &d).await;
        // The first message (before the faults) is stored too.
        println!(
            "| {name} | {} | {} | {} | {order} | {limited} | {took:.1} |",
            tally.stored - 1,
            tally.lost,
            tally.duplicated
        );
    }
    println!(
        "\nFaults, cycled four times each: a hung sync (40 messages), a 502 with a proxy's HTML \
         page (40), a 429 M_LIMIT_EXCEEDED with retry_after_ms 1000 (40), the previous batch \
         answered again (40), and a hung sync while 90 messages came, more than the 50 a sync \
         carries, so the next timeline is limited and the gap is paged from /messages.\n"
    );
    let _ = std::fs::remove_dir_all(dir);
}

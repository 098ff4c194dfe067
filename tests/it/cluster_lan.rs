//! The cluster tests' world: a platform (the mock, behind a TLS front on its own network) and a
//! real three-member etcd (on another), with hosts started on them (`cluster_rig.rs`). Shared by
//! the cluster tests and the cluster sections of `benches/gateway`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::mock_platform::{MockConfig, MockPlatform, MockStats};

use crate::cluster_rig::{config, Etcd, Host};
use crate::harness::{scratch_dir, wait_for, TempDir};
use crate::mock_runtime::{mock_runtime, start_mock};
use crate::netns::Lan;
use crate::tls::{Certs, TlsFront};

pub(crate) fn stats(rt: &tokio::runtime::Runtime, mock: &MockPlatform) -> MockStats {
    let _guard = rt.enter();
    mock.stats()
}

/// No two connections' clients ever sent frames within one stretch of time.
pub(crate) fn never_two_at_once(stats: &MockStats) {
    for (i, a) in stats.spans.iter().enumerate() {
        for b in &stats.spans[i + 1..] {
            assert!(
                !a.acted_together(b),
                "two sessions acted at once: {a:?} and {b:?}"
            );
        }
    }
}

pub(crate) struct Rig {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) mock: MockPlatform,
    /// The platform's TLS front on its network, and its base URL there.
    pub(crate) front: std::net::SocketAddr,
    pub(crate) base: String,
    pub(crate) etcd: Etcd,
    pub(crate) certs: Certs,
    pub(crate) dir: TempDir,
    /// Last: the processes on its networks go first.
    pub(crate) lan: Lan,
}

impl Rig {
    pub(crate) fn new(tag: &str) -> Rig {
        Rig::with_mock(tag, MockConfig::default())
    }

    pub(crate) fn with_mock(tag: &str, config: MockConfig) -> Rig {
        let dir = scratch_dir(tag);
        let lan = Lan::new();
        let certs = Certs::issue(
            &dir.path().join("certs"),
            &format!("IP:{},IP:{}", lan.platform_ip(), lan.etcd_ip()),
        );
        let rt = mock_runtime();
        let mock = start_mock(&rt, config);
        let front = rt.block_on(async {
            let front = TlsFront::bind(&certs, (lan.platform_ip(), 0).into()).await;
            let at = front.addr();
            front.forward_to(mock.addr());
            at
        });
        mock.set_advertised_ws_url(format!("wss://{front}/ws"));
        let etcd = Etcd::start(dir.path(), lan.etcd_ip(), &certs);
        Rig {
            rt,
            mock,
            front,
            base: format!("https://{front}"),
            etcd,
            certs,
            dir,
            lan,
        }
    }

    pub(crate) fn host(&self, node: &str, ttl: &str) -> Host {
        self.host_with(node, ttl, "")
    }

    /// A host with `HERMES_TEST_FAULT=faults`.
    pub(crate) fn host_with(&self, node: &str, ttl: &str, faults: &str) -> Host {
        let toml = config(&self.base, &self.etcd, node, ttl);
        self.start(self.dir.path(), node, &toml, faults)
    }

    /// A host of its own under `root`, on this rig's networks.
    pub(crate) fn start(&self, root: &Path, node: &str, toml: &str, faults: &str) -> Host {
        let net = Arc::new(self.lan.host());
        Host::start(net, Some(&self.certs.ca), root, node, toml, faults)
    }

    pub(crate) fn stats(&self) -> MockStats {
        stats(&self.rt, &self.mock)
    }

    /// Wait until the mock has seen `n` sessions begin (identified or resumed); when the
    /// last began.
    pub(crate) fn identified(&self, n: u64, within: Duration) -> Instant {
        wait_for(within, &format!("identify number {n}"), || {
            let s = self.stats();
            (s.identifies + s.resumes >= n).then(|| {
                let last = |times: &[Instant]| times.last().copied();
                last(&s.identify_times)
                    .max(last(&s.resume_times))
                    .expect("a session began")
            })
        })
    }

    pub(crate) fn active_then_standby(&self, ttl: &str) -> (Host, Host) {
        self.active_then_standby_with(ttl, "")
    }

    pub(crate) fn active_then_standby_with(&self, ttl: &str, faults: &str) -> (Host, Host) {
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
        wait_for(
            Duration::from_secs(5),
            "host-b's state file to say standby",
            || (b.role().as_deref() == Some("standby")).then_some(()),
        );
        assert_eq!(self.stats().identifies, 1, "the standby connected");
        (a, b)
    }
}

/// The ids of the events a host's spool holds, in order.
pub(crate) fn spool_ids(host: &Host) -> Vec<String> {
    hermes_svc::gateway::spool::read(&host.home.join("inbox"), None)
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

//! A rig for adapter tests: one or more adapters, in this process, against the mock platform
//! over real loopback sockets, with the registry and the spool to read what they did.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_svc::config::{self, Secret};
use hermes_svc::gateway::adapter::proxy::ProxyEnv;
use hermes_svc::gateway::adapter::{AdapterExit, Deps, Shared};
use hermes_svc::gateway::health::{ComponentKind, ComponentView, Heartbeat, Registry, State};
use hermes_svc::gateway::spool::{self, Spool};
use hermes_svc::mock_platform::{BlackholeProxy, Fault, MockConfig, MockPlatform};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::harness::{scratch_dir, TempDir};

pub(crate) struct Rig {
    pub(crate) mock: Arc<MockPlatform>,
    pub(crate) proxy: Option<BlackholeProxy>,
    pub(crate) dir: TempDir,
    pub(crate) registry: Registry,
    pub(crate) hb: Heartbeat,
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) task: Option<JoinHandle<AdapterExit>>,
}

pub(crate) fn toml_for(kind: &str, base: &str, extra: &str) -> String {
    let creds = match kind {
        "qqbot" => format!(
            "app-id = \"1\"\nsecret-env = \"UNUSED\"\ntoken-url = \"{base}/app/getAppAccessToken\"\n"
        ),
        // The mock's app (`FeishuConfig::default`); its secret must be the rig's "tok".
        "feishu" => "app-id = \"cli_mock0000000000001\"\nsecret-env = \"UNUSED\"\n".to_owned(),
        _ => "token-env = \"UNUSED\"\n".to_owned(),
    };
    let mut text = format!(
        "[[adapter]]\nname = \"a\"\nkind = \"{kind}\"\napi-base = \"{base}\"\n{creds}{extra}"
    );
    for (key, value) in [
        ("backoff-min", "100ms"),
        ("backoff-max", "1s"),
        ("connect-timeout", "1s"),
        ("hello-timeout", "1s"),
    ] {
        if !extra.contains(key) {
            text.push_str(&format!("{key} = \"{value}\"\n"));
        }
    }
    text
}

pub(crate) fn start_adapter(
    text: &str,
    spool: Arc<Spool>,
    registry: &Registry,
    shared: &Shared,
) -> (Heartbeat, watch::Sender<bool>, JoinHandle<AdapterExit>) {
    let cfg: hermes_svc::platform::GatewayConfig =
        config::parse(std::path::Path::new("test.toml"), text).unwrap();
    let spec = cfg.adapters[0].clone();
    let hb = registry.register(
        &spec.name,
        ComponentKind::Adapter(spec.protocol.kind()),
        Duration::from_secs(30),
    );
    let (stop, rx) = watch::channel(false);
    let deps = Deps {
        spool,
        heartbeat: hb.clone(),
        shared: shared.clone(),
        shutdown: rx,
    };
    let task = tokio::spawn(hermes_svc::platform::receive(
        spec,
        vec![Secret::new("tok".into())],
        deps,
    ));
    (hb, stop, task)
}

impl Rig {
    pub(crate) async fn start(kind: &str, mock: MockConfig, viaproxy: bool, extra: &str) -> Rig {
        Self::start_faulty(kind, mock, viaproxy, extra, Fault::None).await
    }

    /// Start with the proxy settings `proxies(mock)` gives (an HTTP proxy for the WebSocket).
    pub(crate) async fn start_proxied(
        kind: &str,
        proxies: impl FnOnce(&MockPlatform) -> ProxyEnv,
    ) -> Rig {
        Self::start_with(kind, MockConfig::default(), false, "", Fault::None, proxies).await
    }

    pub(crate) async fn start_faulty(
        kind: &str,
        mock: MockConfig,
        viaproxy: bool,
        extra: &str,
        fault: Fault,
    ) -> Rig {
        Self::start_with(kind, mock, viaproxy, extra, fault, |_| ProxyEnv::default()).await
    }

    /// Start with `fault` already set, so the very first connection meets it.
    pub(crate) async fn start_with(
        kind: &str,
        mock: MockConfig,
        viaproxy: bool,
        extra: &str,
        fault: Fault,
        proxies: impl FnOnce(&MockPlatform) -> ProxyEnv,
    ) -> Rig {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mock = Arc::new(MockPlatform::start(mock).await.unwrap());
        mock.set_fault(fault);
        let proxy = if viaproxy {
            let p = BlackholeProxy::start(mock.addr()).await.unwrap();
            mock.set_advertised_ws_url(format!("ws://{}/ws", p.addr()));
            Some(p)
        } else {
            None
        };
        let dir = scratch_dir("adapter");
        let spool = Arc::new(Spool::open(&dir.path().join("inbox")).unwrap());
        let registry = Registry::new();
        let proxies = proxies(&mock);
        let (hb, stop, task) = start_adapter(
            &toml_for(kind, &mock.http_base(), extra),
            spool,
            &registry,
            &Shared::new(proxies).unwrap(),
        );
        Rig {
            proxy,
            mock,
            dir,
            registry,
            hb,
            stop,
            task: Some(task),
        }
    }

    pub(crate) fn view(&self) -> ComponentView {
        let _ = &self.hb;
        self.registry.snapshot().components[0].clone()
    }

    pub(crate) async fn until<T>(
        &self,
        limit: Duration,
        what: &str,
        mut f: impl FnMut(&Rig) -> Option<T>,
    ) -> T {
        let end = Instant::now() + limit;
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(
                Instant::now() < end,
                "timed out after {limit:?} waiting for {what}; adapter: {:?}; mock: {:?}",
                self.view(),
                self.mock.stats()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub(crate) async fn connected(&self) {
        self.until(Duration::from_secs(10), "connected", |r| {
            (r.view().state == State::Connected).then_some(())
        })
        .await;
    }

    pub(crate) fn spool_ids(&self) -> Vec<String> {
        spool::read(&self.dir.path().join("inbox"), None)
            .unwrap()
            .into_iter()
            .map(|e| e.id)
            .collect()
    }

    pub(crate) async fn exit(&mut self) -> AdapterExit {
        let task = self.task.take().unwrap();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("adapter did not exit")
            .unwrap()
    }

    pub(crate) async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        assert_eq!(self.exit().await, AdapterExit::Shutdown);
    }
}

/// Keep the platform talking: one dispatch every `every` until dropped.
pub(crate) fn chatter(mock: &Arc<MockPlatform>, every: Duration) -> impl Drop {
    struct Abort(JoinHandle<()>);
    impl Drop for Abort {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let mock = mock.clone();
    Abort(tokio::spawn(async move {
        loop {
            mock.emit(1);
            tokio::time::sleep(every).await;
        }
    }))
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(crate) const HB: Duration = Duration::from_millis(500);

pub(crate) fn hb(interval: Duration) -> MockConfig {
    MockConfig {
        heartbeat_interval: interval,
        ..MockConfig::default()
    }
}

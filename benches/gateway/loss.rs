//! Loss under faults: a real gateway process with two adapters, fed 10,000 dispatches while
//! connections are closed, blackholed and invalidated, then its spool is checked for every
//! event exactly once.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use hermes_svc::gateway::spool;
use hermes_svc::mock_platform::{BlackholeProxy, Fault, MockConfig, MockPlatform};

use crate::binary::spawn_gateway;
use crate::scratch;

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

pub(crate) async fn faults_and_loss() {
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

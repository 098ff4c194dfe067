//! `config::parse`: any `gateway.toml` text parses, or fails with an error naming one of its
//! lines; never a panic. What parses must also be usable: every duration is within
//! `MAX_DURATION`, and the retry deadline the gateway computes from an adapter's timing at
//! start does not overflow.

#![no_main]

use std::path::Path;
use std::time::Duration;

use hermes_svc::config::{parse, ConfigError, MAX_DURATION};
use hermes_svc::gateway::adapter::retry_deadline;
use hermes_svc::platform::{websocket, Protocol};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse::<Protocol>(Path::new("/fuzz/gateway.toml"), text) {
        Ok(config) => {
            let mut durations = vec![config.max_outage, config.self_watchdog];
            durations.extend(config.cron.iter().map(|c| c.timeout));
            for spec in &config.adapters {
                let t = &spec.timing;
                durations.extend([
                    t.connect_timeout,
                    t.hello_timeout,
                    t.backoff_min,
                    t.backoff_max,
                    t.stable_after,
                ]);
                durations.extend(t.ack_timeout);
                if let Protocol::WebSocket(websocket::Config { ping_interval, .. }) = &spec.protocol
                {
                    durations.push(*ping_interval);
                }
                assert!(t.backoff_min <= t.backoff_max);
                // Both ways the gateway asks for an adapter's retry deadline (runtime, adapter).
                retry_deadline(t, t.backoff_max);
                retry_deadline(t, t.backoff_max.max(Duration::from_secs(60)));
            }
            for d in durations {
                assert!(!d.is_zero() && d <= MAX_DURATION, "{d:?}");
            }
        }
        Err(ConfigError::Invalid { line, .. }) => {
            let lines = text.matches('\n').count() + 1;
            assert!((1..=lines).contains(&line), "line {line} of {lines}");
        }
        Err(e) => panic!("not a line error: {e:?}"),
    }
});

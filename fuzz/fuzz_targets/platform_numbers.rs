//! What a platform sends that becomes a wait, a lifetime, an interval, an offset or a list of
//! items: `gateway::platform_number`, through which every such number is read, and
//! `adapter::batch`, which splits a long poll's answer item by item. Any bytes, read as an
//! answer, as JSON numbers anywhere in it, or as raw 64-bit values, give a value inside its
//! range that can be added to both clocks; never a panic or an overflow.

#![no_main]

use std::time::{Duration, Instant, SystemTime};

use hermes_svc::gateway::adapter::batch::{self, Item};
use hermes_svc::gateway::platform_number::{
    millis, offset_after, platform_wait, platform_wait_json, platform_wait_text, seconds_f64,
    seconds_json, Range, WaitKind, HEARTBEAT_INTERVAL, PLATFORM_WAIT, START_LIMIT_RESET,
    TOKEN_LIFETIME,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const RANGES: [Range; 4] = [
    PLATFORM_WAIT,
    TOKEN_LIFETIME,
    HEARTBEAT_INTERVAL,
    START_LIMIT_RESET,
];

fn usable(d: Duration, range: Range) {
    assert!(range.min <= d && d <= range.max, "{d:?} outside {range:?}");
    let _ = Instant::now() + d;
    let _ = SystemTime::now() + d;
}

/// A platform's wait, by the one rule: never under a second for a refusal, never over an hour.
fn wait(d: Option<Duration>, kind: WaitKind) {
    if let Some(d) = d {
        let min = match kind {
            WaitKind::Refusal => PLATFORM_WAIT.min,
            WaitKind::Pacing => Duration::ZERO,
        };
        usable(
            d,
            Range {
                min,
                ..PLATFORM_WAIT
            },
        );
    }
}

const KINDS: [WaitKind; 2] = [WaitKind::Refusal, WaitKind::Pacing];

/// Every value in `v`, to a small depth, read as each kind of number.
fn numbers(v: &Value, depth: u32) {
    for kind in KINDS {
        wait(platform_wait_json(v, kind), kind);
    }
    for range in RANGES {
        if let Some(d) = seconds_json(v, range) {
            usable(d, range);
        }
        if let Some(ms) = v.as_u64() {
            usable(millis(ms, range), range);
        }
    }
    if let Some(id) = v.as_i64() {
        if let Some(next) = offset_after(id) {
            assert!(next > id);
        }
    }
    if depth < 4 {
        match v {
            Value::Array(items) => items.iter().for_each(|i| numbers(i, depth + 1)),
            Value::Object(fields) => fields.values().for_each(|f| numbers(f, depth + 1)),
            _ => {}
        }
    }
}

fuzz_target!(|data: &[u8]| {
    for list in ["result", "msgs"] {
        let Some(answer) = batch::read(data, list) else {
            continue;
        };
        numbers(&answer.envelope, 0);
        for item in answer.items.into_iter().flatten() {
            match item {
                Item::Readable(v) => numbers(&v, 0),
                Item::Unreadable { raw, .. } => {
                    if let Some(id) = batch::field(&raw, "update_id") {
                        numbers(&id, 0);
                    }
                }
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        for kind in KINDS {
            wait(platform_wait_text(text, kind), kind);
        }
    }
    if let Some(bits) = data.get(..8) {
        for kind in KINDS {
            wait(
                platform_wait(
                    f64::from_bits(u64::from_le_bytes(bits.try_into().unwrap())),
                    kind,
                ),
                kind,
            );
        }
        let bits = u64::from_le_bytes(bits.try_into().unwrap());
        for range in RANGES {
            if let Some(d) = seconds_f64(f64::from_bits(bits), range) {
                usable(d, range);
            }
            usable(millis(bits, range), range);
        }
        let _ = offset_after(bits as i64);
    }
});

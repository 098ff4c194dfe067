//! `env_file::parse`: any `.env` text gives variables with valid names and malformed lines
//! by number, in order, within the text; never a panic.

#![no_main]

use hermes_svc::env_file;
use hermes_svc::systemd::escape;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (vars, bad) = env_file::parse(text);
    let lines = text.lines().count();
    assert!(vars.len() + bad.len() <= lines);
    assert!(bad.windows(2).all(|w| w[0] < w[1]), "{bad:?}");
    assert!(bad.iter().all(|l| (1..=lines).contains(l)), "{bad:?}");
    for (k, _) in &vars {
        assert!(escape::env_name(k).is_ok(), "{k:?}");
    }
});

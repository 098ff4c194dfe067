//! The state file reader: `StateFile::read` decodes the file's bytes with
//! `serde_json::from_slice::<StateFile>` (there is no separate parse function; this target
//! decodes the same way, without opening a file). Whatever decodes must be usable by status and
//! doctor (`age`, `is_stale`) and must survive the writer's encoding unchanged.

#![no_main]

use std::time::SystemTime;

use hermes_svc::gateway::state_file::StateFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(state) = serde_json::from_slice::<StateFile>(data) else {
        return;
    };
    for now in [SystemTime::UNIX_EPOCH, SystemTime::now()] {
        let age = state.age(now);
        // `stale_after` is the file's own `stale_after_ms`, clamped so that no file can claim
        // to be current for long: staleness is judged by it, not by the raw field.
        if state.is_stale(now) {
            assert!(age.is_none_or(|a| a > state.stale_after()));
        }
    }
    let again: StateFile = serde_json::from_slice(&serde_json::to_vec(&state).unwrap()).unwrap();
    assert_eq!(again, state);
});

//! The pid file reader: `PidFile::read` decodes the file's text with
//! `serde_json::from_str::<PidRecord>` (there is no separate parse function; this target
//! decodes the same way, without opening a file). Whatever decodes must survive the writer's
//! encoding unchanged.

#![no_main]

use hermes_svc::gateway::pid_file::PidRecord;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(record) = serde_json::from_str::<PidRecord>(text) else {
        return;
    };
    let written = serde_json::to_string_pretty(&record).unwrap() + "\n";
    assert_eq!(serde_json::from_str::<PidRecord>(&written).unwrap(), record);
});

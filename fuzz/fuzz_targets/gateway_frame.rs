//! Gateway frame decoding: `mock_platform::frames::parse`, the decoder the mock platform runs
//! on every frame a client sends. It is the only standalone gateway-frame decoder in the crate:
//! the gateway's own client decodes server frames inline in `adapter::session` (a
//! `serde_json::Value` read with indexing, which cannot panic), with no function to call
//! apart from a live connection. Any bytes decode or give an error; never a panic.

#![no_main]

use hermes_svc::mock_platform::frames::{parse, ClientFrame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Ok(ClientFrame::Other(op)) => assert!(![1, 2, 6].contains(&op)),
        Ok(frame) => drop(format!("{frame:?}")),
        Err(e) => drop(e.to_string()),
    }
});

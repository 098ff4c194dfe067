//! The provenance header of a rendered plist: who wrote it, and a hash that tells a hand edit.
//!
//! The hash sits in an XML comment between the DOCTYPE and `<plist>`, not in a key of the job
//! dictionary. launchd logs "Unknown key" at warning level for every key it does not know, on
//! every load (`job_import_string()` in launchd's core.c), while XML comments are skipped by
//! every parser involved: CoreFoundation's (`parseXMLPropertyList()` skips `<!--` in the
//! prolog), Python's `plistlib` (expat) and the `plist` crate. The `plist` crate cannot write
//! comments, so the two header lines are inserted into its output as text.
//!
//! A tool that rewrites the file (Xcode, `plutil -convert`) drops the comments, and the file
//! then reads as foreign: still never overwritten without `--force`, which is the point.

use sha2::{Digest, Sha256};

use crate::service::definition::Provenance;

/// Every header line starts with this; the hash covers every other line of the file.
const HEADER_PREFIX: &str = "<!-- hermes-svc";
const HASH_MARKER: &str = "<!-- hermes-svc-hash: sha256:";
const COMMENT_END: &str = " -->";

/// The first header line. No `--` may appear inside an XML comment, so it names no flag and no
/// profile (a profile name may hold `--`).
fn notice() -> String {
    format!(
        "{HEADER_PREFIX} {} wrote this file. Do not edit it: customise with hermes-svc set, which keeps launchd-overrides.toml in the profile home.{COMMENT_END}",
        env!("CARGO_PKG_VERSION")
    )
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The text the hash covers: every line but the header's, each with its line ending.
fn hashed(text: &str) -> String {
    text.split_inclusive('\n')
        .filter(|l| !l.starts_with(HEADER_PREFIX))
        .collect()
}

/// Insert the header before the root element of the `plist` crate's output, and end the file
/// with a newline (the crate writes none after `</plist>`).
pub(super) fn stamp(xml: &str) -> String {
    let mut text = xml.trim_end_matches('\n').to_owned();
    text.push('\n');
    let at = text.find("<plist").unwrap_or(0);
    let hash = sha256_hex(&hashed(&text));
    let header = format!("{}\n{HASH_MARKER}{hash}{COMMENT_END}\n", notice());
    text.insert_str(at, &header);
    text
}

fn recorded_hash(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix(HASH_MARKER)?.strip_suffix(COMMENT_END))
        .map(str::trim)
}

/// Classify a plist file's text by its header hash, as `unit_file::provenance` does for units.
pub fn provenance(text: &str) -> Provenance {
    match recorded_hash(text) {
        None => Provenance::Foreign,
        Some(hash) if sha256_hex(&hashed(text)) == hash => Provenance::Pristine,
        Some(_) => Provenance::Edited,
    }
}

/// What two renders are compared by: the header names the version, which alone is no reason
/// to rewrite (and reload) a job. `None` for a file without our header.
pub fn body(text: &str) -> Option<String> {
    recorded_hash(text).map(|_| hashed(text))
}

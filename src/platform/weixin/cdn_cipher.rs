//! Weixin's CDN cipher: every file on the CDN is AES-128-ECB with PKCS#7 padding, no IV ("ECB
//! mode is mandated by the Weixin CDN protocol (encrypt_type: 1)", Tencent/openclaw-weixin
//! `src/cdn/aes-ecb.ts`; `docs/protocol.md` "CDN media flow"). ECB is the platform's choice,
//! not ours: each 16-byte block is enciphered alone, which is all this module does, over the
//! RustCrypto block cipher.
//!
//! Both directions stream: [`Decryptor`] holds the last whole block back until the end (only
//! it carries the padding), [`Encryptor`] the part block, so a 100 MiB file costs 16 bytes of
//! state, never the file. Padding always adds 1–16 bytes: a 16-byte file is 32 on the CDN
//! ([`padded_len`]).
//!
//! The key comes in three spellings: `image_item.aeskey`, 32 hex characters; `media.aes_key`,
//! base64 of either the 16 raw bytes or of those 32 hex characters (Tencent's `parseAesKey`,
//! `src/cdn/pic-decrypt.ts`: "base64(raw 16 bytes) → images … base64(hex string of 16 bytes)
//! → file / voice / video"); and outbound `aes_key` is always base64 of the hex string ("Sending
//! base64(raw_bytes) causes images to show as grey boxes", hermes-agent `weixin.py`).

use aes::cipher::{Array, BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use aes::Aes128;
use base64::Engine;

/// AES's block, and the most padding adds.
pub(crate) const BLOCK: usize = 16;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum CipherError {
    #[error("the file's key is not 16 bytes (neither 32 hex characters nor base64 of 16 bytes or of them)")]
    Key,
    #[error("the encrypted file is not a whole number of 16-byte blocks")]
    Length,
    #[error("the decrypted file's padding is not PKCS#7 (the wrong key, or a damaged file)")]
    Padding,
}

/// A file's 16-byte key. Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Key([u8; BLOCK]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A new key from the system's CSPRNG: it is the file's only protection on the CDN.
    pub(crate) fn random() -> Result<Key, ring::error::Unspecified> {
        ring::rand::generate::<[u8; BLOCK]>(&ring::rand::SystemRandom::new())
            .map(|k| Key(k.expose()))
    }

    /// `image_item.aeskey`: 32 hex characters.
    pub(crate) fn from_hex(hex: &str) -> Result<Key, CipherError> {
        let hex = hex.as_bytes();
        if hex.len() != 2 * BLOCK {
            return Err(CipherError::Key);
        }
        let mut key = [0u8; BLOCK];
        for (k, pair) in key.iter_mut().zip(hex.chunks(2)) {
            let digit = |c: u8| (c as char).to_digit(16).ok_or(CipherError::Key);
            *k = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).map_err(|_| CipherError::Key)?;
        }
        Ok(Key(key))
    }

    /// `media.aes_key`: base64 of the 16 raw bytes, or of their 32 hex characters.
    pub(crate) fn from_aes_key(b64: &str) -> Result<Key, CipherError> {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|_| CipherError::Key)?;
        match decoded.len() {
            BLOCK => Ok(Key(decoded.try_into().map_err(|_| CipherError::Key)?)),
            32 => Key::from_hex(std::str::from_utf8(&decoded).map_err(|_| CipherError::Key)?),
            _ => Err(CipherError::Key),
        }
    }

    /// The 32 lowercase hex characters (`getuploadurl`'s `aeskey`).
    pub(crate) fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// `sendmessage`'s `media.aes_key`: base64 of the hex string.
    pub(crate) fn aes_key_field(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.hex())
    }

    fn cipher(&self) -> Aes128 {
        Aes128::new(&Array::from(self.0))
    }
}

/// The ciphertext's length for a plaintext of `raw` bytes (Tencent's `aesEcbPaddedSize`).
pub(crate) fn padded_len(raw: u64) -> u64 {
    (raw / BLOCK as u64 + 1) * BLOCK as u64
}

/// Ciphertext in, plaintext out, as it streams.
pub(crate) struct Decryptor {
    cipher: Aes128,
    /// Bytes not yet deciphered: at most one whole block held back plus a part block.
    pending: Vec<u8>,
}

impl Decryptor {
    pub(crate) fn new(key: &Key) -> Decryptor {
        Decryptor {
            cipher: key.cipher(),
            pending: Vec::with_capacity(2 * BLOCK),
        }
    }

    /// The plaintext `chunk` completes, short of the last whole block seen (which may be the
    /// padding's).
    pub(crate) fn update(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let whole = self.pending.len() / BLOCK * BLOCK;
        // Keep the last whole block back, and any part block after it.
        let ready = whole.saturating_sub(BLOCK);
        let mut out: Vec<u8> = self.pending.drain(..ready).collect();
        for block in out.chunks_exact_mut(BLOCK) {
            in_place(block, |b| self.cipher.decrypt_block(b));
        }
        out
    }

    /// The last block's plaintext, its padding checked and removed.
    pub(crate) fn finish(&mut self) -> Result<Vec<u8>, CipherError> {
        if self.pending.len() != BLOCK {
            return Err(CipherError::Length);
        }
        let mut last = std::mem::take(&mut self.pending);
        in_place(&mut last, |b| self.cipher.decrypt_block(b));
        let pad = usize::from(last[BLOCK - 1]);
        if pad == 0 || pad > BLOCK || last[BLOCK - pad..].iter().any(|&b| usize::from(b) != pad) {
            return Err(CipherError::Padding);
        }
        last.truncate(BLOCK - pad);
        Ok(last)
    }
}

/// `f` over one 16-byte `block`, in place.
fn in_place(block: &mut [u8], f: impl FnOnce(&mut aes::Block)) {
    let mut b = aes::Block::default();
    b.copy_from_slice(block);
    f(&mut b);
    block.copy_from_slice(&b);
}

/// Plaintext in, ciphertext out, as it streams.
pub(crate) struct Encryptor {
    cipher: Aes128,
    /// A part block waiting for more.
    pending: Vec<u8>,
}

impl Encryptor {
    pub(crate) fn new(key: &Key) -> Encryptor {
        Encryptor {
            cipher: key.cipher(),
            pending: Vec::with_capacity(BLOCK),
        }
    }

    /// The ciphertext of every whole block `chunk` completes.
    pub(crate) fn update(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let whole = self.pending.len() / BLOCK * BLOCK;
        let mut out: Vec<u8> = self.pending.drain(..whole).collect();
        self.encrypt(&mut out);
        out
    }

    /// The last block, padded: 1 to 16 bytes of the pad's length.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let mut last = std::mem::take(&mut self.pending);
        let pad = BLOCK - last.len();
        last.resize(BLOCK, pad as u8);
        self.encrypt(&mut last);
        last
    }

    fn encrypt(&self, blocks: &mut [u8]) {
        for block in blocks.chunks_exact_mut(BLOCK) {
            in_place(block, |b| self.cipher.encrypt_block(b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FIPS-197 appendix C.1: AES-128, key 000102…0f, plaintext 00112233…ff.
    const FIPS_KEY: &str = "000102030405060708090a0b0c0d0e0f";
    const FIPS_PLAIN: &str = "00112233445566778899aabbccddeeff";
    const FIPS_CIPHER: &str = "69c4e0d86a7b0430d8cdb78070b4c55a";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn encrypt(key: &Key, plain: &[u8], piece: usize) -> Vec<u8> {
        let mut e = Encryptor::new(key);
        let mut out = vec![];
        for part in plain.chunks(piece.max(1)) {
            out.extend(e.update(part));
        }
        out.extend(e.finish());
        out
    }

    fn decrypt(key: &Key, cipher: &[u8], piece: usize) -> Result<Vec<u8>, CipherError> {
        let mut d = Decryptor::new(key);
        let mut out = vec![];
        for part in cipher.chunks(piece.max(1)) {
            out.extend(d.update(part));
        }
        out.extend(d.finish()?);
        Ok(out)
    }

    #[test]
    fn the_fips_vector_and_a_whole_padding_block() {
        let key = Key::from_hex(FIPS_KEY).unwrap();
        let plain = unhex(FIPS_PLAIN);
        let cipher = encrypt(&key, &plain, 16);
        // A 16-byte plaintext becomes 32: its block, then a block of sixteen 0x10.
        assert_eq!(cipher.len(), 32);
        assert_eq!(cipher[..16], unhex(FIPS_CIPHER)[..]);
        let mut pad = Array::from([16u8; 16]);
        key.cipher().encrypt_block(&mut pad);
        assert_eq!(cipher[16..], pad[..]);
        assert_eq!(decrypt(&key, &cipher, 16).unwrap(), plain);
    }

    #[test]
    fn every_length_round_trips_in_any_pieces() {
        let key = Key::from_hex(FIPS_KEY).unwrap();
        for len in [0usize, 1, 15, 16, 17, 31, 32, 33, 100] {
            let plain: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for piece in [1, 5, 16, 64] {
                let cipher = encrypt(&key, &plain, piece);
                assert_eq!(cipher.len() as u64, padded_len(len as u64), "{len}");
                assert_eq!(decrypt(&key, &cipher, piece).unwrap(), plain, "{len}/{piece}");
            }
        }
        // The empty file is one block of padding.
        assert_eq!(padded_len(0), 16);
        assert_eq!(padded_len(15), 16);
        assert_eq!(padded_len(16), 32);
    }

    #[test]
    fn bad_padding_a_part_block_and_the_wrong_key_are_errors() {
        let key = Key::from_hex(FIPS_KEY).unwrap();
        let cipher = encrypt(&key, b"hello", 16);
        assert_eq!(decrypt(&key, &cipher[..15], 16), Err(CipherError::Length));
        assert_eq!(decrypt(&key, &[], 16), Err(CipherError::Length));
        // The FIPS block alone deciphers to ...eeff: 0xff is no padding.
        assert_eq!(
            decrypt(&key, &unhex(FIPS_CIPHER), 16),
            Err(CipherError::Padding)
        );
        let other = Key::from_hex(&"ab".repeat(16)).unwrap();
        assert_eq!(decrypt(&other, &cipher, 16), Err(CipherError::Padding));
    }

    #[test]
    fn the_three_spellings_of_a_key() {
        let key = Key::from_hex(FIPS_KEY).unwrap();
        assert_eq!(Key::from_hex(&FIPS_KEY.to_uppercase()).unwrap(), key);
        let b64 = base64::engine::general_purpose::STANDARD;
        // base64 of the 16 raw bytes (images).
        assert_eq!(Key::from_aes_key(&b64.encode(unhex(FIPS_KEY))).unwrap(), key);
        // base64 of the 32 hex characters (files, voice, video; and every send).
        assert_eq!(Key::from_aes_key(&b64.encode(FIPS_KEY)).unwrap(), key);
        assert_eq!(
            key.aes_key_field(),
            "MDAwMTAyMDMwNDA1MDYwNzA4MDkwYTBiMGMwZDBlMGY="
        );
        assert_eq!(key.hex(), FIPS_KEY);
        for bad in ["", "00", &"zz".repeat(16), &"0".repeat(33)] {
            assert_eq!(Key::from_hex(bad), Err(CipherError::Key), "{bad}");
        }
        for bad in ["not base64!", &b64.encode([0u8; 15]), &b64.encode("g".repeat(32))] {
            assert_eq!(Key::from_aes_key(bad), Err(CipherError::Key), "{bad}");
        }
        assert_ne!(Key::random().unwrap(), Key::random().unwrap());
        assert_eq!(format!("{key:?}"), "Key(..)");
    }
}

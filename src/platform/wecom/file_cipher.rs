//! WeCom's file cipher: an AI bot's inbound image, file or video is served encrypted, AES-256-CBC
//! under the message's own `aeskey`, the IV the key's first 16 bytes, the plaintext PKCS#7
//! padded "至32字节的倍数" (to a multiple of 32 bytes). The docs: "接收消息", image and file
//! structures (developer.work.weixin.qq.com/document/path/100719, "加密方式：AES-256-CBC，数据
//! 采用PKCS#7填充至32字节的倍数；IV初始向量大小为16字节，取AESKey前16字节"); the long
//! connection gives each link its own key ("每个下载链接的 aeskey 唯一", `@wecom/aibot-node-sdk`
//! 1.0.7 `dist/types/message.d.ts`).
//!
//! **What is accepted is what the official SDK accepts** (`decryptFile`, `dist/index.cjs.js`):
//! the key is base64 of 32 bytes (Node's decoder takes it with or without `=`, and Hermes's
//! adapter adds the missing `=`: "WeCom doesn't pad base64 keys"); the ciphertext is whole
//! 16-byte blocks (the SDK turns Node's padding off, whose `final()` then wants only whole
//! blocks); the pad is its last byte, 1 to 32, every pad byte equal to it. So a file padded
//! to 16 (standard PKCS#7) is taken as well as one padded to 32. Anything else is an error,
//! never a part of a file.
//!
//! CBC is a dozen lines over the RustCrypto block cipher the crate already has (as the Weixin
//! wing runs ECB over it), not another crate. It streams: the last 32 bytes are held back
//! until the end, since they may all be padding, so a 50 MiB file costs 48 bytes of state.

use aes::cipher::{Array, BlockCipherDecrypt, KeyInit};
use aes::Aes256;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine};

/// AES's block.
const BLOCK: usize = 16;
/// The most padding WeCom adds, and so what is held back until the end.
pub(super) const MAX_PAD: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum CipherError {
    #[error("its key is not base64 of 32 bytes")]
    Key,
    #[error("the encrypted file is not a whole number of 16-byte blocks")]
    Length,
    #[error("the decrypted file's padding is not PKCS#7 (a damaged file, or the wrong key)")]
    Padding,
}

/// A file's 32-byte key. Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

/// Base64 as Node's `Buffer.from(s, 'base64')` reads a key: `=` or not, stray low bits of
/// the last character ignored (a 43-character key has two).
fn lenient(alphabet: &alphabet::Alphabet) -> GeneralPurpose {
    GeneralPurpose::new(
        alphabet,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    )
}

impl Key {
    /// A message's `aeskey`: base64 (standard or URL-safe, which Node's decoder both takes) of
    /// 32 bytes.
    pub(super) fn from_aeskey(b64: &str) -> Result<Key, CipherError> {
        let b64 = b64.trim();
        let decoded = lenient(&alphabet::STANDARD)
            .decode(b64)
            .or_else(|_| lenient(&alphabet::URL_SAFE).decode(b64))
            .map_err(|_| CipherError::Key)?;
        Ok(Key(decoded.try_into().map_err(|_| CipherError::Key)?))
    }
}

/// Ciphertext in, plaintext out, as it streams.
pub(super) struct Decryptor {
    cipher: Aes256,
    /// The ciphertext block before the next: the IV at first.
    previous: [u8; BLOCK],
    /// Bytes not yet deciphered: the last [`MAX_PAD`] whole bytes seen and any part block
    /// (so empty at the end only when no byte came at all).
    pending: Vec<u8>,
}

impl Decryptor {
    pub(super) fn new(key: &Key) -> Decryptor {
        let mut iv = [0u8; BLOCK];
        iv.copy_from_slice(&key.0[..BLOCK]);
        Decryptor {
            cipher: Aes256::new(&Array::from(key.0)),
            previous: iv,
            pending: Vec::with_capacity(MAX_PAD + BLOCK),
        }
    }

    /// The plaintext `chunk` completes, short of the last [`MAX_PAD`] bytes.
    pub(super) fn update(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let whole = self.pending.len() / BLOCK * BLOCK;
        let ready = whole.saturating_sub(MAX_PAD);
        let mut out: Vec<u8> = self.pending.drain(..ready).collect();
        self.decrypt(&mut out);
        out
    }

    /// The rest of the plaintext, its padding checked and removed.
    pub(super) fn finish(&mut self) -> Result<Vec<u8>, CipherError> {
        if self.pending.is_empty() || self.pending.len() % BLOCK != 0 {
            return Err(CipherError::Length);
        }
        let mut last = std::mem::take(&mut self.pending);
        self.decrypt(&mut last);
        let pad = usize::from(last[last.len() - 1]);
        let bad = pad == 0
            || pad > MAX_PAD
            || pad > last.len()
            || last[last.len() - pad..].iter().any(|&b| usize::from(b) != pad);
        if bad {
            return Err(CipherError::Padding);
        }
        last.truncate(last.len() - pad);
        Ok(last)
    }

    /// CBC over whole blocks in place: each block deciphered, then XORed with the ciphertext
    /// block before it.
    fn decrypt(&mut self, blocks: &mut [u8]) {
        for block in blocks.chunks_exact_mut(BLOCK) {
            let mut b = aes::Block::default();
            b.copy_from_slice(block);
            let cipher_block = self.previous;
            self.previous.copy_from_slice(block);
            self.cipher.decrypt_block(&mut b);
            for (out, (p, c)) in block.iter_mut().zip(b.iter().zip(cipher_block)) {
                *out = p ^ c;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key 00 01 … 1f, as a message would carry it (base64, 44 characters).
    const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    // Known answers from OpenSSL, not from this module (IV = the key's first 16 bytes):
    //   K=000102…1f IV=000102…0f
    //   printf 'hermes-svc wecom file\n' + ten 0x0a (PKCS#7 to 32) |
    //     openssl enc -aes-256-cbc -K $K -iv $IV -nopad | xxd -p
    const PLAIN_22: &[u8] = b"hermes-svc wecom file\n";
    const CIPHER_22: &str = "7eae3e59d0c782e1c1a30fb1cf206ca545c9ea84b3c2eee93f399fd73e0850e4";
    //   printf 'forty bytes of plaintext, for 16 padding' |
    //     openssl enc -aes-256-cbc -K $K -iv $IV | xxd -p        (OpenSSL's own 16-byte PKCS#7)
    const PLAIN_40: &[u8] = b"forty bytes of plaintext, for 16 padding";
    const CIPHER_40: &str = "9ca763609b0308edc29d6b0273d0af8cf8f0edae0183b7a8f2231003d972879c\
                             bcbee755d19b45941c3a69b4f495c09e";
    //   thirty-two 0x20 (the empty file, padded to 32) | openssl … -nopad | xxd -p
    const CIPHER_EMPTY: &str = "61a6936e4e8f101c1cc1f993b542a0d486823154a09759e3fc4b0a72da642835";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn decrypt(cipher: &[u8], piece: usize) -> Result<Vec<u8>, CipherError> {
        let mut d = Decryptor::new(&Key::from_aeskey(KEY).unwrap());
        let mut out = vec![];
        for part in cipher.chunks(piece.max(1)) {
            out.extend(d.update(part));
        }
        out.extend(d.finish()?);
        Ok(out)
    }

    #[test]
    fn openssl_s_answers_in_any_pieces_padded_to_32_or_to_16() {
        for piece in [1, 5, 16, 17, 32, 33, 64] {
            assert_eq!(decrypt(&unhex(CIPHER_22), piece).unwrap(), PLAIN_22, "{piece}");
            assert_eq!(decrypt(&unhex(CIPHER_40), piece).unwrap(), PLAIN_40, "{piece}");
            assert_eq!(decrypt(&unhex(CIPHER_EMPTY), piece).unwrap(), b"", "{piece}");
        }
    }

    #[test]
    fn a_damaged_or_cut_file_is_an_error_never_a_part() {
        let good = unhex(CIPHER_22);
        assert_eq!(decrypt(&[], 16), Err(CipherError::Length));
        assert_eq!(decrypt(&good[..31], 16), Err(CipherError::Length));
        // The second-to-last block's last byte XORed with the pad (10) makes the plaintext's
        // last byte 0: no padding.
        let mut zero = good.clone();
        zero[15] ^= 10;
        assert_eq!(decrypt(&zero, 7), Err(CipherError::Padding));
        // The first block alone ends in plaintext, not padding.
        assert_eq!(decrypt(&good[..16], 16), Err(CipherError::Padding));
        // A pad larger than 32: the empty file's 32 × 0x20 made 0x21 in its last byte.
        let mut over = unhex(CIPHER_EMPTY);
        over[15] ^= 0x20 ^ 0x21;
        assert_eq!(decrypt(&over, 16), Err(CipherError::Padding));
    }

    #[test]
    fn the_key_is_base64_of_32_bytes_padded_or_not() {
        let key = Key::from_aeskey(KEY).unwrap();
        assert_eq!(Key::from_aeskey(KEY.trim_end_matches('=')).unwrap(), key);
        assert_eq!(Key::from_aeskey(&format!(" {KEY}\n")).unwrap(), key);
        // URL-safe: 32 bytes of 0xfb spell `+` and `/` in the standard alphabet.
        let b64 = base64::engine::general_purpose::STANDARD.encode([0xfb; 32]);
        let url = b64.replace('+', "-").replace('/', "_");
        assert_eq!(Key::from_aeskey(&url).unwrap(), Key::from_aeskey(&b64).unwrap());
        for bad in ["", "not base64!", "AAECAwQFBgcICQoLDA0ODw==", &format!("{KEY}AAAA")] {
            assert_eq!(Key::from_aeskey(bad), Err(CipherError::Key), "{bad}");
        }
        assert_eq!(format!("{key:?}"), "Key(..)");
    }
}

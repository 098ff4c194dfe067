//! The files people send the bot: each an encrypted link and its key in the callback, as the
//! docs give them ("接收消息", developer.work.weixin.qq.com/document/path/100719: the image
//! and file structures' `url`, "该url五分钟内有效… 加密方式：AES-256-CBC，数据采用PKCS#7填充至
//! 32字节的倍数；IV初始向量大小为16字节，取AESKey前16字节") and the official SDK reads them
//! (`@wecom/aibot-node-sdk` 1.0.7: `aeskey` per link, base64, "每个下载链接的 aeskey 唯一";
//! `downloadFileRaw` takes the name from `Content-Disposition`, `filename*=UTF-8''…`).
//!
//! The link points to this mock (`GET /wecom/files/<token>?sign=…`), standing for WeCom's COS
//! bucket, and serves the ciphertext with no credential, as a presigned link does. The key is
//! 32 random bytes in base64 without its `=` (43 characters: Hermes's adapter notes "WeCom
//! doesn't pad base64 keys"). The cipher here is written from those words, not from any
//! adapter; `wecom_official` checks it against the SDK's own `downloadFile`.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};
use aes::Aes256;
use base64::Engine;

use super::super::http::RequestHead;
use super::super::reply::Answer;

/// Where the links point, on this mock.
pub(crate) const FILES_PATH: &str = "/wecom/files/";

/// The docs' padding block: PKCS#7 "至32字节的倍数".
const PAD_TO: usize = 32;

/// What can be wrong with a file the mock serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeComFileFault {
    /// The ciphertext is damaged so that its plaintext's last byte is 0: no PKCS#7 padding
    /// (the SDK's `decryptFile` throws "Invalid PKCS#7 padding value: 0").
    Corrupt,
}

/// How a file comes in a callback: its own message (`image`, `file`, `video`), or an image
/// item of a `mixed` message (after a text item).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeComMedia {
    Image,
    File,
    Video,
    MixedImage,
}

impl WeComMedia {
    /// The callback body's `msgtype` and content for a file behind `url` with `aeskey`.
    pub(crate) fn content(self, url: &str, aeskey: &str) -> serde_json::Value {
        let block = serde_json::json!({"url": url, "aeskey": aeskey});
        match self {
            WeComMedia::Image => serde_json::json!({"msgtype": "image", "image": block}),
            WeComMedia::File => serde_json::json!({"msgtype": "file", "file": block}),
            WeComMedia::Video => serde_json::json!({"msgtype": "video", "video": block}),
            WeComMedia::MixedImage => {
                serde_json::json!({"msgtype": "mixed", "mixed": {"msg_item": [
                    {"msgtype": "text", "text": {"content": "look"}},
                    {"msgtype": "image", "image": block},
                ]}})
            }
        }
    }
}

struct File {
    name: Option<String>,
    cipher: Vec<u8>,
}

#[derive(Default)]
struct Inner {
    serial: u64,
    /// By the link's token.
    files: HashMap<String, File>,
    downloads: u64,
}

/// What the mock keeps of the files, apart from the messages.
#[derive(Default)]
pub(crate) struct Files {
    inner: Mutex<Inner>,
}

/// A file put behind a link: the link's path (from the mock's root) and its `aeskey`.
pub(crate) struct Link {
    pub(crate) path: String,
    pub(crate) aeskey: String,
}

impl Files {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keep `plain` encrypted under a key of its own, named `name` when it is a file.
    pub(crate) fn add(
        &self,
        plain: &[u8],
        name: Option<&str>,
        fault: Option<WeComFileFault>,
    ) -> Link {
        let key: [u8; 32] = std::array::from_fn(|_| fastrand::u8(..));
        let mut cipher = encrypt(&key, plain);
        if fault == Some(WeComFileFault::Corrupt) {
            // CBC: XORing the second-to-last ciphertext block's last byte with the pad makes
            // the plaintext's last byte 0.
            let pad = PAD_TO - plain.len() % PAD_TO;
            let at = cipher.len() - 17;
            cipher[at] ^= u8::try_from(pad).unwrap_or(0);
        }
        let mut inner = self.lock();
        inner.serial += 1;
        let token = format!("{}{:08x}", inner.serial, fastrand::u32(..));
        inner.files.insert(
            token.clone(),
            File {
                name: name.map(str::to_owned),
                cipher,
            },
        );
        Link {
            path: format!("{FILES_PATH}{token}?sign=q-sign-algorithm%3Dsha1%26mock"),
            aeskey: base64::engine::general_purpose::STANDARD_NO_PAD.encode(key),
        }
    }

    /// Downloads served.
    pub(crate) fn downloads(&self) -> u64 {
        self.lock().downloads
    }

    /// `GET /wecom/files/<token>`: the ciphertext, or COS's 404 for a link it never gave.
    pub(crate) fn serve(&self, head: &RequestHead) -> Option<Answer> {
        let token = head.path.strip_prefix(FILES_PATH)?;
        if head.method != "GET" {
            return None;
        }
        let mut inner = self.lock();
        let Some(file) = inner.files.get(token) else {
            return Some(Answer::raw(
                404,
                Some("application/xml"),
                "<Error><Code>NoSuchKey</Code></Error>".into(),
            ));
        };
        let mut answer = Answer::bytes("application/octet-stream", file.cipher.clone());
        if let Some(name) = &file.name {
            answer.headers.push((
                "content-disposition",
                format!("attachment; filename*=UTF-8''{}", percent(name)),
            ));
        }
        inner.downloads += 1;
        Some(answer)
    }
}

/// AES-256-CBC, the IV the key's first 16 bytes, PKCS#7 to a multiple of 32 (1–32 bytes of
/// padding, a whole 32 when the plaintext already is one).
fn encrypt(key: &[u8; 32], plain: &[u8]) -> Vec<u8> {
    let pad = PAD_TO - plain.len() % PAD_TO;
    let mut data = plain.to_vec();
    data.resize(plain.len() + pad, u8::try_from(pad).unwrap_or(0));
    let cipher = Aes256::new(&Array::from(*key));
    let mut chain = [0u8; 16];
    chain.copy_from_slice(&key[..16]);
    for block in data.chunks_exact_mut(16) {
        let mut b = aes::Block::default();
        for (out, (p, c)) in b.iter_mut().zip(block.iter().zip(chain)) {
            *out = p ^ c;
        }
        cipher.encrypt_block(&mut b);
        block.copy_from_slice(&b);
        chain.copy_from_slice(&b);
    }
    data
}

/// RFC 5987's percent-encoding of a name: everything but the unreserved characters.
fn percent(name: &str) -> String {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssl_s_answer_for_the_docs_cipher() {
        // K=000102…1f; 'hermes-svc wecom file\n' plus ten 0x0a |
        //   openssl enc -aes-256-cbc -K $K -iv 000102…0f -nopad | xxd -p
        let key: [u8; 32] = std::array::from_fn(|i| i as u8);
        let cipher = encrypt(&key, b"hermes-svc wecom file\n");
        let hex: String = cipher.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "7eae3e59d0c782e1c1a30fb1cf206ca545c9ea84b3c2eee93f399fd73e0850e4"
        );
        assert_eq!(
            encrypt(&key, &[0; 32]).len(),
            64,
            "a whole block of padding"
        );
        assert_eq!(percent("报告 1.pdf"), "%E6%8A%A5%E5%91%8A%201.pdf");
    }
}

//! Weixin's CDN in the mock, and `POST /ilink/bot/getuploadurl`, from Tencent's protocol doc
//! (`docs/protocol.md` in Tencent/openclaw-weixin: "getUploadUrl", "CDN media reference",
//! "CDN media flow").
//!
//! - `getuploadurl` `{filekey, media_type: 1 image | 2 video | 3 file | 4 voice, to_user_id,
//!   rawsize, rawfilemd5, filesize, no_need_thumb, aeskey (hex)}` → `{upload_param,
//!   thumb_upload_param, upload_full_url?}` (the full URL only when
//!   `WeixinConfig::upload_full_url`: "The client prefers `upload_full_url`").
//! - `POST /c2c/upload?encrypted_query_param=<upload_param>&filekey=<filekey>`, the body the
//!   ciphertext as `application/octet-stream`: its length must be the announced `filesize`,
//!   and it must decrypt with the announced key (AES-128-ECB, PKCS#7) to `rawsize` bytes whose
//!   MD5 is `rawfilemd5`. Taken: 200 and the download parameter in the **`x-encrypted-param`
//!   header**; refused: 400 with `x-error-message` (the header Tencent's client reads).
//! - `GET /c2c/download?encrypted_query_param=<param>`: the ciphertext; no credential.
//!
//! The cipher here is the mock's own, over the block cipher, whole files at a time: the mock
//! must not share the client's code to check it. The mock's assumptions: an `upload_param`
//! stays good for more than one upload (Tencent's client retries a failed one with it); a
//! file stays on the CDN as long as the mock runs.

use std::collections::HashMap;

use aes::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use aes::Aes128;
use md5::{Digest, Md5};
use serde_json::{json, Value};

use super::checks::{self, check_post};
use super::codec;
use super::state::WeixinState;
use crate::mock_platform::http::RequestHead;
use crate::mock_platform::reply::Answer;

/// The path prefix of the CDN's endpoints (the default CDN base is `…/c2c`).
pub(crate) const PREFIX: &str = "/c2c/";

/// What `getuploadurl` announced of an upload.
struct Announced {
    filekey: String,
    key: [u8; 16],
    rawsize: u64,
    rawfilemd5: String,
    filesize: u64,
}

/// The CDN's files and the uploads announced.
#[derive(Default)]
pub(crate) struct Cdn {
    /// `upload_param` → what was announced.
    announced: HashMap<String, Announced>,
    /// `encrypt_query_param` → the ciphertext.
    files: HashMap<String, Vec<u8>>,
}

impl Cdn {
    /// `plain` encrypted with `key` and put on the CDN; its `encrypt_query_param`.
    pub(crate) fn put(&mut self, plain: &[u8], key: &[u8; 16]) -> String {
        let param = download_param();
        self.files.insert(param.clone(), encrypt(key, plain));
        param
    }

    /// The plaintext of the file `param`, with the key as `sendmessage`'s `aes_key` spells it
    /// (base64 of the hex string, the only form a send may use); `Err` says what is wrong.
    pub(crate) fn open(&self, param: &str, aes_key: &str) -> Result<Vec<u8>, &'static str> {
        let cipher = self
            .files
            .get(param)
            .ok_or("media.encrypt_query_param names no file on the CDN")?;
        let hex = codec::base64_decode(aes_key)
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or("media.aes_key is not base64 of the key's hex")?;
        let key = unhex(&hex).ok_or("media.aes_key is not base64 of the key's 32 hex digits")?;
        decrypt(&key, cipher).ok_or("the file does not decrypt with media.aes_key")
    }
}

/// A random 16-byte key.
pub(crate) fn random_key() -> [u8; 16] {
    std::array::from_fn(|_| fastrand::u8(..))
}

fn download_param() -> String {
    codec::base64_encode(codec::hex(48).as_bytes())
}

fn unhex(hex: &str) -> Option<[u8; 16]> {
    if hex.len() != 32 || !hex.is_ascii() {
        return None;
    }
    let mut key = [0u8; 16];
    for (i, k) in key.iter_mut().enumerate() {
        *k = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

pub(crate) fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// AES-128-ECB with PKCS#7 padding, the whole file.
pub(crate) fn encrypt(key: &[u8; 16], plain: &[u8]) -> Vec<u8> {
    let cipher = Aes128::new(&(*key).into());
    let pad = 16 - plain.len() % 16;
    let mut out = plain.to_vec();
    out.resize(plain.len() + pad, pad as u8);
    for block in out.chunks_exact_mut(16) {
        let mut b = aes::Block::default();
        b.copy_from_slice(block);
        cipher.encrypt_block(&mut b);
        block.copy_from_slice(&b);
    }
    out
}

/// The plaintext, or `None` when `data` is not whole blocks or its padding is not PKCS#7.
fn decrypt(key: &[u8; 16], data: &[u8]) -> Option<Vec<u8>> {
    if data.is_empty() || data.len() % 16 != 0 {
        return None;
    }
    let cipher = Aes128::new(&(*key).into());
    let mut out = data.to_vec();
    for block in out.chunks_exact_mut(16) {
        let mut b = aes::Block::default();
        b.copy_from_slice(block);
        cipher.decrypt_block(&mut b);
        block.copy_from_slice(&b);
    }
    let pad = usize::from(*out.last()?);
    if pad == 0
        || pad > 16
        || out[out.len() - pad..]
            .iter()
            .any(|&b| usize::from(b) != pad)
    {
        return None;
    }
    out.truncate(out.len() - pad);
    Some(out)
}

/// `POST /ilink/bot/getuploadurl`.
pub(crate) fn get_upload_url(
    head: &RequestHead,
    body: &[u8],
    state: &WeixinState,
    http_base: &str,
) -> Answer {
    let body = match check_post(head, body, state) {
        Ok(body) => body,
        Err(expired) => return expired,
    };
    let announced = match read_announcement(&body) {
        Ok(a) => a,
        Err(why) => return checks::invalid(why),
    };
    let upload_param = codec::base64_encode(codec::hex(40).as_bytes());
    let mut answer = json!({"ret": 0, "upload_param": upload_param, "thumb_upload_param": ""});
    if state.config.upload_full_url {
        answer["upload_full_url"] = json!(format!(
            "{http_base}{PREFIX}upload?encrypted_query_param={}&filekey={}",
            escape(&upload_param),
            escape(&announced.filekey)
        ));
    }
    let mut inner = state.lock();
    inner.stats.upload_urls += 1;
    inner.cdn.announced.insert(upload_param, announced);
    Answer::new(200, answer)
}

fn escape(v: &str) -> String {
    v.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn read_announcement(body: &Value) -> Result<Announced, &'static str> {
    let string = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let number = |k: &str| body.get(k).and_then(Value::as_u64);
    let filekey = string("filekey").ok_or("filekey is required")?;
    if !matches!(number("media_type"), Some(1..=4)) {
        return Err("media_type must be 1 image, 2 video, 3 file or 4 voice");
    }
    string("to_user_id").ok_or("to_user_id is required")?;
    let rawsize = number("rawsize").ok_or("rawsize is required")?;
    let rawfilemd5 = string("rawfilemd5")
        .filter(|m| m.len() == 32 && m.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or("rawfilemd5 must be the plaintext's MD5 in hex")?;
    let filesize = number("filesize").ok_or("filesize is required")?;
    if filesize != (rawsize / 16 + 1) * 16 {
        return Err("filesize is not the AES-128-ECB PKCS#7 size of rawsize");
    }
    let key = string("aeskey")
        .and_then(unhex)
        .ok_or("aeskey must be the 16-byte key as 32 hex digits")?;
    Ok(Announced {
        filekey: filekey.to_owned(),
        key,
        rawsize,
        rawfilemd5: rawfilemd5.to_ascii_lowercase(),
        filesize,
    })
}

/// `POST /c2c/upload?encrypted_query_param=&filekey=`.
pub(crate) fn upload(head: &RequestHead, body: &[u8], state: &WeixinState) -> Answer {
    let mut inner = state.lock();
    let checked = {
        let param = head
            .query_param("encrypted_query_param")
            .unwrap_or_default();
        let filekey = head.query_param("filekey").unwrap_or_default();
        match inner.cdn.announced.get(&param) {
            None => Err("encrypted_query_param is no upload getuploadurl gave"),
            Some(a) if a.filekey != filekey => Err("filekey is not the one announced"),
            Some(a) if body.len() as u64 != a.filesize => Err("the body's length is not filesize"),
            Some(a) => match decrypt(&a.key, body) {
                None => Err("the body does not decrypt with aeskey (AES-128-ECB, PKCS#7)"),
                Some(plain) if plain.len() as u64 != a.rawsize => {
                    Err("the plaintext's length is not rawsize")
                }
                Some(plain) if hex_of(&Md5::digest(&plain)) != a.rawfilemd5 => {
                    Err("the plaintext's MD5 is not rawfilemd5")
                }
                Some(_) => Ok(()),
            },
        }
    };
    if let Err(why) = checked {
        inner.stats.upload_refusals += 1;
        if inner.stats.upload_refusals_said.len() < 20 {
            inner.stats.upload_refusals_said.push(why.to_owned());
        }
        let mut answer = Answer::raw(400, None, String::new());
        answer.headers.push(("x-error-message", why.to_owned()));
        return answer;
    }
    let param = download_param();
    inner.cdn.files.insert(param.clone(), body.to_vec());
    inner.stats.uploads += 1;
    let mut answer = Answer::raw(200, None, String::new());
    answer.headers.push(("x-encrypted-param", param));
    answer
}

/// `GET /c2c/download?encrypted_query_param=`.
pub(crate) fn download(head: &RequestHead, state: &WeixinState) -> Answer {
    let param = head
        .query_param("encrypted_query_param")
        .unwrap_or_default();
    let mut inner = state.lock();
    match inner.cdn.files.get(&param).cloned() {
        Some(bytes) => {
            inner.stats.downloads += 1;
            Answer::bytes("application/octet-stream", bytes)
        }
        None => {
            let mut answer = Answer::raw(404, None, String::new());
            answer
                .headers
                .push(("x-error-message", "no such file".to_owned()));
            answer
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mocks_cipher_is_the_fips_vector_and_pads_whole_blocks() {
        let key = unhex("000102030405060708090a0b0c0d0e0f").unwrap();
        let plain = [
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
            0xee, 0xff,
        ];
        let c = encrypt(&key, &plain);
        assert_eq!(c.len(), 32);
        assert_eq!(hex_of(&c[..16]), "69c4e0d86a7b0430d8cdb78070b4c55a");
        assert_eq!(decrypt(&key, &c).unwrap(), plain);
        assert_eq!(decrypt(&key, &c[..16]), None);
        assert_eq!(
            hex_of(&Md5::digest(b"")),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
    }
}

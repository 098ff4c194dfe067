//! The few encodings the iLink protocol puts on the wire: standard base64 (the `X-WECHAT-UIN`
//! header), the opaque `get_updates_buf` cursor, and random hex for ids and tokens. Written
//! here because the crate has no base64 dependency and the mock needs only a few lines of it.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// What the mock puts before the position in a cursor, so a cursor from elsewhere is told apart.
const CURSOR_PREFIX: &str = "mock-ilink-cursor:";

/// Standard base64 with padding.
pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64 with its padding, strictly: `None` for anything else.
pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if bytes.is_empty() || bytes.len() % 4 != 0 {
        return None;
    }
    let value = |c: u8| ALPHABET.iter().position(|&a| a == c).map(|v| v as u32);
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let quads = bytes.len() / 4;
    for (index, quad) in bytes.chunks(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && index + 1 != quads) {
            return None;
        }
        let mut n = 0u32;
        for &c in &quad[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&decoded[..3 - pad]);
    }
    Some(out)
}

/// Whether `header` is what iLink clients send as `X-WECHAT-UIN`: base64 of a random u32
/// written in decimal (canonical form: no sign, no leading zeros).
pub(crate) fn uin_well_formed(header: &str) -> bool {
    base64_decode(header.trim())
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .is_some_and(|text| text.parse::<u32>().is_ok_and(|n| n.to_string() == text))
}

/// The cursor that resumes after the first `position` messages of the log.
pub(crate) fn cursor(position: usize) -> String {
    base64_encode(format!("{CURSOR_PREFIX}{position}").as_bytes())
}

/// The position a cursor names; the empty cursor is the start of the log. `None` for a
/// cursor this mock never gave.
pub(crate) fn position(cursor: &str) -> Option<usize> {
    if cursor.is_empty() {
        return Some(0);
    }
    let text = String::from_utf8(base64_decode(cursor)?).ok()?;
    text.strip_prefix(CURSOR_PREFIX)?.parse().ok()
}

/// `digits` random lowercase hex digits.
pub(crate) fn hex(digits: usize) -> String {
    (0..digits)
        .map(|_| char::from(b"0123456789abcdef"[fastrand::usize(..16)]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_every_padding() {
        for text in [
            "",
            "f",
            "fo",
            "foo",
            "foob",
            "fooba",
            "foobar",
            "4294967295",
        ] {
            let encoded = base64_encode(text.as_bytes());
            if !text.is_empty() {
                assert_eq!(base64_decode(&encoded).unwrap(), text.as_bytes(), "{text}");
            }
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"f"), "Zg==");
    }

    #[test]
    fn base64_decode_is_strict() {
        for bad in ["", "Zg", "Zg=", "Z===", "Zg==Zg==", "Zm9v!mFy", "=Zg="] {
            assert_eq!(base64_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn uin_must_be_a_decimal_u32() {
        assert!(uin_well_formed(&base64_encode(b"0")));
        assert!(uin_well_formed(&base64_encode(b"4294967295")));
        for bad in ["4294967296", "-1", "+1", "01", "12a", ""] {
            assert!(!uin_well_formed(&base64_encode(bad.as_bytes())), "{bad}");
        }
        assert!(!uin_well_formed("123"));
    }

    #[test]
    fn cursors_are_opaque_positions() {
        assert_eq!(position(""), Some(0));
        assert_eq!(position(&cursor(42)), Some(42));
        assert_eq!(position("not a cursor"), None);
        assert_eq!(position(&base64_encode(b"other:1")), None);
    }
}

//! A file's type from its first bytes. A platform's MIME type and file name are the sender's
//! words: a "photo.jpg" can be anything, and the agent is told what the bytes are.

/// The type of the file that starts with `head` (its first few dozen bytes), as a MIME type
/// and the extension the store gives the file; `application/octet-stream` when unknown.
pub fn sniff(head: &[u8]) -> (&'static str, &'static str) {
    let starts = |magic: &[u8]| head.starts_with(magic);
    let at = |offset: usize, magic: &[u8]| head.get(offset..offset + magic.len()) == Some(magic);
    if starts(b"\x89PNG\r\n\x1a\n") {
        ("image/png", "png")
    } else if starts(b"\xff\xd8\xff") {
        ("image/jpeg", "jpg")
    } else if starts(b"GIF87a") || starts(b"GIF89a") {
        ("image/gif", "gif")
    } else if starts(b"RIFF") && at(8, b"WEBP") {
        ("image/webp", "webp")
    } else if starts(b"%PDF-") {
        ("application/pdf", "pdf")
    } else if starts(b"OggS") {
        ("audio/ogg", "ogg")
    } else if starts(b"ID3") || starts(b"\xff\xfb") || starts(b"\xff\xf3") || starts(b"\xff\xf2") {
        ("audio/mpeg", "mp3")
    } else if starts(b"RIFF") && at(8, b"WAVE") {
        ("audio/wav", "wav")
    } else if at(4, b"ftyp") {
        if at(8, b"M4A ") {
            ("audio/mp4", "m4a")
        } else {
            ("video/mp4", "mp4")
        }
    } else if starts(b"\x1a\x45\xdf\xa3") {
        ("video/webm", "webm")
    } else if starts(b"PK\x03\x04") {
        ("application/zip", "zip")
    } else if !head.is_empty()
        && !head.contains(&0)
        && std::str::from_utf8(trim_partial_char(head)).is_ok()
    {
        ("text/plain", "txt")
    } else {
        ("application/octet-stream", "bin")
    }
}

/// `head` without a UTF-8 character cut off at its end: the head is a prefix of the file.
fn trim_partial_char(head: &[u8]) -> &[u8] {
    match std::str::from_utf8(head) {
        Ok(_) => head,
        Err(e) if e.error_len().is_none() => &head[..e.valid_up_to()],
        Err(_) => head,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_say_the_type_whatever_the_name() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").0, "image/png");
        assert_eq!(sniff(b"\xff\xd8\xff\xe0\0\x10JFIF").0, "image/jpeg");
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 ").0, "image/webp");
        assert_eq!(sniff(b"%PDF-1.7\n").1, "pdf");
        assert_eq!(sniff(b"OggS\0\x02").0, "audio/ogg");
        assert_eq!(sniff(b"\0\0\0\x20ftypisom").0, "video/mp4");
        assert_eq!(sniff("notes: héllo".as_bytes()).0, "text/plain");
        // A head cut in the middle of a character is still text.
        assert_eq!(sniff(&"aé".as_bytes()[..2]).0, "text/plain");
        assert_eq!(
            sniff(b"\0\x01\x02garbage\xff").0,
            "application/octet-stream"
        );
        assert_eq!(sniff(b"\0\0\0\0").0, "application/octet-stream");
        assert_eq!(sniff(b"").1, "bin");
    }
}

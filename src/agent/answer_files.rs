//! The files in an agent's answer, made into attachments. Hermes's API server gives an image
//! the model named (`MEDIA:/path.png`) back inline, as a markdown image of a data URL, and
//! leaves any other file as its `MEDIA:` path in the text. Posted as text, the first is
//! megabytes of base64 split over messages and the second a path the chat cannot open; so
//! both are cut out of the text and posted as files.
//!
//! A path is the agent's word, and the agent may be steered by anyone who can message it: a
//! file is sent only from inside the agent's own home (`agent/hermes`), never from its top
//! (its config and keys live there), a dotfile, or its private directories (other chats'
//! sessions, its memories and skills, its logs). Anything else is said, not sent.

use std::path::{Path, PathBuf};

use base64::Engine;

use crate::media::named::{self, media_tags, Refused};

/// The directories of Hermes's home that hold what no chat should be sent.
const PRIVATE: [&str; 9] = [
    "memories",
    "skills",
    "sessions",
    "cron",
    "logs",
    "platforms",
    "pairing",
    "profiles",
    "hooks",
];

/// A file the answer carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Made {
    /// An image given inline: its type and bytes.
    Inline { mime: String, bytes: Vec<u8> },
    /// A file named by its path.
    Path(PathBuf),
}

/// An answer's text without its files, and the files.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Split {
    pub(super) text: String,
    pub(super) files: Vec<Made>,
}

/// Cut the inline images (`![alt](data:TYPE;base64,DATA)`) and the `MEDIA:/absolute/path`
/// tags out of `text`.
pub(super) fn split(text: &str) -> Split {
    let mut out = Split::default();
    let mut rest = text;
    while let Some(at) = rest.find("![") {
        out.text.push_str(&rest[..at]);
        match inline_image(&rest[at..]) {
            Some((made, len)) => {
                out.files.push(made);
                rest = &rest[at + len..];
            }
            None => {
                out.text.push_str("![");
                rest = &rest[at + 2..];
            }
        }
    }
    out.text.push_str(rest);
    let (text, paths) = media_tags(&out.text);
    out.text = text;
    out.files.extend(paths.into_iter().map(Made::Path));
    out
}

/// The inline image at the start of `s` and its length in `s`.
fn inline_image(s: &str) -> Option<(Made, usize)> {
    let close_alt = s.find("](")?;
    if s[2..close_alt].contains(['\n', '[']) {
        return None;
    }
    let url_start = close_alt + 2;
    let url_len = s[url_start..].find(')')?;
    let url = &s[url_start..url_start + url_len];
    let (mime, data) = url.strip_prefix("data:")?.split_once(";base64,")?;
    if !mime.starts_with("image/") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    let made = Made::Inline {
        mime: mime.to_owned(),
        bytes,
    };
    Some((made, url_start + url_len + 1))
}

/// Why the file at `path` may not be sent from the agent whose home is `home`, if it may not:
/// it must resolve (links followed) to a regular file inside the home, below its top, outside
/// its dotfiles and private directories.
pub(super) fn refused(path: &Path, home: &Path) -> Option<String> {
    const HOME: &str = "the agent's home";
    let parts = match named::below(path, home) {
        Ok(parts) => parts,
        // A dotfile anywhere is as private as the directories below.
        Err(Refused::Hidden) => return Some("it is among the agent's private files".into()),
        Err(why) => return Some(why.says(HOME)),
    };
    if parts.len() < 2 {
        return Some("it is the agent's own configuration, at the top of its home".into());
    }
    if PRIVATE.contains(&parts[0].as_str()) {
        return Some("it is among the agent's private files".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_images_and_media_tags_are_cut_out_in_order() {
        let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNGxyz");
        let text = format!(
            "here ![image](data:image/png;base64,{png}) and MEDIA:/h/cache/r.pdf. Also ![x](https://e/a.png) ok"
        );
        let s = split(&text);
        assert_eq!(s.text, "here  and . Also ![x](https://e/a.png) ok");
        assert_eq!(
            s.files,
            [
                Made::Inline {
                    mime: "image/png".into(),
                    bytes: b"\x89PNGxyz".to_vec()
                },
                Made::Path("/h/cache/r.pdf".into())
            ]
        );
        // Not an image, or broken: left as it was.
        for kept in [
            "![a](data:text/html;base64,PGI+)",
            "![a](data:image/png;base64,@@@)",
            "![a](data:image/png;base64,QQ",
            "MEDIA:relative.png",
        ] {
            assert_eq!(
                split(kept),
                Split {
                    text: kept.into(),
                    files: vec![]
                }
            );
        }
    }

    #[test]
    fn only_files_below_the_top_of_the_home_and_outside_its_private_parts_go() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        for dir in ["cache/images", "memories", ".ssh", "out"] {
            std::fs::create_dir_all(h.join(dir)).unwrap();
        }
        for file in [
            "config.yaml",
            ".env",
            "cache/images/a.png",
            "memories/m.md",
            ".ssh/id",
            "out/.hidden",
        ] {
            std::fs::write(h.join(file), b"x").unwrap();
        }
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::os::unix::fs::symlink(outside.path(), h.join("out/link.png")).unwrap();
        assert_eq!(refused(&h.join("cache/images/a.png"), h), None);
        assert_eq!(refused(&h.join("out/../cache/images/a.png"), h), None);
        for (path, why) in [
            (h.join("config.yaml"), "top"),
            (h.join(".env"), "private"),
            (h.join("memories/m.md"), "private"),
            (h.join(".ssh/id"), "private"),
            (h.join("out/.hidden"), "private"),
            (h.join("out/link.png"), "outside"),
            (h.join("cache/images"), "regular"),
            (h.join("cache/none.png"), "no such"),
            (outside.path().to_owned(), "outside"),
        ] {
            let said = refused(&path, h).unwrap_or_else(|| panic!("{path:?} refused"));
            assert!(said.contains(why), "{path:?}: {said}");
        }
    }
}

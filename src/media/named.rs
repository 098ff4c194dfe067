//! Files on this machine that a program's output names, the way Hermes names them: a
//! `MEDIA:/absolute/path` tag in the text. Both the agent's answers and cron jobs' output use
//! it, so a job that runs `hermes chat` delivers the files its answer made.
//!
//! A path in output is the word of whatever produced the output, and that may be steered by
//! anyone who can message the bot; so a named file is sent only from inside a directory the
//! caller trusts, never through a dotfile or a link out of it. What each caller trusts, and
//! what more it refuses, is its own.

use std::path::{Component, Path, PathBuf};

/// The text without its `MEDIA:` tags of absolute paths, and the paths, in order.
pub(crate) fn media_tags(text: &str) -> (String, Vec<PathBuf>) {
    let mut kept = String::with_capacity(text.len());
    let mut paths = vec![];
    let mut rest = text;
    while let Some(at) = rest.find("MEDIA:/") {
        kept.push_str(&rest[..at]);
        let tag = &rest[at + "MEDIA:".len()..];
        let end = tag.find(char::is_whitespace).unwrap_or(tag.len());
        // A sentence's end is not the path's.
        let path = tag[..end].trim_end_matches(['.', ',', ';', ')', '"', '\'', '`']);
        paths.push(PathBuf::from(path));
        rest = &tag[path.len()..];
    }
    kept.push_str(rest);
    (kept, paths)
}

/// Why a named file may not be sent from below a root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    Missing,
    Outside,
    Hidden,
    NotAFile,
}

impl Refused {
    /// The reason, as a chat or a log line says it; `root` is what the root is to the reader
    /// ("the agent's home").
    pub(crate) fn says(self, root: &str) -> String {
        match self {
            Refused::Missing => "there is no such file".into(),
            Refused::Outside => format!("it is outside {root}"),
            Refused::Hidden => "it is a dotfile or inside a hidden directory".into(),
            Refused::NotAFile => "it is not a regular file".into(),
        }
    }
}

/// The parts of `path` below `root` when it resolves (links followed) to a regular file
/// there, none of them hidden.
pub(crate) fn below(path: &Path, root: &Path) -> Result<Vec<String>, Refused> {
    let (Ok(path), Ok(root)) = (path.canonicalize(), root.canonicalize()) else {
        return Err(Refused::Missing);
    };
    let Ok(inside) = path.strip_prefix(&root) else {
        return Err(Refused::Outside);
    };
    let parts: Vec<String> = inside
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if parts.iter().any(|p| p.starts_with('.')) {
        return Err(Refused::Hidden);
    }
    if parts.is_empty() || !path.is_file() {
        return Err(Refused::NotAFile);
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_of_absolute_paths_are_cut_out_in_order_without_the_sentence_end() {
        let (text, paths) = media_tags("see MEDIA:/a/b.pdf. and (MEDIA:/c d) MEDIA:rel.png");
        assert_eq!(text, "see . and ( d) MEDIA:rel.png");
        assert_eq!(paths, [PathBuf::from("/a/b.pdf"), PathBuf::from("/c")]);
    }

    #[test]
    fn only_regular_files_below_the_root_and_outside_hidden_parts_go() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("out/.cache")).unwrap();
        for file in ["out/a.pdf", "out/.hidden", "out/.cache/b.png", "top.txt"] {
            std::fs::write(r.join(file), b"x").unwrap();
        }
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::os::unix::fs::symlink(outside.path(), r.join("out/link.png")).unwrap();
        assert_eq!(
            below(&r.join("out/../out/a.pdf"), r),
            Ok(vec!["out".to_owned(), "a.pdf".to_owned()])
        );
        assert_eq!(below(&r.join("top.txt"), r), Ok(vec!["top.txt".to_owned()]));
        for (path, why) in [
            (r.join("out/.hidden"), Refused::Hidden),
            (r.join("out/.cache/b.png"), Refused::Hidden),
            (r.join("out/link.png"), Refused::Outside),
            (outside.path().to_owned(), Refused::Outside),
            (r.join("out"), Refused::NotAFile),
            (r.to_owned(), Refused::NotAFile),
            (r.join("none.png"), Refused::Missing),
        ] {
            assert_eq!(below(&path, r), Err(why), "{path:?}");
        }
    }
}

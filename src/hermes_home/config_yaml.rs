//! The platform credentials a Hermes `config.yaml` holds. Hermes reads a platform's credential
//! from its environment, and its config puts one there two ways (hermes-agent 0.19.0): every
//! top-level scalar becomes an environment variable (`gateway/run.py`, "Bridge config.yaml
//! values into the environment"), so a top-level `NAME_BOT_TOKEN: ...` is as good as the `.env`
//! line;
//! and `platforms.NAME` (or `gateway.platforms.NAME`) is the platform's own block, whose
//! `token`, `api_key` and `extra` secrets Hermes connects with (`gateway/config.py`).
//!
//! Not a YAML parser: the block mappings people write are read by indentation, key by key, and
//! a flow mapping (`NAME: {token: x}`) under `platforms` counts when it names a secret key.
//! What this misses errs on the side of a Hermes that connects a platform; what it finds is
//! never a false alarm about a file that holds no credential.

/// The keys under a platform's block whose value is a credential.
const SECRET_KEYS: [&str; 9] = [
    "token",
    "api_key",
    "app_secret",
    "client_secret",
    "secret",
    "access_token",
    "password",
    "app_token",
    "bot_token",
];

/// A credential found: the platform it connects, and where it is (a variable's name, or a key
/// path such as `platforms.NAME.token`), never its value.
#[derive(Debug, PartialEq, Eq)]
pub struct Found {
    pub platform: String,
    pub key: String,
    /// The 0-based index of the line it is on.
    pub line: usize,
}

/// The credentials `text` holds for `platforms` (each platform, as Hermes names it, with the
/// environment variables its credential is read from).
pub fn credentials(text: &str, platforms: &[(&str, &[&str])]) -> Vec<Found> {
    let mut out = vec![];
    // The keys of the block mappings the current line is in, with their indentation.
    let mut path: Vec<(usize, String)> = vec![];
    for (n, line) in text.lines().enumerate() {
        let content = line.trim_end();
        let trimmed = content.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("- ") {
            continue;
        }
        if trimmed == "---" || trimmed == "..." {
            path.clear();
            continue;
        }
        let indent = content.len() - trimmed.len();
        let Some((key, value)) = key_value(trimmed) else {
            continue;
        };
        while path.last().is_some_and(|(i, _)| *i >= indent) {
            path.pop();
        }
        let keys: Vec<&str> = path.iter().map(|(_, k)| k.as_str()).collect();
        let given = !is_empty(value);
        if keys.is_empty() && given {
            if let Some((platform, _)) = platforms.iter().find(|(_, names)| names.contains(&key)) {
                out.push(Found {
                    platform: (*platform).to_owned(),
                    key: key.to_owned(),
                    line: n,
                });
            }
        }
        // Inside `platforms.NAME` (or `gateway.platforms.NAME`), at any depth (`extra`).
        let block = match keys.as_slice() {
            ["platforms", name, ..] | ["gateway", "platforms", name, ..] => Some(*name),
            ["platforms"] | ["gateway", "platforms"] => Some(key),
            _ => None,
        };
        if let Some(name) = block.filter(|n| platforms.iter().any(|(p, _)| p == n)) {
            let named_here = SECRET_KEYS.contains(&key) && given;
            let in_flow = is_flow_mapping(value) && SECRET_KEYS.iter().any(|k| flow_has(value, k));
            if named_here || in_flow {
                let mut at: Vec<&str> = keys.clone();
                at.push(key);
                out.push(Found {
                    platform: name.to_owned(),
                    key: at.join("."),
                    line: n,
                });
            }
        }
        if !given {
            path.push((indent, key.to_owned()));
        }
    }
    out
}

/// One `key: value` entry of a block mapping, by its key path (`["platforms", "telegram",
/// "token"]`), with its line: what adopt reads a platform's settings from. Its `Debug` shows
/// no value (a value may be a token).
#[derive(Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: Vec<String>,
    /// The value as written on the line, trimmed; a mapping's key line has none.
    pub raw: String,
    /// The 0-based index of its line.
    pub line: usize,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Entry({} at line {})",
            self.path.join("."),
            self.line + 1
        )
    }
}

impl Entry {
    /// The value as a plain scalar: unquoted, its comment dropped; `None` for what is not
    /// one on this line (a block or flow collection, a multi-line string, an anchor or tag).
    pub fn scalar(&self) -> Option<String> {
        scalar(&self.raw)
    }

    /// Whether the value is a flow collection (`{...}`, `[...]`) on the line.
    pub fn is_flow(&self) -> bool {
        self.raw.starts_with(['{', '['])
    }

    /// The value as a list of scalars: a flow sequence `[a, b]` on the line, else the scalar
    /// split at commas (as Hermes splits its `*_ALLOWED_USERS` strings).
    pub fn list(&self) -> Option<Vec<String>> {
        let inner = match self.raw.strip_prefix('[') {
            Some(rest) => rest.split_once(']')?.0.to_owned(),
            None => self.scalar()?,
        };
        Some(
            inner
                .split(',')
                .filter_map(|s| scalar(s.trim()))
                .filter(|s| !s.is_empty())
                .collect(),
        )
    }
}

/// Every `key: value` entry of `text`'s block mappings, with its key path. A block sequence
/// (`- item`) is skipped with what is under it, so no key inside one is taken for a mapping's.
pub fn entries(text: &str) -> Vec<Entry> {
    let mut out = vec![];
    let mut path: Vec<(usize, String)> = vec![];
    // Inside a block sequence, or a block scalar (`|`, `>`), at this indentation or deeper.
    let mut skipping: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        let content = line.trim_end();
        let trimmed = content.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = content.len() - trimmed.len();
        if let Some(depth) = skipping {
            if indent > depth || (indent == depth && trimmed.starts_with("- ")) {
                continue;
            }
            skipping = None;
        }
        if trimmed == "---" || trimmed == "..." {
            path.clear();
            continue;
        }
        if trimmed.starts_with("- ") || trimmed == "-" {
            skipping = Some(indent);
            continue;
        }
        let Some((key, value)) = key_value(trimmed) else {
            continue;
        };
        while path.last().is_some_and(|(i, _)| *i >= indent) {
            path.pop();
        }
        let mut at: Vec<String> = path.iter().map(|(_, k)| k.clone()).collect();
        at.push(key.to_owned());
        out.push(Entry {
            path: at,
            raw: value.to_owned(),
            line: n,
        });
        if value.starts_with(['|', '>']) {
            skipping = Some(indent);
        } else if is_empty(value) {
            path.push((indent, key.to_owned()));
        }
    }
    out
}

/// `text` without the lines whose 0-based indexes are in `lines`, every other byte kept.
pub fn without_lines(text: &str, lines: &[usize]) -> String {
    text.split_inclusive('\n')
        .enumerate()
        .filter(|(n, _)| !lines.contains(n))
        .map(|(_, l)| l)
        .collect()
}

/// A plain or quoted scalar on one line, unquoted; `None` for anything else.
fn scalar(raw: &str) -> Option<String> {
    if let Some(rest) = raw.strip_prefix('"') {
        let end = rest.find('"')?;
        let inner = &rest[..end];
        let tail = rest[end + 1..].trim_start();
        if inner.contains('\\') || !(tail.is_empty() || tail.starts_with('#')) {
            return None;
        }
        return Some(inner.to_owned());
    }
    if let Some(rest) = raw.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '\'' {
                out.push(c);
            } else if chars.peek() == Some(&'\'') {
                out.push('\'');
                chars.next();
            } else {
                let tail: String = chars.collect();
                let tail = tail.trim_start();
                return (tail.is_empty() || tail.starts_with('#')).then_some(out);
            }
        }
        return None;
    }
    if raw.starts_with(['{', '[', '|', '>', '&', '*', '!', '%', '@', '`']) {
        return None;
    }
    let value = match raw.find(" #") {
        Some(i) => &raw[..i],
        None if raw.starts_with('#') => "",
        None => raw,
    };
    let value = value.trim();
    Some(if matches!(value, "~" | "null" | "Null" | "NULL") {
        String::new()
    } else {
        value.to_owned()
    })
}

/// What a chat's files need of Hermes's `config.yaml` (`text`, `None` for none) and it does
/// not say, each with the fix (hermes-facts, "Media": without the first Hermes describes every
/// image in an extra call instead of passing its pixels; without the second a voice note's
/// transcription fails). Read by line, as [`credentials`] reads.
pub fn media_notes(text: Option<&str>) -> Vec<&'static str> {
    let text = text.unwrap_or_default();
    let lines = || text.lines().filter_map(key_value);
    let mut notes = vec![];
    if !lines().any(|(k, v)| k == "supports_vision" && v.trim() == "true") {
        notes.push(
            "Hermes's config.yaml does not set model.supports_vision: true, so a photo reaches the model through an extra describe call rather than as pixels; set it if the model reads images (docs/agent.md)",
        );
    }
    if !text.lines().any(|l| l.trim_end() == "stt:") {
        notes.push(
            "Hermes's config.yaml has no stt: section, so a voice note cannot be transcribed; give stt.provider a reachable endpoint, or set stt.enabled: false so the file at least reaches the model, and stt.echo_transcripts: false (docs/agent.md)",
        );
    }
    notes
}

/// `key: value` (the key unquoted), or `None` for a line that is not a mapping entry.
fn key_value(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(':')?;
    if !value.is_empty() && !value.starts_with([' ', '\t']) {
        // `http://...`, `a:b`: not a key.
        return None;
    }
    let key = key.trim().trim_matches(['"', '\'']);
    (!key.is_empty()).then(|| (key, value.trim()))
}

/// Whether a YAML value says nothing: absent, null, an empty string, or only a comment.
fn is_empty(value: &str) -> bool {
    matches!(value, "" | "~" | "null" | "Null" | "NULL" | "\"\"" | "''") || value.starts_with('#')
}

/// Whether `value` is a flow mapping, `{...}` on one line.
fn is_flow_mapping(value: &str) -> bool {
    value.starts_with('{') && value.ends_with('}')
}

/// Whether the flow mapping `value` has `key` with something after it.
fn flow_has(value: &str, key: &str) -> bool {
    value
        .split(['{', ',', '}'])
        .filter_map(|entry| entry.split_once(':'))
        .any(|(k, v)| k.trim().trim_matches(['"', '\'']) == key && !is_empty(v.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_chats_files_need_of_the_config_is_named_until_it_is_there() {
        assert_eq!(media_notes(None).len(), 2);
        let vision = "model:\n  default: m\n  supports_vision: true\n";
        assert_eq!(media_notes(Some(vision)).len(), 1);
        let both = format!("{vision}stt:\n  enabled: false\n");
        assert!(media_notes(Some(&both)).is_empty());
        let off = "model:\n  supports_vision: false\nstt:\n  enabled: false\n";
        assert!(media_notes(Some(off))[0].contains("supports_vision"));
    }

    const PLATFORMS: &[(&str, &[&str])] = &[
        ("chatapp", &["CHATAPP_TOKEN"]),
        ("otherapp", &["OTHERAPP_TOKEN"]),
    ];

    fn keys(text: &str) -> Vec<String> {
        credentials(text, PLATFORMS)
            .into_iter()
            .map(|f| format!("{}:{}", f.platform, f.key))
            .collect()
    }

    #[test]
    fn a_credential_at_the_top_or_in_a_platforms_block_is_found() {
        assert_eq!(keys("CHATAPP_TOKEN: 123:abc\n"), ["chatapp:CHATAPP_TOKEN"]);
        assert_eq!(
            keys("\"OTHERAPP_TOKEN\": 'x'\n"),
            ["otherapp:OTHERAPP_TOKEN"]
        );
        let block = "model:\n  default: fake\nplatforms:\n  chatapp:\n    enabled: true\n    token: \"123:abc\"\n  otherapp:\n    extra:\n      token: x\n";
        assert_eq!(
            keys(block),
            [
                "chatapp:platforms.chatapp.token",
                "otherapp:platforms.otherapp.extra.token"
            ]
        );
        let nested = "gateway:\n  platforms:\n    chatapp:\n      api_key: k\n";
        assert_eq!(keys(nested), ["chatapp:gateway.platforms.chatapp.api_key"]);
        assert_eq!(
            keys("platforms:\n  chatapp: {enabled: true, token: \"1:a\"}\n"),
            ["chatapp:platforms.chatapp"]
        );
    }

    #[test]
    fn what_holds_no_credential_is_no_finding() {
        for text in [
            "",
            "CHATAPP_TOKEN:\n",
            "CHATAPP_TOKEN: \"\"\n",
            "CHATAPP_TOKEN: ~  \n",
            "# CHATAPP_TOKEN: x\n",
            "model:\n  CHATAPP_TOKEN: x\n",
            "platforms:\n  chatapp:\n    enabled: false\n    token:\n",
            "platforms:\n  whatsapp:\n    token: x\n",
            "platforms:\n  chatapp: {enabled: true}\n",
            "url: http://x:1\n",
            "platforms:\n  chatapp:\n    require_mention: true\nother:\n  token: x\n",
        ] {
            assert!(keys(text).is_empty(), "{text:?}: {:?}", keys(text));
        }
    }

    #[test]
    fn entries_are_read_by_key_path_and_line_skipping_lists_and_block_scalars() {
        let text = "a: 1 # note\nplatforms:\n  telegram:\n    allowed:\n      - x: 1\n      - y\n    token: 'it''s'\n    prompt: |\n      token: not a key\n    home_channel:\n      chat_id: \"-100\"\n  discord: {token: t}\n";
        let got: Vec<(String, Option<String>, usize)> = entries(text)
            .into_iter()
            .map(|e| (e.path.join("."), e.scalar(), e.line))
            .collect();
        let want = [
            ("a", Some("1"), 0),
            ("platforms", Some(""), 1),
            ("platforms.telegram", Some(""), 2),
            ("platforms.telegram.allowed", Some(""), 3),
            ("platforms.telegram.token", Some("it's"), 6),
            ("platforms.telegram.prompt", None, 7),
            ("platforms.telegram.home_channel", Some(""), 9),
            ("platforms.telegram.home_channel.chat_id", Some("-100"), 10),
            ("platforms.discord", None, 11),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(p, v, l)| ((*p).to_owned(), v.map(str::to_owned), *l))
            .collect();
        assert_eq!(got, want);
        assert_eq!(without_lines("a\nb\r\nc", &[1]), "a\nc");
        let e = &entries("l: [1, '2', x]\n")[0];
        assert_eq!(e.list().unwrap(), ["1", "2", "x"]);
        assert!(!format!("{:?}", entries("token: hush\n")).contains("hush"));
    }
}

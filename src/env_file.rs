//! The profile's `.env`: secrets for the gateway, as `KEY=VALUE` lines.
//!
//! Under systemd the unit's `EnvironmentFile=` has already loaded it; the gateway reads it too so
//! that a foreground run or a launchd job sees the same variables. Values already in the
//! environment win, so the unit's view is never overridden.

use std::path::Path;

use crate::bounded_read::{self, Owner, ReadError};

/// An environment variable's name as every manager and shell takes it:
/// `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    let head = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    head && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parse `.env` text: `KEY=VALUE` or `export KEY=VALUE`, `#` comments, and values optionally
/// wrapped in matching single or double quotes. Malformed lines are skipped and reported by
/// line number, never echoed (they may hold a secret).
pub fn parse(text: &str) -> (Vec<(String, String)>, Vec<usize>) {
    let mut vars = vec![];
    let mut bad = vec![];
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            bad.push(i + 1);
            continue;
        };
        let key = key.trim();
        if !is_name(key) {
            bad.push(i + 1);
            continue;
        }
        let value = value.trim();
        let value = [('"', '"'), ('\'', '\'')]
            .iter()
            .find_map(|(open, close)| {
                value
                    .strip_prefix(*open)
                    .and_then(|v| v.strip_suffix(*close))
            })
            .unwrap_or(value);
        vars.push((key.to_owned(), value.to_owned()));
    }
    (vars, bad)
}

/// The text of `path`, read the bounded way ([`bounded_read`]: no FIFO, symlink or file over
/// [`bounded_read::LIMIT`]), from an owner `owner` accepts; `None` when there is no file.
pub(crate) fn read(path: &Path, owner: Owner) -> Result<Option<String>, ReadError> {
    bounded_read::read_to_string(path, bounded_read::LIMIT, owner)
}

/// Load `path` into this process's environment without overriding what is set. The gateway
/// acts on these values (secrets, proxies), so the file must belong to the user it runs as,
/// or to root. A file that is refused is logged, with why and the fix, and not loaded: the
/// gateway then runs with the environment it was given, as it does without a `.env`.
///
/// Must run before any other thread exists: setting the environment is not thread-safe.
pub(crate) fn load(path: &Path) {
    let text = match read(path, Owner::SelfOrRoot) {
        Ok(Some(text)) => text,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!("not loading .env: {:#}", anyhow::Error::from(e));
            return;
        }
    };
    let (vars, bad) = parse(&text);
    for line in bad {
        tracing::warn!(file = %path.display(), line, "skipping a malformed line in .env");
    }
    for key in twice(&vars) {
        tracing::warn!(file = %path.display(), key, "a variable is set more than once in .env; the last line wins, as systemd's EnvironmentFile= reads it");
    }
    for (k, v) in last_wins(vars) {
        if std::env::var_os(&k).is_none() {
            std::env::set_var(k, v);
        }
    }
}

/// `vars` with one entry per name, the last line's value: what systemd's `EnvironmentFile=`
/// makes of a name set twice, so a foreground run, a launchd job and a reload read `.env`
/// the way the unit does.
pub(crate) fn last_wins(vars: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(vars.len());
    let mut at = std::collections::HashMap::new();
    for (k, v) in vars {
        match at.get(&k) {
            Some(&i) => out[i] = (k, v),
            None => {
                at.insert(k.clone(), out.len());
                out.push((k, v));
            }
        }
    }
    out
}

/// The names set more than once, each once.
fn twice(vars: &[(String, String)]) -> Vec<&str> {
    let mut seen = std::collections::HashSet::new();
    let mut twice = vec![];
    for (k, _) in vars {
        if !seen.insert(k.as_str()) && !twice.contains(&k.as_str()) {
            twice.push(k.as_str());
        }
    }
    twice
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_common_forms() {
        let (vars, bad) = super::parse(
            "# secrets\nQQ_BOT_SECRET=abc\nexport TOKEN=\"x y\"\nQ='1=2'\nnot a line\n1BAD=x\n",
        );
        assert_eq!(
            vars,
            vec![
                ("QQ_BOT_SECRET".into(), "abc".into()),
                ("TOKEN".into(), "x y".into()),
                ("Q".into(), "1=2".into()),
            ]
        );
        assert_eq!(bad, vec![5, 6]);
    }

    #[test]
    fn the_last_of_a_name_set_twice_wins_as_under_systemd() {
        let (vars, _) = super::parse("A=1\nB=2\nA=3\n");
        assert_eq!(super::twice(&vars), vec!["A"]);
        assert_eq!(
            super::last_wins(vars),
            vec![("A".into(), "3".into()), ("B".into(), "2".into())]
        );
    }
}

//! A renewed credential in `.env`, as a reload reads it.
//!
//! A credential variable is in the process's environment from its start (the unit's
//! `EnvironmentFile=` filled it, or the gateway itself from `.env` when run by hand, before any
//! thread), and a running process cannot safely change its environment. So a reload reads
//! `.env` again itself, and a variable whose line there differs from what `.env` said when
//! the run started (or that the process was never given) takes the file's new value: that
//! adapter alone restarts with it. A variable `.env` still sets as it did keeps the process's
//! value, so a foreground run's own `VAR=... hermes-svc gateway run` is not overridden; a
//! line removed from `.env` takes effect at the next restart. A name set twice takes its last
//! line, as `EnvironmentFile=` does.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::bounded_read::Owner;

/// `.env` as the run started with it, and the way to read it again.
pub(in crate::runtime) struct EnvFile {
    path: PathBuf,
    at_start: HashMap<String, String>,
}

impl EnvFile {
    pub(in crate::runtime) fn at_start(path: PathBuf) -> Self {
        let at_start = read(&path);
        Self { path, at_start }
    }

    /// The value of each variable as a reload now resolves it.
    pub(in crate::runtime) fn now(&self) -> impl Fn(&str) -> Option<String> + '_ {
        let now = read(&self.path);
        move |var| resolve(var, &self.at_start, &now, std::env::var(var).ok())
    }
}

/// `.env`'s variables, the last of a name winning; none when it is missing or refused (the
/// start logged why, and the process's values stand).
fn read(path: &std::path::Path) -> HashMap<String, String> {
    match crate::env_file::read(path, Owner::SelfOrRoot) {
        Ok(Some(text)) => crate::env_file::last_wins(crate::env_file::parse(&text).0)
            .into_iter()
            .collect(),
        Ok(None) | Err(_) => HashMap::new(),
    }
}

fn resolve(
    var: &str,
    at_start: &HashMap<String, String>,
    now: &HashMap<String, String>,
    process: Option<String>,
) -> Option<String> {
    match now.get(var) {
        Some(v) if at_start.get(var) != Some(v) || process.is_none() => Some(v.clone()),
        _ => process,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_line_changed_since_the_start_wins_and_an_unchanged_one_keeps_the_process_value() {
        let start = map(&[("T", "old")]);
        let p = |v: &str| Some(v.to_owned());
        assert_eq!(
            resolve("T", &start, &map(&[("T", "new")]), p("old")),
            p("new")
        );
        assert_eq!(
            resolve("T", &start, &map(&[("T", "old")]), p("given")),
            p("given")
        );
        assert_eq!(resolve("T", &start, &map(&[]), p("old")), p("old"));
        assert_eq!(resolve("N", &start, &map(&[("N", "x")]), None), p("x"));
        assert_eq!(resolve("N", &start, &map(&[]), None), None);
    }
}

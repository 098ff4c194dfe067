//! Which profile a unit serves, judged from what systemd says it runs.
//!
//! Legacy units use other names, omit `--profile` (and so serve whatever a sticky
//! `active_profile` file says), or run `--replace`. Recognising them by name alone would miss
//! exactly the units that cause the SIGTERM flap loop, so the judgement is made from the
//! `ExecStart` argv and the `Environment` systemd reports.

use std::path::{Path, PathBuf};

use crate::profile::{ProfileName, DEFAULT_PROFILE};

/// What a gateway unit's command line says about the profile it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServedProfile {
    /// `None` when `--profile` carries something that is not a valid profile name.
    pub(crate) profile: Option<ProfileName>,
    /// The argv had an explicit `--profile`.
    pub(crate) explicit: bool,
    /// The argv had `--replace`, which makes the gateway kill whoever holds the profile.
    pub(crate) replace: bool,
    /// `HERMES_HOME` from the unit's environment, if set there.
    pub(crate) hermes_home: Option<PathBuf>,
}

/// Inspect `ExecStart` argv lists and `Environment` entries. Returns `None` when no command
/// line runs `gateway run`, i.e. the unit is not a gateway at all.
///
/// `sticky` is the content of a legacy `active_profile` file, which a unit without `--profile`
/// falls back to.
pub(crate) fn served_profile(
    exec_argv: &[Vec<String>],
    environment: &[String],
    sticky: Option<&ProfileName>,
) -> Option<ServedProfile> {
    let argv = exec_argv
        .iter()
        .find(|argv| argv.windows(2).any(|w| w[0] == "gateway" && w[1] == "run"))?;
    let mut explicit = None;
    let mut replace = false;
    let mut words = argv.iter();
    while let Some(word) = words.next() {
        if word == "--replace" {
            replace = true;
        } else if word == "--profile" || word == "-p" {
            explicit = Some(words.next().cloned().unwrap_or_default());
        } else if let Some(v) = word.strip_prefix("--profile=") {
            explicit = Some(v.to_owned());
        }
    }
    let profile = match &explicit {
        Some(name) => ProfileName::parse(name).ok(),
        None => Some(
            sticky
                .cloned()
                .unwrap_or_else(|| ProfileName::parse(DEFAULT_PROFILE).expect("valid")),
        ),
    };
    let mut hermes_home = unit_hermes_home(environment);
    let mut profile = profile;
    // Hermes's own gateway (`hermes`, `python -m hermes_cli.main`) takes a `HERMES_HOME` of
    // `ROOT/profiles/NAME` as profile NAME's home, which is how its installer writes a named
    // profile's unit (hermes-agent 0.19.0, `hermes_constants.py`); hermes-svc's own units
    // name the root. Read Hermes's way, such a unit serves the profile ours would.
    let hermes_svc = argv.first().is_some_and(|a| a.ends_with("hermes-svc"));
    if let Some((root, name)) = hermes_home
        .as_deref()
        .filter(|_| !hermes_svc)
        .and_then(profile_home_parts)
    {
        if explicit.is_none() || profile.as_ref().map(ProfileName::as_str) == Some(name.as_str()) {
            profile = ProfileName::parse(&name).ok();
            hermes_home = Some(root);
        }
    }
    Some(ServedProfile {
        profile,
        explicit: explicit.is_some(),
        replace,
        hermes_home,
    })
}

/// `ROOT/profiles/NAME` as `(ROOT, NAME)`.
fn profile_home_parts(home: &Path) -> Option<(PathBuf, String)> {
    let name = home.file_name()?.to_str()?.to_owned();
    let profiles = home.parent()?;
    if profiles.file_name()? != "profiles" {
        return None;
    }
    Some((profiles.parent()?.to_path_buf(), name))
}

impl ServedProfile {
    /// Does this unit serve `profile` under `hermes_home`? A unit without `HERMES_HOME` uses
    /// `default_home` (`~/.hermes` of the user it runs as).
    pub(crate) fn serves(
        &self,
        profile: &ProfileName,
        hermes_home: &Path,
        default_home: &Path,
    ) -> bool {
        let home = self.hermes_home.as_deref().unwrap_or(default_home);
        self.profile.as_ref() == Some(profile) && same_home(home, hermes_home)
    }
}

/// `HERMES_HOME` from a unit's `Environment` entries. An empty value means "not set", as
/// [`crate::profile::hermes_home_from_env`] treats the process environment: a unit with
/// `Environment=HERMES_HOME=` runs with the default home, not with an empty path.
pub(crate) fn unit_hermes_home(environment: &[String]) -> Option<PathBuf> {
    environment
        .iter()
        .find_map(|e| e.strip_prefix("HERMES_HOME="))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// Whether two homes are one directory. Spellings differ (a trailing slash, a symlinked
/// parent), so existing paths are compared resolved; a home that does not exist (yet, or on
/// this machine) can only be compared as written.
pub(crate) fn same_home(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a.components().eq(b.components()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &str) -> Vec<Vec<String>> {
        vec![words.split(' ').map(str::to_owned).collect()]
    }

    #[test]
    fn legacy_unit_without_profile_follows_the_sticky_file() {
        let coder = ProfileName::parse("coder").unwrap();
        let s = served_profile(
            &argv("/usr/bin/hermes gateway run --replace"),
            &[],
            Some(&coder),
        )
        .unwrap();
        assert_eq!(s.profile.as_ref(), Some(&coder));
        assert!(!s.explicit && s.replace);
        let s = served_profile(&argv("/usr/bin/hermes gateway run"), &[], None).unwrap();
        assert_eq!(s.profile.unwrap().as_str(), "default");
    }

    #[test]
    fn explicit_profile_and_home() {
        let env = vec!["HERMES_HOME=/srv/h".to_owned()];
        let s = served_profile(&argv("/x gateway run --profile=bot"), &env, None).unwrap();
        let bot = ProfileName::parse("bot").unwrap();
        assert!(s.serves(&bot, Path::new("/srv/h"), Path::new("/root/.hermes")));
        assert!(!s.serves(&bot, Path::new("/srv/other"), Path::new("/root/.hermes")));
        assert!(served_profile(&argv("/bin/sleep 10"), &env, None).is_none());
    }

    #[test]
    fn hermess_own_unit_for_a_named_profile_names_the_profile_home() {
        let env = vec!["HERMES_HOME=/h/.hermes/profiles/coder".to_owned()];
        let coder = ProfileName::parse("coder").unwrap();
        let s = served_profile(
            &argv("/venv/bin/python -m hermes_cli.main --profile coder gateway run"),
            &env,
            None,
        )
        .unwrap();
        assert!(s.serves(&coder, Path::new("/h/.hermes"), Path::new("/root/.hermes")));
        // hermes-svc's own units name the root: the same variable means another home.
        let s = served_profile(
            &argv("/usr/bin/hermes-svc gateway run --profile coder"),
            &env,
            None,
        )
        .unwrap();
        assert!(!s.serves(&coder, Path::new("/h/.hermes"), Path::new("/root/.hermes")));
    }

    #[test]
    fn an_empty_unit_hermes_home_is_not_set() {
        let env = |v: &str| vec!["LANG=C".to_owned(), format!("HERMES_HOME={v}")];
        assert_eq!(
            unit_hermes_home(&env("/srv/h")),
            Some(PathBuf::from("/srv/h"))
        );
        assert_eq!(unit_hermes_home(&env("")), None);
        assert_eq!(unit_hermes_home(&["LANG=C".to_owned()]), None);
    }
}

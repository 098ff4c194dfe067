//! A unit as its files on the manager's search path define it, for a unit the manager has not
//! loaded.
//!
//! Asking the manager about a unit it has not loaded makes it load one (read and parse its
//! files, about 3.5 ms each) and unload it again soon after, so every doctor run over 1,000
//! stopped or disabled profiles paid seconds. Such a unit has no runtime state: it is inactive,
//! has no process and no restarts, and its files are the whole truth. So they are read here,
//! with the manager's own rules (`systemd::unit_syntax`), into the same [`UnitProperties`] the
//! manager would report. What this reader cannot reproduce faithfully comes back as
//! [`Unreadable`], and the caller asks the manager about that one unit instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::systemd::properties::ExecCommand;
use crate::systemd::scope::Scope;
use crate::systemd::unit_syntax::{assignments, words, Assignment, Specifiers, Unreadable};
use crate::systemd::UnitProperties;

/// The manager's unit search path (its `UnitPath`), each directory listed once.
#[derive(Debug, Default)]
pub(crate) struct SearchPath {
    dirs: Vec<PathBuf>,
    /// The entries of each directory, by position in `dirs`.
    entries: Vec<BTreeSet<String>>,
    /// Unit names with a symlink in some `.wants/`, `.requires/` or `.upholds/` directory,
    /// with whether every such link is under `/run` (enabled for this boot only).
    wanted: BTreeMap<String, bool>,
}

/// Where systemd looks for an executable named without a path (its `DEFAULT_PATH`).
const DEFAULT_PATH: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

fn list(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect()
}

fn is_runtime(dir: &Path) -> bool {
    dir.starts_with("/run")
}

impl SearchPath {
    pub(crate) fn read(dirs: Vec<String>) -> Self {
        let dirs: Vec<PathBuf> = dirs.into_iter().map(PathBuf::from).collect();
        let entries: Vec<BTreeSet<String>> = dirs.iter().map(|d| list(d)).collect();
        let mut wanted: BTreeMap<String, bool> = BTreeMap::new();
        for (dir, names) in dirs.iter().zip(&entries) {
            let deps = names.iter().filter(|n| {
                [".wants", ".requires", ".upholds"]
                    .iter()
                    .any(|s| n.ends_with(s))
            });
            for dep in deps {
                for unit in list(&dir.join(dep)) {
                    let runtime = wanted.entry(unit).or_insert(true);
                    *runtime &= is_runtime(dir);
                }
            }
        }
        Self {
            dirs,
            entries,
            wanted,
        }
    }

    /// Unit files whose names match any of `patterns`, leaving out templates
    /// (`name@.service`): a template is no unit of its own.
    pub(crate) fn unit_names(&self, patterns: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = self
            .entries
            .iter()
            .flatten()
            .filter(|n| patterns.iter().any(|p| glob_matches(p, n)) && !n.contains("@."))
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The first directory on the path that holds `name`.
    fn find(&self, name: &str) -> Option<&Path> {
        self.dirs
            .iter()
            .zip(&self.entries)
            .find(|(_, e)| e.contains(name))
            .map(|(d, _)| d.as_path())
    }

    /// The drop-ins that apply to `name`, in the order the manager applies them: from
    /// `name.d/`, the dash-truncated prefixes' directories (`a-b-.service.d/`, `a-.service.d/`)
    /// and `service.d/`; a file name found in two directories counts once, from the earlier
    /// one; then all sorted by file name.
    fn dropins(&self, name: &str) -> Vec<PathBuf> {
        let Some((stem, suffix)) = name.rsplit_once('.') else {
            return vec![];
        };
        let mut dirs = vec![format!("{name}.d")];
        for (i, _) in stem.match_indices('-').rev() {
            dirs.push(format!("{}.{suffix}.d", &stem[..=i]));
        }
        dirs.push(format!("{suffix}.d"));
        let mut found: BTreeMap<String, PathBuf> = BTreeMap::new();
        for (dir, entries) in self.dirs.iter().zip(&self.entries) {
            for d in dirs.iter().filter(|d| entries.contains(*d)) {
                for file in list(&dir.join(d))
                    .into_iter()
                    .filter(|f| f.ends_with(".conf"))
                {
                    let path = dir.join(d).join(&file);
                    found.entry(file).or_insert(path);
                }
            }
        }
        found.into_values().collect()
    }
}

/// Shell-style matching with `*` as the only wildcard, which is all unit patterns here use.
pub(crate) fn glob_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| glob_matches(rest, &tail[i..]))
        }
    }
}

/// What specifiers mean for one manager, before a unit adds its own names.
pub(crate) fn manager_specifiers(scope: Scope) -> Vec<(char, String)> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| v.starts_with('/'));
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    let short = host.split('.').next().unwrap_or_default().to_owned();
    let mut out = vec![
        ('H', host),
        ('l', short),
        ('V', "/var/tmp".to_owned()),
        ('T', env("TMPDIR").unwrap_or_else(|| "/tmp".to_owned())),
    ];
    match scope {
        Scope::System => out.extend([
            ('h', "/root".to_owned()),
            ('u', "root".to_owned()),
            ('U', "0".to_owned()),
            ('g', "root".to_owned()),
            ('G', "0".to_owned()),
            ('t', "/run".to_owned()),
            ('S', "/var/lib".to_owned()),
            ('C', "/var/cache".to_owned()),
            ('E', "/etc".to_owned()),
            ('L', "/var/log".to_owned()),
        ]),
        Scope::User => {
            let uid = nix::unistd::getuid();
            let gid = nix::unistd::getgid();
            let user = nix::unistd::User::from_uid(uid).ok().flatten();
            let group = nix::unistd::Group::from_gid(gid).ok().flatten();
            let home = env("HOME")
                .or_else(|| Some(user.as_ref()?.dir.to_str()?.to_owned()))
                .unwrap_or_default();
            let state = env("XDG_STATE_HOME").unwrap_or_else(|| format!("{home}/.local/state"));
            out.extend([
                ('u', user.map(|u| u.name).unwrap_or_else(|| uid.to_string())),
                ('U', uid.to_string()),
                (
                    'g',
                    group.map(|g| g.name).unwrap_or_else(|| gid.to_string()),
                ),
                ('G', gid.to_string()),
                ('t', env("XDG_RUNTIME_DIR").unwrap_or_default()),
                (
                    'C',
                    env("XDG_CACHE_HOME").unwrap_or_else(|| format!("{home}/.cache")),
                ),
                (
                    'E',
                    env("XDG_CONFIG_HOME").unwrap_or_else(|| format!("{home}/.config")),
                ),
                ('L', format!("{state}/log")),
                ('S', state),
                ('h', home),
            ])
        }
    }
    out
}

/// The properties the manager would report for `name` if it loaded it now.
pub(crate) fn read(
    search: &SearchPath,
    manager: &[(char, String)],
    name: &str,
) -> Result<UnitProperties, Unreadable> {
    if name.contains('@') || name.contains('\\') {
        return Err(Unreadable::Other(format!(
            "{name} is a template instance or escaped"
        )));
    }
    let dir = search
        .find(name)
        .ok_or_else(|| Unreadable::Other(format!("{name} is not on the search path")))?;
    let listed = dir.join(name);
    let (id, fragment) = resolve(search, name, &listed)?;
    let Some(fragment) = fragment else {
        return Ok(UnitProperties {
            id: Some(id),
            load_state: Some(
                if is_runtime(dir) {
                    "masked-runtime"
                } else {
                    "masked"
                }
                .into(),
            ),
            active_state: Some("inactive".into()),
            sub_state: Some("dead".into()),
            unit_file_state: Some("masked".into()),
            ..UnitProperties::default()
        });
    };
    let dropins = search.dropins(&id);
    let stem = id
        .rsplit_once('.')
        .map_or(id.as_str(), |(s, _)| s)
        .to_owned();
    let last = stem.rsplit('-').next().unwrap_or(&stem).to_owned();
    let frag = fragment.to_string_lossy().into_owned();
    let frag_dir = fragment
        .parent()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    let specifiers = Specifiers::new(manager.iter().cloned().chain([
        ('n', id.clone()),
        ('N', stem.clone()),
        ('p', stem.clone()),
        ('P', stem.clone()),
        ('i', String::new()),
        ('I', String::new()),
        ('j', last.clone()),
        ('J', last),
        ('y', frag),
        ('Y', frag_dir),
    ]));
    let mut service = Service::default();
    let mut install = false;
    // A fragment that went away since the listing is the manager's to call gone.
    let fragment_text = std::fs::read_to_string(&fragment)
        .map_err(|e| Unreadable::Other(format!("{}: {e}", fragment.display())))?;
    let texts = dropins
        .iter()
        // A drop-in linked to /dev/null masks itself; an unreadable one the manager skips too.
        .map(|d| std::fs::read_to_string(d).unwrap_or_default());
    for text in std::iter::once(fragment_text).chain(texts) {
        for a in assignments(&text) {
            match a.section.as_str() {
                "Service" => service.apply(&a, &specifiers)?,
                "Install" => {
                    install |= matches!(
                        a.key.as_str(),
                        "WantedBy" | "RequiredBy" | "UpheldBy" | "Alias" | "Also"
                    ) && !a.value.is_empty()
                }
                _ => {}
            }
        }
    }
    let unit_file_state = match search.wanted.get(&id).or_else(|| search.wanted.get(name)) {
        Some(true) => "enabled-runtime",
        Some(false) => "enabled",
        None if install => "disabled",
        None => "static",
    };
    Ok(UnitProperties {
        id: Some(id),
        load_state: Some("loaded".into()),
        active_state: Some("inactive".into()),
        sub_state: Some("dead".into()),
        unit_file_state: Some(unit_file_state.into()),
        fragment_path: Some(fragment.to_string_lossy().into_owned()),
        drop_in_paths: Some(
            dropins
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
        ),
        need_daemon_reload: Some(false),
        inactive_exit_timestamp: Some(0),
        invocation_id: Some(vec![]),
        main_pid: Some(0),
        n_restarts: Some(0),
        result: Some("success".into()),
        status_text: Some(String::new()),
        environment: Some(service.environment),
        watchdog_usec: Some(service.watchdog_usec),
        restart: Some(service.restart),
        service_type: Some(service.service_type),
        exec_start: Some(service.exec_start),
    })
}

/// The unit's own name and its fragment file: an alias (a link to another unit's file on the
/// path) is that unit, and a link to `/dev/null` is a masked unit, with no fragment. A link
/// out of the search path (`systemctl link`) is left to the manager, whose idea of such a
/// unit's fragment this reader does not reproduce.
fn resolve(
    search: &SearchPath,
    name: &str,
    listed: &Path,
) -> Result<(String, Option<PathBuf>), Unreadable> {
    let target = match std::fs::read_link(listed) {
        Ok(t) => t,
        Err(_) => return Ok((name.to_owned(), Some(listed.to_owned()))),
    };
    let target = listed.parent().unwrap_or(Path::new("/")).join(target);
    if target == Path::new("/dev/null") {
        return Ok((name.to_owned(), None));
    }
    let target_name = target
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if target_name == name
        && search
            .dirs
            .iter()
            .any(|d| target.parent() == Some(d.as_path()))
    {
        return Ok((name.to_owned(), Some(listed.to_owned())));
    }
    // An alias: the unit is the one it links to, found on the path like any other.
    match search.find(target_name) {
        Some(dir) if std::fs::read_link(dir.join(target_name)).is_err() => {
            Ok((target_name.to_owned(), Some(dir.join(target_name))))
        }
        _ => Err(Unreadable::Other(format!(
            "{name} links to {}, which this reader does not follow",
            target.display()
        ))),
    }
}

/// The `[Service]` settings doctor and status read, as the manager would hold them.
struct Service {
    exec_start: Vec<ExecCommand>,
    environment: Vec<String>,
    watchdog_usec: u64,
    restart: String,
    service_type: String,
}

impl Default for Service {
    fn default() -> Self {
        Self {
            exec_start: vec![],
            environment: vec![],
            // What the manager reports for no watchdog.
            watchdog_usec: u64::MAX,
            restart: "no".into(),
            service_type: "simple".into(),
        }
    }
}

impl Service {
    fn apply(&mut self, a: &Assignment, specifiers: &Specifiers) -> Result<(), Unreadable> {
        match a.key.as_str() {
            "ExecStart" if a.value.is_empty() => self.exec_start.clear(),
            "ExecStart" => self.exec_start.extend(exec_commands(&a.value, specifiers)?),
            "Environment" if a.value.is_empty() => self.environment.clear(),
            "Environment" => {
                for word in words(&a.value)? {
                    let word = specifiers.expand(&word)?;
                    let Some((key, _)) = word.split_once('=') else {
                        continue;
                    };
                    if crate::systemd::escape::env_name(key).is_err() {
                        continue;
                    }
                    let prefix = format!("{key}=");
                    match self.environment.iter_mut().find(|e| e.starts_with(&prefix)) {
                        Some(e) => *e = word,
                        None => self.environment.push(word),
                    }
                }
            }
            "WatchdogSec" => self.watchdog_usec = time_span_usec(&a.value)?,
            "Restart" if !a.value.is_empty() => self.restart = a.value.clone(),
            "Type" if !a.value.is_empty() => self.service_type = a.value.clone(),
            _ => {}
        }
        Ok(())
    }
}

/// One `ExecStart=` value: one command, or several separated by a lone `;`. Each word is
/// unquoted and unescaped first, then its specifiers are expanded, as `config_parse_exec`
/// does; `$` is left for the manager to expand when it runs the command, so it reads as
/// written (`$$` stays `$$`), as it does over D-Bus.
fn exec_commands(value: &str, specifiers: &Specifiers) -> Result<Vec<ExecCommand>, Unreadable> {
    let mut out = vec![];
    let mut all = words(value)?;
    // A bare `;` separates commands, and `\;`, `";"` or `';'` is an argument `;`: `words`
    // unquotes all of them alike, so a value that holds both kinds is left to the manager.
    if all.iter().any(|w| w == ";") && [r"\;", "\";\"", "';'"].iter().any(|q| value.contains(q)) {
        return Err(Unreadable::Other("a quoted ; in ExecStart".into()));
    }
    all.push(";".into());
    let mut command: Vec<String> = vec![];
    for word in all {
        if word != ";" {
            command.push(word);
            continue;
        }
        if command.is_empty() {
            continue;
        }
        let first = command.remove(0);
        let mut f = first.as_str();
        let (mut separate_argv0, mut ignore) = (false, false);
        while let Some(rest) = f.strip_prefix(['-', '@', '+', '!', ':']) {
            separate_argv0 |= f.starts_with('@');
            ignore |= f.starts_with('-');
            f = rest;
        }
        let path = specifiers.expand(f)?;
        if path.is_empty()
            || path.ends_with('/')
            || path
                .chars()
                .any(|c| c.is_control() || matches!(c, '"' | '\'' | '\\'))
        {
            return Err(Unreadable::Other(format!(
                "ExecStart path {path:?} the manager would refuse"
            )));
        }
        let path = if path.starts_with('/') {
            path
        } else {
            DEFAULT_PATH
                .iter()
                .map(|d| format!("{d}/{path}"))
                .find(|p| Path::new(p).exists())
                .ok_or_else(|| Unreadable::Other(format!("{path} is not on systemd's PATH")))?
        };
        let mut argv = vec![];
        if !separate_argv0 {
            argv.push(path.clone());
        }
        for w in std::mem::take(&mut command) {
            argv.push(specifiers.expand(&w)?);
        }
        if argv.is_empty() {
            return Err(Unreadable::Other("ExecStart has no argv[0]".into()));
        }
        out.push((path, argv, ignore, 0, 0, 0, 0, 0, 0, 0));
    }
    Ok(out)
}

/// A systemd time span (`30`, `1.5`, `500ms`, `1min 30s`, `infinity`) in microseconds; an
/// empty value resets the setting, which for `WatchdogSec=` reads back as infinity.
fn time_span_usec(value: &str) -> Result<u64, Unreadable> {
    let v = value.trim();
    if v.is_empty() || v == "infinity" {
        return Ok(u64::MAX);
    }
    if let Ok(secs) = v.parse::<f64>() {
        if secs >= 0.0 && secs.is_finite() {
            return Ok((secs * 1e6).round() as u64);
        }
    }
    humantime::parse_duration(v)
        .ok()
        .and_then(|d| u64::try_from(d.as_micros()).ok())
        .ok_or_else(|| Unreadable::Other(format!("time span {v:?}")))
}

#[cfg(test)]
mod tests;

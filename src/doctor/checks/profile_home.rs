//! Findings about a profile's home on disk: its credentials, pid file, `.env` permissions
//! and `gateway.toml`. A dead pid file and a readable `.env` are fixed here; the rest is a
//! person's choice. They read the profile homes alone ([`Homes`]), so both managers run them.

use std::collections::BTreeMap;

use crate::doctor::checks::{profile_finding, Check};
use crate::doctor::fix::{Action, Planner};
use crate::doctor::homes::{Homes, PidProcess, ProfileSnap};
use crate::doctor::{Finding, Severity};
use crate::service::served_profile::same_home;

/// HSV006: two profiles with one bot token: the second gateway cannot take the token lock.
/// Only the short hash is shown; the token never is.
pub(crate) const SHARED_TOKEN: Check<Homes> = Check {
    id: "HSV006",
    find: shared_token,
    fix: |p, f| p.skip(f, "which profile keeps the credential is your choice"),
};

fn shared_token(s: &Homes) -> Vec<Finding> {
    let mut by_hash: BTreeMap<&str, Vec<(&ProfileSnap, &str)>> = BTreeMap::new();
    for p in &s.profiles {
        for (adapter, hash) in &p.token_hashes {
            by_hash.entry(hash).or_default().push((p, adapter));
        }
    }
    let mut out = vec![];
    for (hash, users) in by_hash {
        for (p, adapter) in &users {
            let others: Vec<String> = users
                .iter()
                .filter(|(o, _)| o.name != p.name || !same_home(&o.hermes_home, &p.hermes_home))
                .map(|(o, _)| o.name.to_string())
                .collect();
            if others.is_empty() {
                continue;
            }
            out.push(profile_finding(
                SHARED_TOKEN.id,
                Severity::Error,
                p,
                format!(
                    "adapter {adapter} uses the same bot credential (hash {hash}) as profile {}, so only one gateway can connect.",
                    others.join(", ")
                ),
                format!("${{EDITOR:-vi}} {}", p.env_path.display()),
            ));
        }
    }
    out
}

/// HSV007: a pid file that is stale, names a foreign process, or lies in one profile's home
/// while its process serves another (the field's PID misrouting).
pub(crate) const PID_FILE: Check<Homes> = Check {
    id: "HSV007",
    find: pid_file,
    fix: fix_pid_file,
};

fn pid_file(s: &Homes) -> Vec<Finding> {
    let mut out = vec![];
    for p in &s.profiles {
        let Some((rec, proc)) = &p.pid else { continue };
        let rm = format!("rm {}", p.pid_path.display());
        let owner = s.services.iter().find(|u| u.pid == Some(rec.pid));
        let finding = match proc {
            PidProcess::Dead => Some((
                Severity::Warn,
                format!("gateway.pid names pid {}, which is not running.", rec.pid),
            )),
            PidProcess::Alive { .. } | PidProcess::AliveUnreadable
                if rec.profile != p.name.as_str() || !same_home(&rec.home, &p.home) =>
            {
                Some((
                    Severity::Error,
                    format!(
                        "gateway.pid in this profile's home names pid {} of profile {} ({}).",
                        rec.pid,
                        rec.profile,
                        rec.home.display()
                    ),
                ))
            }
            PidProcess::Alive { .. } | PidProcess::AliveUnreadable => {
                match owner.and_then(|u| Some((u, u.serves.clone()?))) {
                    Some((u, served)) if served != p.name => Some((
                        Severity::Error,
                        format!(
                            "gateway.pid names pid {}, which is {} serving profile {served}.",
                            rec.pid, u.name
                        ),
                    )),
                    Some(_) => None,
                    None => match proc {
                        PidProcess::Alive { cmdline } if !cmdline.contains("gateway") => Some((
                            Severity::Warn,
                            format!(
                                "gateway.pid names pid {}, a process that is not a gateway.",
                                rec.pid
                            ),
                        )),
                        _ => None,
                    },
                }
            }
        };
        if let Some((severity, message)) = finding {
            out.push(profile_finding(PID_FILE.id, severity, p, message, rm));
        }
    }
    out
}

/// Remove a pid file only when its process is dead; a live one may be anyone's.
fn fix_pid_file(p: &mut Planner, f: &Finding) {
    let mut any = false;
    for profile in p
        .homes
        .profiles
        .iter()
        .filter(|x| x.name.as_str() == f.subject)
    {
        match &profile.pid {
            Some((rec, PidProcess::Dead)) => {
                any = true;
                if p.first_change_of(&profile.pid_path) {
                    let action = Action::RemovePidFile {
                        path: profile.pid_path.clone(),
                        pid: rec.pid,
                    };
                    p.fix(f, f.subject.clone(), action);
                }
            }
            Some((_, PidProcess::Alive { .. } | PidProcess::AliveUnreadable)) => p.skip(
                f,
                "the process it names is alive; doctor never removes a live pid file or kills a process it cannot prove belongs to the profile",
            ),
            None => {}
        }
    }
    if !any && !p.is_skipped(f) {
        p.skip(f, "the pid file changed since it was read");
    }
}

/// HSV012: `.env` holds the bot's secrets and must be readable by its owner only.
pub(crate) const ENV_MODE: Check<Homes> = Check {
    id: "HSV012",
    find: env_mode,
    fix: fix_env_mode,
};

fn env_mode(s: &Homes) -> Vec<Finding> {
    s.profiles
        .iter()
        .filter_map(|p| {
            let mode = p.env_mode?;
            (mode & 0o077 != 0).then(|| {
                profile_finding(
                    ENV_MODE.id,
                    Severity::Warn,
                    p,
                    format!(
                        "{} has mode {mode:04o}, so other accounts can read the bot's secrets.",
                        p.env_path.display()
                    ),
                    format!("chmod 600 {}", p.env_path.display()),
                )
            })
        })
        .collect()
}

fn fix_env_mode(p: &mut Planner, f: &Finding) {
    let leaky: Vec<_> = p
        .homes
        .profiles
        .iter()
        .filter(|x| x.name.as_str() == f.subject && x.env_mode.is_some_and(|m| m & 0o077 != 0))
        .collect();
    if leaky.is_empty() {
        p.skip(f, "the .env file changed since it was read");
    }
    for profile in leaky {
        if p.first_change_of(&profile.env_path) {
            let action = Action::ChmodEnv {
                path: profile.env_path.clone(),
            };
            p.fix(f, f.subject.clone(), action);
        }
    }
}

/// HSV015: a gateway.toml that does not load makes the gateway exit 78 at every start.
pub(crate) const CONFIG: Check<Homes> = Check {
    id: "HSV015",
    find: config,
    fix: |p, f| p.skip(f, "only a person can correct gateway.toml"),
};

fn config(s: &Homes) -> Vec<Finding> {
    s.profiles
        .iter()
        .filter_map(|p| {
            let e = p.config_error.as_deref()?;
            Some(profile_finding(
                CONFIG.id,
                Severity::Error,
                p,
                format!("gateway.toml does not load: {e}."),
                format!("${{EDITOR:-vi}} {}", p.config_path.display()),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::checks::fixtures::*;
    use crate::doctor::checks::{all, plan};

    #[test]
    fn hsv006_shared_token_shows_only_the_hash() {
        let mut a = profile("a");
        let mut b = profile("b");
        a.token_hashes = vec![("qq".into(), "abcdef012345".into())];
        b.token_hashes = vec![("qq".into(), "abcdef012345".into())];
        let f = shared_token(&homes(&[], vec![a.clone(), b.clone()]));
        assert_eq!(
            ids(&f),
            [("HSV006", Severity::Error), ("HSV006", Severity::Error)]
        );
        assert!(f[0].message.contains("abcdef012345") && f[0].message.contains("profile b"));
        b.token_hashes = vec![("qq".into(), "999999999999".into())];
        assert!(shared_token(&homes(&[], vec![a, b])).is_empty());
    }

    #[test]
    fn hsv007_pid_file_stale_foreign_or_misrouted() {
        let alive = PidProcess::Alive {
            cmdline: "/usr/bin/hermes-svc gateway run --profile a".into(),
        };
        let mut a = profile("a");
        // Healthy: the unit's MainPID and the record agree.
        a.pid = Some((pid_record(&a, 4242, "a"), alive.clone()));
        assert!(pid_file(&homes(&[ours("a")], vec![a.clone()])).is_empty());
        // Dead.
        a.pid = Some((pid_record(&a, 4242, "a"), PidProcess::Dead));
        assert_eq!(
            ids(&pid_file(&homes(&[], vec![a.clone()]))),
            [("HSV007", Severity::Warn)]
        );
        // Foreign process.
        a.pid = Some((
            pid_record(&a, 77, "a"),
            PidProcess::Alive {
                cmdline: "sleep 100".into(),
            },
        ));
        assert_eq!(
            ids(&pid_file(&homes(&[], vec![a.clone()]))),
            [("HSV007", Severity::Warn)]
        );
        // Lies in a's home, but the process is b's unit.
        a.pid = Some((pid_record(&a, 4242, "a"), alive.clone()));
        let f = pid_file(&homes(&[ours("b")], vec![a.clone()]));
        assert_eq!(ids(&f), [("HSV007", Severity::Error)]);
        assert!(f[0].message.contains("profile b"));
        // The record itself names another profile.
        a.pid = Some((pid_record(&a, 4242, "b"), alive));
        assert_eq!(
            ids(&pid_file(&homes(&[], vec![a]))),
            [("HSV007", Severity::Error)]
        );
    }

    #[test]
    fn hsv007_a_live_process_whose_command_line_cannot_be_read_is_neither_dead_nor_foreign() {
        // What macOS gives: alive, command line unknown.
        let mut a = profile("a");
        a.pid = Some((pid_record(&a, 4242, "a"), PidProcess::AliveUnreadable));
        assert!(pid_file(&homes(&[], vec![a.clone()])).is_empty());
        // The record alone still shows a misrouted file, and the fix leaves a live one alone.
        a.pid = Some((pid_record(&a, 4242, "b"), PidProcess::AliveUnreadable));
        let s = snap(vec![], vec![a]);
        let fs = all(&s);
        assert_eq!(ids(&pid_file(&s.homes)), [("HSV007", Severity::Error)]);
        let p = plan(&s, &fs, 1000);
        assert!(p.fixes.is_empty(), "{p:?}");
        assert!(p
            .skipped
            .iter()
            .any(|k| k.id == "HSV007" && k.why.contains("alive")));
    }

    #[test]
    fn hsv012_env_readable_by_others() {
        let mut p = profile("a");
        assert!(env_mode(&homes(&[], vec![p.clone()])).is_empty());
        p.env_mode = Some(0o640);
        let f = env_mode(&homes(&[], vec![p]));
        assert_eq!(ids(&f), [("HSV012", Severity::Warn)]);
        assert!(f[0].fix.starts_with("chmod 600 "));
    }

    #[test]
    fn hsv015_invalid_config() {
        let mut p = profile("a");
        assert!(config(&homes(&[], vec![p.clone()])).is_empty());
        p.config_error = Some("gateway.toml:3: unknown key".into());
        assert_eq!(
            ids(&config(&homes(&[], vec![p]))),
            [("HSV015", Severity::Error)]
        );
    }

    #[test]
    fn a_dead_pid_file_is_removed_and_an_alive_one_never() {
        let mut a = profile("a");
        a.pid = Some((pid_record(&a, 4242, "a"), PidProcess::Dead));
        let p = planned(&snap(vec![], vec![a.clone()]));
        assert_eq!(fix_ids(&p), [("HSV007", "rm-pid")]);
        // Alive, foreign or misrouted: never removed.
        for (rec_profile, cmdline, units) in [
            ("a", "sleep 100", vec![]),
            ("b", "/usr/bin/hermes-svc gateway run --profile b", vec![]),
            (
                "a",
                "/usr/bin/hermes-svc gateway run --profile b",
                vec![ours("b")],
            ),
        ] {
            a.pid = Some((
                pid_record(&a, 4242, rec_profile),
                PidProcess::Alive {
                    cmdline: cmdline.into(),
                },
            ));
            let s = snap(units, vec![a.clone()]);
            let fs = all(&s);
            assert!(fs.iter().any(|f| f.id == "HSV007"), "{fs:?}");
            let p = plan(&s, &fs, 1000);
            assert!(p.fixes.is_empty(), "{p:?}");
            assert!(p
                .skipped
                .iter()
                .any(|k| k.id == "HSV007" && k.why.contains("alive")));
        }
    }

    #[test]
    fn a_leaky_env_is_chmodded() {
        let mut a = profile("a");
        a.env_mode = Some(0o644);
        let p = planned(&snap(vec![], vec![a.clone()]));
        assert_eq!(fix_ids(&p), [("HSV012", "chmod")]);
        assert_eq!(p.fixes[0].action, Action::ChmodEnv { path: a.env_path });
    }
}

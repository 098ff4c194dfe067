//! `status`: every installed profile's unit, from one bus connection, and every gateway that
//! holds a profile without a unit of ours running it (started by hand, say): the kernel's
//! word on who serves a profile is its instance lock, whatever the manager lists. Each row's
//! health section, shared with launchd's `status`, is [`health`].

pub(crate) mod health;
pub(crate) mod launchd;

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Serialize;

use crate::ansi::{paint, Paint};
use crate::bounded_read::Owner;
use crate::lock_holder::{LockHolder, LockLookup};
use crate::profile::{profile_of_unit, Profile, ProfileName, UNIT_PREFIX, UNIT_SUFFIX};
use crate::safe_text::visible;
use crate::service::definition::Provenance;
use crate::service::served_profile::unit_hermes_home;
use crate::status::health::{HealthSection, Writer};
use crate::systemd::linger::Linger;
use crate::systemd::scope::Scope;
use crate::systemd::unit_file;
use crate::systemd::{Fact, Systemd, SystemdError, UnitProperties};

/// One profile's unit as the manager and the disk see it. This is the `--json` schema
/// (docs/status.md); fields are only ever added.
#[derive(Debug, Serialize)]
pub(crate) struct UnitStatus {
    pub(crate) profile: ProfileName,
    pub(crate) unit: String,
    pub(crate) scope: Scope,
    pub(crate) load_state: String,
    pub(crate) active_state: String,
    pub(crate) sub_state: String,
    pub(crate) unit_file_state: String,
    pub(crate) main_pid: u32,
    pub(crate) n_restarts: u32,
    pub(crate) result: String,
    pub(crate) invocation_id: Option<String>,
    pub(crate) status_text: String,
    pub(crate) fragment_path: Option<String>,
    pub(crate) drop_in_paths: Vec<String>,
    /// `pristine`, `edited` or `foreign`; `null` when the unit file is missing.
    pub(crate) provenance: Option<Provenance>,
    pub(crate) edited: bool,
    pub(crate) need_daemon_reload: bool,
    /// The gateway's own health report (`health`, `health_error`), judged against the unit.
    #[serde(flatten)]
    pub(crate) section: HealthSection,
}

/// The state file of the profile a unit serves, judged against that unit; nothing when the
/// unit's home cannot be known.
fn section_of_unit(profile: &ProfileName, scope: Scope, p: &UnitProperties) -> HealthSection {
    let Some(hermes_home) = home_of_unit(p) else {
        return HealthSection::default();
    };
    let Ok(profile) = Profile::new(profile.clone(), hermes_home) else {
        return HealthSection::default();
    };
    let writer = Writer::Unit {
        active_state: p.active_state.as_deref().unwrap_or_default(),
        main_pid: p.main_pid.unwrap_or(0),
    };
    HealthSection::read(&profile.state_file(), owner(scope), writer)
}

/// Whose a profile's files may be. In user scope `status` runs as the profile's user, so they
/// must be that user's or root's; in system scope root looks at another account's profile,
/// whose files belong to that account (the owner of the profile's directory).
fn owner(scope: Scope) -> Owner {
    match scope {
        Scope::User => Owner::SelfOrRoot,
        Scope::System => Owner::SelfRootOrDirectory,
    }
}

/// The `HERMES_HOME` a unit runs with: its `Environment=`, else the default home.
fn home_of_unit(p: &UnitProperties) -> Option<PathBuf> {
    unit_hermes_home(p.environment.as_deref().unwrap_or_default())
        .or_else(|| crate::profile::default_hermes_home().ok())
}

/// A gateway that holds a profile's instance lock while no gateway unit runs it: started by
/// hand (`gateway run` in a terminal), or by a service outside our unit names. The profile's
/// own unit cannot start while it runs (doctor reports it as HSV016). Part of the `--json`
/// schema (docs/status.md); fields are only ever added.
#[derive(Debug, Serialize)]
pub(crate) struct Unmanaged {
    pub(crate) profile: ProfileName,
    /// The `HERMES_HOME` the profile is in.
    pub(crate) hermes_home: PathBuf,
    /// The process holding the profile's lock, from the kernel's lock table.
    pub(crate) pid: u32,
    /// Always `false`: no manager restarts it, feeds its watchdog or stops it at shutdown.
    pub(crate) managed: bool,
    /// The service whose cgroup the process is in, when one is (not a gateway unit of ours);
    /// `null` when it was started by hand.
    pub(crate) service: Option<String>,
    /// Its command line; `""` when it cannot be read.
    pub(crate) cmdline: String,
    /// The gateway's own health report (`health`, `health_error`), judged against this
    /// process: current only when it wrote it.
    #[serde(flatten)]
    pub(crate) section: HealthSection,
}

impl Unmanaged {
    fn new(profile: &Profile, holder: LockHolder, scope: Scope) -> Self {
        let writer = Writer::LockHolder { pid: holder.pid };
        let section = HealthSection::read(&profile.state_file(), owner(scope), writer);
        Unmanaged {
            profile: profile.name().clone(),
            hermes_home: profile.hermes_home().to_owned(),
            pid: holder.pid,
            managed: false,
            service: holder.unit,
            cmdline: holder.cmdline,
            section,
        }
    }
}

/// Every gateway holding a profile in one of `homes` (`only`'s, if given) that no gateway unit
/// runs. A holder in the cgroup of a `hermes-gateway-NAME.service`, of this manager or the
/// other one, is managed; `main_pids` (this manager's) spare the kernel's lock table the usual
/// case. On macOS there is no lock table to read, and none is found.
fn unmanaged(
    homes: BTreeSet<PathBuf>,
    only: Option<&ProfileName>,
    main_pids: BTreeSet<u32>,
    scope: Scope,
) -> Vec<Unmanaged> {
    let locks = LockLookup::new(main_pids);
    let mut seen = BTreeSet::new();
    let mut out = vec![];
    for home in homes.into_iter().filter(|h| !h.as_os_str().is_empty()) {
        for name in crate::profile::names_in(&home) {
            if only.is_some_and(|o| *o != name) {
                continue;
            }
            let Ok(profile) = Profile::new(name, home.clone()) else {
                continue;
            };
            // A unit's main process is that unit's gateway, managed.
            let Some(holder) = locks.other_holder(&profile.lock_file()) else {
                continue;
            };
            let managed = holder
                .unit
                .as_deref()
                .is_some_and(|u| profile_of_unit(u).is_some());
            // One process holds one profile: a home reached by two spellings is listed once.
            if managed || !seen.insert(holder.pid) {
                continue;
            }
            out.push(Unmanaged::new(&profile, holder, scope));
        }
    }
    out.sort_by(|a, b| (&a.profile, a.pid).cmp(&(&b.profile, b.pid)));
    out
}

#[derive(Debug, Serialize)]
pub(crate) struct StatusReport {
    pub(crate) scope: Scope,
    /// Whether user units survive logout; `unknown` without a system bus.
    pub(crate) linger: Option<Linger>,
    pub(crate) units: Vec<UnitStatus>,
    /// Gateways that hold a profile while no unit of ours runs them.
    pub(crate) unmanaged: Vec<Unmanaged>,
}

fn unit_status(profile: ProfileName, unit: String, scope: Scope, p: UnitProperties) -> UnitStatus {
    let fragment_path = p.fragment_path.clone().filter(|f| !f.is_empty());
    let section = section_of_unit(&profile, scope, &p);
    let provenance = fragment_path
        .as_deref()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .map(|text| unit_file::provenance(&text));
    UnitStatus {
        profile,
        unit,
        scope,
        invocation_id: p.invocation_id_hex(),
        load_state: p.load_state.unwrap_or_default(),
        active_state: p.active_state.unwrap_or_default(),
        sub_state: p.sub_state.unwrap_or_default(),
        unit_file_state: p.unit_file_state.unwrap_or_default(),
        main_pid: p.main_pid.unwrap_or(0),
        n_restarts: p.n_restarts.unwrap_or(0),
        result: p.result.unwrap_or_default(),
        status_text: p.status_text.unwrap_or_default(),
        drop_in_paths: p.drop_in_paths.unwrap_or_default(),
        fragment_path,
        edited: provenance == Some(Provenance::Edited),
        provenance,
        need_daemon_reload: p.need_daemon_reload.unwrap_or(false),
        section,
    }
}

/// What status shows of a unit that only the manager knows: not when it last started (doctor's
/// HSV017) nor the watchdog it runs with (HSV005), which would cost a message per unit each.
const SHOWN: [Fact; 6] = [
    Fact::NeedDaemonReload,
    Fact::InvocationId,
    Fact::MainPid,
    Fact::NRestarts,
    Fact::Result,
    Fact::StatusText,
];

/// Collect the status of every `hermes-gateway-*.service` (or just `only`'s).
pub(crate) async fn gather(
    systemd: &Systemd,
    only: Option<&ProfileName>,
    linger: Option<Linger>,
) -> Result<StatusReport, SystemdError> {
    let pattern = match only {
        Some(p) => format!("{UNIT_PREFIX}{p}{UNIT_SUFFIX}"),
        None => format!("{UNIT_PREFIX}*{UNIT_SUFFIX}"),
    };
    let mut units: Vec<(ProfileName, String, UnitProperties)> = vec![];
    for (unit, props) in systemd.describe(&[pattern.as_str()], &SHOWN).await? {
        let Some(profile) = profile_of_unit(&unit).filter(|p| only.is_none_or(|o| o == p)) else {
            continue;
        };
        match props {
            Ok(p) if p.load_state.as_deref() != Some("not-found") => units.push((profile, unit, p)),
            // Uninstalled between listing and reading: not installed any more.
            Ok(_) | Err(SystemdError::NoSuchUnit { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    units.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    // The homes the units run with, and the caller's own, where a gateway may have been
    // started by hand.
    let mut homes: BTreeSet<PathBuf> = units.iter().filter_map(|u| home_of_unit(&u.2)).collect();
    homes.extend(crate::profile::hermes_home_from_env().ok());
    let main_pids = units
        .iter()
        .filter_map(|u| u.2.main_pid)
        .filter(|pid| *pid != 0)
        .collect();
    let unmanaged = unmanaged(homes, only, main_pids, systemd.scope());
    let out = units
        .into_iter()
        .map(|(profile, unit, p)| unit_status(profile, unit, systemd.scope(), p))
        .collect();
    Ok(StatusReport {
        scope: systemd.scope(),
        linger,
        units: out,
        unmanaged,
    })
}

/// One line of the table: a unit, or a gateway no unit runs.
enum Row<'a> {
    Unit(&'a UnitStatus),
    Unmanaged(&'a Unmanaged),
}

impl Row<'_> {
    fn profile(&self) -> &ProfileName {
        match self {
            Row::Unit(u) => &u.profile,
            Row::Unmanaged(g) => &g.profile,
        }
    }

    fn cells(&self) -> [String; 7] {
        match self {
            Row::Unit(u) => [
                u.profile.as_str().to_owned(),
                visible(&u.unit).into_owned(),
                format!("{}/{}", visible(&u.active_state), visible(&u.sub_state)),
                visible(&u.unit_file_state).into_owned(),
                u.main_pid.to_string(),
                u.n_restarts.to_string(),
                visible(&u.result).into_owned(),
            ],
            Row::Unmanaged(g) => [
                g.profile.as_str().to_owned(),
                "-".into(),
                "running".into(),
                "-".into(),
                g.pid.to_string(),
                "-".into(),
                "-".into(),
            ],
        }
    }
}

impl StatusReport {
    /// A table for people: one line per profile's unit, and one per gateway no unit runs,
    /// marked `[not managed: ...]`. Every string read from systemd, the state file, the
    /// gateway's `STATUS=` (which quotes platform errors) or a process's command line goes
    /// through [`visible`], so none of them can drive the reader's terminal.
    pub(crate) fn to_text(&self, colour: bool) -> String {
        let mut s = String::new();
        if self.units.is_empty() {
            s.push_str(&format!(
                "no profiles installed in the {} manager; run `hermes-svc install --profile NAME`\n",
                self.scope
            ));
        }
        let mut lines: Vec<Row> = self.units.iter().map(Row::Unit).collect();
        lines.extend(self.unmanaged.iter().map(Row::Unmanaged));
        // Stable: a profile's unit comes before the gateway that holds the profile instead.
        lines.sort_by(|a, b| a.profile().cmp(b.profile()));
        let rows: Vec<[String; 7]> = lines.iter().map(Row::cells).collect();
        let header = [
            "PROFILE", "UNIT", "STATE", "ENABLED", "PID", "RESTARTS", "RESULT",
        ];
        let mut widths = header.map(|h| h.chars().count());
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        if !rows.is_empty() {
            let line: Vec<String> = header
                .iter()
                .zip(widths)
                .map(|(h, w)| format!("{h:<w$}"))
                .collect();
            s.push_str(&paint(line.join("  ").trim_end(), Paint::Bold, colour));
            s.push('\n');
        }
        for (line, row) in lines.iter().zip(&rows) {
            let mut flags = vec![];
            let state_paint = match line {
                Row::Unit(u) => {
                    if u.edited {
                        flags.push("edited".to_owned());
                    }
                    if u.need_daemon_reload {
                        flags.push("needs daemon-reload".to_owned());
                    }
                    state_paint(&u.active_state, &u.result)
                }
                Row::Unmanaged(g) => {
                    flags.push(match &g.service {
                        Some(service) => format!("not managed: run by {}", visible(service)),
                        None => "not managed: started by hand".to_owned(),
                    });
                    Some(Paint::Green)
                }
            };
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    // Padded first, so the escapes do not count toward the width.
                    let padded = format!("{cell:<w$}");
                    match (i, state_paint) {
                        (2, Some(p)) => paint(&padded, p, colour),
                        _ => padded,
                    }
                })
                .collect();
            let mut text = cells.join("  ").trim_end().to_owned();
            if !flags.is_empty() {
                text.push_str(&format!("  [{}]", flags.join(", ")));
            }
            s.push_str(&text);
            s.push('\n');
            let (section, writer) = match line {
                Row::Unit(u) => {
                    if !u.status_text.is_empty() {
                        s.push_str(&format!("{:<16} status: {}\n", "", visible(&u.status_text)));
                    }
                    let writer = Writer::Unit {
                        active_state: &u.active_state,
                        main_pid: u.main_pid,
                    };
                    (&u.section, writer)
                }
                Row::Unmanaged(g) => {
                    if !g.cmdline.is_empty() {
                        s.push_str(&format!("{:<16} command: {}\n", "", visible(&g.cmdline)));
                    }
                    (&g.section, Writer::LockHolder { pid: g.pid })
                }
            };
            s.push_str(&section.to_text(writer));
        }
        if let Some(linger) = self.linger {
            s.push_str(&format!("linger: {linger}\n"));
        }
        s
    }
}

/// The colour a reader scans for in the STATE column: running is green, failed red, and
/// anything on its way up or down yellow; a stopped unit stays plain.
fn state_paint(active_state: &str, result: &str) -> Option<Paint> {
    match active_state {
        "active" | "reloading" => Some(Paint::Green),
        "failed" => Some(Paint::Red),
        "activating" | "deactivating" => Some(Paint::Yellow),
        _ if result != "success" && !result.is_empty() => Some(Paint::Red),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::state_file::Stale;
    use crate::status::health::tests::component;
    use crate::status::health::Health;

    fn row(profile: &str, active: &str, sub: &str, result: &str) -> UnitStatus {
        UnitStatus {
            profile: ProfileName::parse(profile).unwrap(),
            unit: format!("hermes-gateway-{profile}.service"),
            scope: Scope::User,
            load_state: "loaded".into(),
            active_state: active.into(),
            sub_state: sub.into(),
            unit_file_state: "enabled".into(),
            main_pid: 4242,
            n_restarts: 3,
            result: result.into(),
            invocation_id: None,
            status_text: String::new(),
            fragment_path: None,
            drop_in_paths: vec![],
            provenance: None,
            edited: active == "failed",
            need_daemon_reload: false,
            section: HealthSection::default(),
        }
    }

    #[test]
    fn a_gateway_no_unit_runs_is_a_row_of_its_own_marked_not_managed() {
        let mut health = Health {
            updated_at: "2026-01-01T00:00:00.000Z".into(),
            age_ms: Some(100),
            stale: false,
            stale_reason: None,
            pid: 4343,
            summary: String::new(),
            components: vec![component("connected", true)],
            outbox: None,
            deliveries: vec![],
            api: None,
            agent: None,
            access: None,
            cluster: None,
            reload: None,
        };
        let stray = |service: Option<&str>, health| Unmanaged {
            profile: ProfileName::parse("b").unwrap(),
            hermes_home: "/home/a/.hermes".into(),
            pid: 4343,
            managed: false,
            service: service.map(str::to_owned),
            cmdline: "hermes-svc gateway run --profile b\x1b[2J".into(),
            section: HealthSection {
                health,
                health_error: None,
            },
        };
        let report = StatusReport {
            scope: Scope::User,
            linger: None,
            units: vec![
                row("c", "active", "running", "success"),
                row("b", "failed", "failed", "exit-code"),
            ],
            unmanaged: vec![stray(None, Some(health.clone()))],
        };
        let text = report.to_text(false);
        let lines: Vec<&str> = text.lines().collect();
        let words = |l: &str| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(
            words(lines[1])[..2],
            ["b", "hermes-gateway-b.service"],
            "{text}"
        );
        assert_eq!(
            words(lines[2]),
            [
                "b", "-", "running", "-", "4343", "-", "-", "[not", "managed:", "started", "by",
                "hand]"
            ],
            "{text}"
        );
        // Aligned with the units' columns.
        assert_eq!(lines[2].find("4343"), lines[1].find("4242"), "{text}");
        assert_eq!(
            lines[3].trim_start(),
            "command: hermes-svc gateway run --profile b\\x1b[2J",
            "a command line cannot drive the terminal: {text}"
        );
        assert!(
            lines[4].contains("connected") && !lines[4].contains("stale"),
            "{text}"
        );
        assert_eq!(words(lines[5])[0], "c", "{text}");
        // Run by a service outside our names; and a snapshot another process wrote.
        health.stale = true;
        health.stale_reason = Some(Stale::OtherProcess);
        health.pid = 7;
        let report = StatusReport {
            units: vec![],
            unmanaged: vec![stray(Some("mybot.service"), Some(health))],
            ..report
        };
        let text = report.to_text(true);
        assert!(text.starts_with("no profiles installed"), "{text}");
        assert!(
            text.contains("[not managed: run by mybot.service]"),
            "{text}"
        );
        assert!(text.contains("\x1b[32mrunning"), "{text}");
        assert!(
            text.contains("written by PID 7, not by the running gateway's PID 4343"),
            "{text}"
        );
    }

    #[test]
    fn the_table_is_aligned_and_coloured_only_when_asked() {
        let report = StatusReport {
            scope: Scope::User,
            linger: None,
            units: vec![
                row("a", "active", "running", "success"),
                row("a-much-longer-name", "failed", "failed", "exit-code"),
            ],
            unmanaged: vec![],
        };
        let plain = report.to_text(false);
        let lines: Vec<&str> = plain.lines().collect();
        assert!(lines[0].starts_with("PROFILE "), "{plain}");
        assert!(!plain.contains('\x1b'), "{plain}");
        // Every column starts at the same offset on every line.
        for col in ["UNIT", "STATE", "ENABLED", "RESULT"] {
            let at = lines[0].find(col).unwrap();
            for l in &lines[1..] {
                assert_eq!(&l[at - 2..at], "  ", "{col} in {l:?}\n{plain}");
            }
        }
        assert!(lines[2].ends_with("exit-code  [edited]"), "{plain}");
        let coloured = report.to_text(true);
        assert!(coloured.contains("\x1b[32mactive/running"), "{coloured}");
        assert!(coloured.contains("\x1b[31mfailed/failed"), "{coloured}");
        assert!(coloured.contains("\x1b[1mPROFILE"), "{coloured}");
    }
}

//! What doctor, status and install read of a unit: its properties as systemd names them,
//! whether they come from the manager over D-Bus or from the unit's files
//! (`unit_on_disk`), a loaded unit as the manager lists it, and the facts of it that only the
//! manager has.

use zbus::{DeserializeDict, OwnedVariant, Type};

/// Properties of a unit and its service.
///
/// Field names follow systemd's D-Bus property names; every field is optional because a unit
/// that is not loaded (or not a service) lacks most of them.
#[derive(Debug, Default, Clone, DeserializeDict, Type)]
#[zbus(signature = "a{sv}", rename_all = "PascalCase")]
pub(crate) struct UnitProperties {
    pub(crate) id: Option<String>,
    pub(crate) load_state: Option<String>,
    pub(crate) active_state: Option<String>,
    pub(crate) sub_state: Option<String>,
    pub(crate) unit_file_state: Option<String>,
    pub(crate) fragment_path: Option<String>,
    pub(crate) drop_in_paths: Option<Vec<String>>,
    pub(crate) need_daemon_reload: Option<bool>,
    /// When the current run began (µs since the epoch): the main process started after it.
    pub(crate) inactive_exit_timestamp: Option<u64>,
    #[zbus(rename = "InvocationID")]
    pub(crate) invocation_id: Option<Vec<u8>>,
    #[zbus(rename = "MainPID")]
    pub(crate) main_pid: Option<u32>,
    pub(crate) n_restarts: Option<u32>,
    pub(crate) result: Option<String>,
    pub(crate) status_text: Option<String>,
    pub(crate) environment: Option<Vec<String>>,
    #[zbus(rename = "WatchdogUSec")]
    pub(crate) watchdog_usec: Option<u64>,
    pub(crate) restart: Option<String>,
    #[zbus(rename = "Type")]
    pub(crate) service_type: Option<String>,
    pub(crate) exec_start: Option<Vec<ExecCommand>>,
}

/// One `ExecStart=` entry as systemd reports it: `(path, argv, ignore-failure, times..., pid,
/// code, status)`.
pub(crate) type ExecCommand = (String, Vec<String>, bool, u64, u64, u64, u64, u32, i32, i32);

impl UnitProperties {
    pub(crate) fn invocation_id_hex(&self) -> Option<String> {
        let id = self.invocation_id.as_ref().filter(|id| !id.is_empty())?;
        Some(id.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The argv lists of every `ExecStart=` line.
    pub(crate) fn exec_argv(&self) -> Vec<Vec<String>> {
        self.exec_start
            .iter()
            .flatten()
            .map(|c| c.1.clone())
            .collect()
    }

    pub(crate) fn is_active(&self) -> bool {
        matches!(
            self.active_state.as_deref(),
            Some("active" | "activating" | "reloading")
        )
    }

    /// Take `fact` as the manager answered its `Get`; `None` (no answer, or a value of another
    /// type) leaves it unknown, as a `GetAll` that lacked it would.
    pub(crate) fn set_fact(&mut self, fact: Fact, value: Option<OwnedVariant>) {
        fn take<T: TryFrom<OwnedVariant>>(value: Option<OwnedVariant>) -> Option<T> {
            value.and_then(|v| T::try_from(v).ok())
        }
        match fact {
            Fact::NeedDaemonReload => self.need_daemon_reload = take(value),
            Fact::InvocationId => self.invocation_id = take(value),
            Fact::InactiveExitTimestamp => self.inactive_exit_timestamp = take(value),
            Fact::MainPid => self.main_pid = take(value),
            Fact::NRestarts => self.n_restarts = take(value),
            Fact::Result => self.result = take(value),
            Fact::StatusText => self.status_text = take(value),
            Fact::WatchdogUsec => self.watchdog_usec = take(value),
        }
    }
}

/// A property of a loaded unit that its files cannot give: what the manager did with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fact {
    NeedDaemonReload,
    InvocationId,
    InactiveExitTimestamp,
    MainPid,
    NRestarts,
    Result,
    StatusText,
    /// Also in the files, but a service may change it while it runs (`WATCHDOG_USEC=`), and
    /// the manager reports that until the next start.
    WatchdogUsec,
}

pub(crate) const UNIT_IFACE: &str = "org.freedesktop.systemd1.Unit";
pub(crate) const SERVICE_IFACE: &str = "org.freedesktop.systemd1.Service";

impl Fact {
    /// The interface and the name the manager serves it under.
    pub(crate) fn property(self) -> (&'static str, &'static str) {
        match self {
            Fact::NeedDaemonReload => (UNIT_IFACE, "NeedDaemonReload"),
            Fact::InvocationId => (UNIT_IFACE, "InvocationID"),
            Fact::InactiveExitTimestamp => (UNIT_IFACE, "InactiveExitTimestamp"),
            Fact::MainPid => (SERVICE_IFACE, "MainPID"),
            Fact::NRestarts => (SERVICE_IFACE, "NRestarts"),
            Fact::Result => (SERVICE_IFACE, "Result"),
            Fact::StatusText => (SERVICE_IFACE, "StatusText"),
            Fact::WatchdogUsec => (SERVICE_IFACE, "WatchdogUSec"),
        }
    }
}

/// What an idle unit's files leave open: it has no process and its result is success (see
/// [`Listed::idle`]), and when it last started is read only of a unit that runs; its last
/// run's identity, restarts and words are the manager's.
const IDLE_FACTS: [Fact; 4] = [
    Fact::NeedDaemonReload,
    Fact::InvocationId,
    Fact::NRestarts,
    Fact::StatusText,
];

/// What a unit that runs, or ran and failed, leaves open: all of the manager's facts.
const RAN_FACTS: [Fact; 8] = Fact::ALL;

impl Fact {
    /// Every fact, for a reader that reads them all (doctor).
    pub(crate) const ALL: [Fact; 8] = [
        Fact::NeedDaemonReload,
        Fact::InvocationId,
        Fact::InactiveExitTimestamp,
        Fact::MainPid,
        Fact::NRestarts,
        Fact::Result,
        Fact::StatusText,
        Fact::WatchdogUsec,
    ];
}

/// A loaded unit as `ListUnitsByPatterns` lists it.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub(crate) name: String,
    pub(crate) load_state: String,
    pub(crate) active_state: String,
    pub(crate) sub_state: String,
}

impl Listed {
    /// Loaded and inactive: no process, and its result is success (systemd says `failed`
    /// instead whenever a run ended otherwise), so its files and a few counters say it all.
    pub(crate) fn idle(&self) -> bool {
        self.load_state == "loaded" && self.active_state == "inactive"
    }

    /// Whether the unit may have a process, and so a cgroup that a `GetAll` would read.
    pub(crate) fn may_run(&self) -> bool {
        !matches!(self.active_state.as_str(), "inactive" | "failed")
    }

    /// Loaded from its files: what those files say is what the manager holds, unless it says
    /// it needs a reload.
    pub(crate) fn loaded(&self) -> bool {
        self.load_state == "loaded"
    }

    /// The facts to ask the manager for, beside the unit's files, in this state: those of
    /// `read` (what the caller goes on to read) that the state leaves open, and always
    /// whether the files are what the manager holds.
    pub(crate) fn facts(&self, read: &[Fact]) -> Vec<Fact> {
        let open: &[Fact] = if self.idle() { &IDLE_FACTS } else { &RAN_FACTS };
        open.iter()
            .copied()
            .filter(|f| *f == Fact::NeedDaemonReload || read.contains(f))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(active_state: &str, sub_state: &str) -> Listed {
        Listed {
            name: "hermes-gateway-a.service".into(),
            load_state: "loaded".into(),
            active_state: active_state.into(),
            sub_state: sub_state.into(),
        }
    }

    #[test]
    fn a_unit_that_ran_is_asked_for_its_process_and_result_and_an_idle_one_is_not() {
        let idle = listed("inactive", "dead").facts(&Fact::ALL);
        for fact in [
            Fact::MainPid,
            Fact::Result,
            Fact::InactiveExitTimestamp,
            Fact::WatchdogUsec,
        ] {
            assert!(!idle.contains(&fact), "{fact:?}");
        }
        for (active, sub) in [
            ("active", "running"),
            ("failed", "failed"),
            ("activating", "auto-restart"),
        ] {
            let ran = listed(active, sub).facts(&Fact::ALL);
            assert!(idle.iter().all(|f| ran.contains(f)), "{active}");
            assert_eq!(ran.len(), 8, "{active}");
        }
        assert!(idle.contains(&Fact::NeedDaemonReload));
    }

    #[test]
    fn only_the_facts_a_reader_reads_are_asked_and_always_whether_the_files_are_current() {
        let ran = listed("active", "running").facts(&[Fact::MainPid, Fact::WatchdogUsec]);
        assert_eq!(
            ran,
            [Fact::NeedDaemonReload, Fact::MainPid, Fact::WatchdogUsec]
        );
        let idle = listed("inactive", "dead").facts(&[Fact::MainPid]);
        assert_eq!(idle, [Fact::NeedDaemonReload]);
    }

    #[test]
    fn a_fact_is_taken_in_its_own_type_and_anything_else_leaves_it_unknown() {
        let mut p = UnitProperties::default();
        p.set_fact(Fact::MainPid, Some(OwnedVariant::from(42u32)));
        p.set_fact(Fact::NeedDaemonReload, Some(OwnedVariant::from(false)));
        p.set_fact(
            Fact::InvocationId,
            Some(OwnedVariant::try_from(zbus::Variant::from(vec![0xabu8, 0x01])).unwrap()),
        );
        p.set_fact(Fact::InactiveExitTimestamp, Some(OwnedVariant::from(7u64)));
        p.set_fact(Fact::WatchdogUsec, Some(OwnedVariant::from(u64::MAX)));
        p.set_fact(
            Fact::StatusText,
            Some(OwnedVariant::from(zbus::Str::from("ready"))),
        );
        p.set_fact(Fact::Result, Some(OwnedVariant::from(3u32)));
        p.set_fact(Fact::NRestarts, None);
        assert_eq!(p.main_pid, Some(42));
        assert_eq!(p.need_daemon_reload, Some(false));
        assert_eq!(p.invocation_id_hex().as_deref(), Some("ab01"));
        assert_eq!(p.inactive_exit_timestamp, Some(7));
        assert_eq!(p.watchdog_usec, Some(u64::MAX));
        assert_eq!(p.status_text.as_deref(), Some("ready"));
        assert_eq!(p.result, None);
        assert_eq!(p.n_restarts, None);
    }
}

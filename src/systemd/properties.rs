//! What doctor, status and install read of a unit: its properties as systemd names them,
//! whether they come from the manager over D-Bus or from the unit's files
//! (`unit_on_disk`), and a loaded unit as the manager lists it.

use zbus::{DeserializeDict, Type};

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
}

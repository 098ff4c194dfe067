//! The systemd manager, spoken to over D-Bus: unit lifecycle, unit files and properties.
//!
//! One bus connection serves a whole command. Property reads for many units are sent together
//! on it (`describe`), so `status` over twenty profiles costs one connection and one round-trip
//! time rather than twenty `systemctl` processes.

use std::time::Duration;

use futures_util::StreamExt;
use zbus::{Connection, OwnedObjectPath, OwnedVariant};
use zbus_systemd::systemd1::ManagerProxy;

use crate::systemd::job::{Job, JobEnd, JobWatch, JOB_TIMEOUT, WATCH_EVERY};
use crate::systemd::properties::{UnitProperties, SERVICE_IFACE, UNIT_IFACE};
use crate::systemd::scope::Scope;

mod describe;

const SYSTEMD: &str = "org.freedesktop.systemd1";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

/// Why talking to systemd failed, phrased for the person who has to act on it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SystemdError {
    #[error("failed to connect to the {scope} bus ({hint})")]
    Connect {
        scope: Scope,
        hint: &'static str,
        #[source]
        source: zbus::Error,
    },
    #[error("systemd on the {scope} bus denied {action}: {message} ({hint})")]
    AccessDenied {
        scope: Scope,
        action: String,
        message: String,
        hint: &'static str,
    },
    #[error("no systemd manager answers on the {scope} bus ({message})")]
    NoManager { scope: Scope, message: String },
    #[error("unit {unit} does not exist")]
    NoSuchUnit { unit: String },
    #[error("{action} {unit} failed: job result {result:?} (see `systemctl{flag} status {unit}`){}", seen.describe())]
    JobFailed {
        action: &'static str,
        unit: String,
        result: String,
        flag: &'static str,
        seen: Box<JobEnd>,
    },
    #[error("{action} {unit} did not finish within {secs} s; systemd goes on with it (see `systemctl{flag} status {unit}`){}", seen.describe())]
    JobTimeout {
        action: &'static str,
        unit: String,
        secs: u64,
        flag: &'static str,
        seen: Box<JobEnd>,
    },
    #[error("failed to {action}")]
    Call {
        action: String,
        #[source]
        source: zbus::Error,
    },
}

/// A connection to one systemd manager.
pub(crate) struct Systemd {
    scope: Scope,
    conn: Connection,
    manager: ManagerProxy<'static>,
    /// systemd emits job signals only to subscribed clients, and refuses a second Subscribe.
    subscribed: tokio::sync::OnceCell<()>,
    /// How long `run_job` waits for a job.
    job_timeout: Duration,
    /// Told the unit's `STATUS=` line while a job runs (see [`Systemd::watch_jobs`]).
    watch: Option<Box<dyn JobWatch>>,
}

/// The D-Bus error name and message of an error reply. zbus turns the standard
/// `org.freedesktop.DBus.Error.*` names into `fdo::Error` variants and leaves the rest as
/// `MethodError`, so both shapes are read here.
fn error_reply(e: &zbus::Error) -> Option<(String, String)> {
    use zbus::DBusError;
    match e {
        zbus::Error::MethodError(name, message, _) => {
            Some((name.to_string(), message.clone().unwrap_or_default()))
        }
        zbus::Error::FDO(f) => Some((
            f.name().to_string(),
            f.description().unwrap_or_default().to_owned(),
        )),
        _ => None,
    }
}

/// The manager through the session or system bus.
async fn bus_connection(scope: Scope) -> Result<Connection, SystemdError> {
    match scope {
        Scope::User => Connection::session().await.map_err(|source| SystemdError::Connect {
            scope,
            hint: "is a systemd user manager running? check XDG_RUNTIME_DIR and DBUS_SESSION_BUS_ADDRESS",
            source,
        }),
        Scope::System => Connection::system().await.map_err(|source| SystemdError::Connect {
            scope,
            hint: "is systemd the init system here?",
            source,
        }),
    }
}

/// The object path systemd serves a unit at. Looking a unit up by this path loads it on
/// demand, which saves a `LoadUnit` round trip per unit.
pub fn unit_object_path(unit: &str) -> String {
    let mut path = String::from("/org/freedesktop/systemd1/unit/");
    if unit.is_empty() {
        path.push('_');
    }
    for b in unit.bytes() {
        if b.is_ascii_alphanumeric() {
            path.push(b as char);
        } else {
            path.push_str(&format!("_{b:02x}"));
        }
    }
    path
}

impl Systemd {
    pub(crate) async fn connect(scope: Scope) -> Result<Self, SystemdError> {
        let conn = bus_connection(scope).await?;
        // No property cache: it would cost a GetAll and an AddMatch before the first call.
        let manager = ManagerProxy::builder(&conn)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(|source| SystemdError::Call {
                action: "create the systemd manager proxy".into(),
                source,
            })?;
        let this = Self {
            scope,
            conn,
            manager,
            subscribed: tokio::sync::OnceCell::new(),
            job_timeout: JOB_TIMEOUT,
            watch: None,
        };
        // A cheap call that proves a manager answers, so later errors are about units.
        if let Err(e) = this.manager.version().await {
            let message = e.to_string();
            return Err(match this.call_error("read the manager's version", "", e) {
                denied @ SystemdError::AccessDenied { .. } => denied,
                _ => SystemdError::NoManager { scope, message },
            });
        }
        Ok(this)
    }

    pub(crate) fn scope(&self) -> Scope {
        self.scope
    }

    /// Name a failed call in terms of what the person can do about it.
    fn call_error(&self, action: impl Into<String>, unit: &str, e: zbus::Error) -> SystemdError {
        let action = action.into();
        if let Some((name, message)) = error_reply(&e) {
            match name.as_str() {
                "org.freedesktop.DBus.Error.AccessDenied"
                | "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired" => {
                    return SystemdError::AccessDenied {
                        scope: self.scope,
                        action,
                        message,
                        hint: match self.scope {
                            Scope::System => "system units need root",
                            Scope::User => "a D-Bus policy or security module forbids it",
                        },
                    };
                }
                "org.freedesktop.systemd1.NoSuchUnit"
                | "org.freedesktop.DBus.Error.FileNotFound" => {
                    return SystemdError::NoSuchUnit {
                        unit: unit.to_owned(),
                    };
                }
                _ => {}
            }
        }
        SystemdError::Call { action, source: e }
    }

    /// `daemon-reload`: make the manager re-read unit files and drop-ins.
    pub(crate) async fn reload(&self) -> Result<(), SystemdError> {
        self.manager
            .reload()
            .await
            .map_err(|e| self.call_error("reload the manager", "", e))
    }

    pub(crate) async fn enable(&self, unit: &str) -> Result<(), SystemdError> {
        self.manager
            .enable_unit_files(vec![unit.to_owned()], false, false)
            .await
            .map(drop)
            .map_err(|e| self.call_error(format!("enable {unit}"), unit, e))
    }

    pub(crate) async fn disable(&self, unit: &str) -> Result<(), SystemdError> {
        self.manager
            .disable_unit_files(vec![unit.to_owned()], false)
            .await
            .map(drop)
            .map_err(|e| self.call_error(format!("disable {unit}"), unit, e))
    }

    pub(crate) async fn start(&self, unit: &str) -> Result<(), SystemdError> {
        self.run_job(Job::Start, unit).await
    }

    pub(crate) async fn stop(&self, unit: &str) -> Result<(), SystemdError> {
        self.run_job(Job::Stop, unit).await
    }

    pub(crate) async fn restart(&self, unit: &str) -> Result<(), SystemdError> {
        self.run_job(Job::Restart, unit).await
    }

    pub(crate) async fn reset_failed(&self, unit: &str) -> Result<(), SystemdError> {
        self.manager
            .reset_failed_unit(unit.to_owned())
            .await
            .map_err(|e| self.call_error(format!("reset-failed {unit}"), unit, e))
    }

    /// Report the unit's `STATUS=` line to `watch` while a job runs, and wait at most
    /// `timeout` for one: what `start` shows a person on a terminal.
    pub(crate) fn watch_jobs(&mut self, timeout: Duration, watch: Option<Box<dyn JobWatch>>) {
        self.job_timeout = timeout;
        self.watch = watch;
    }

    /// The unit's `StatusText` and `Result`, as a failed or late job leaves them.
    async fn job_end(&self, unit: &str) -> Box<JobEnd> {
        let path = unit_object_path(unit);
        let path = path.as_str();
        let text = |name| async move {
            self.service_property(path, name)
                .await
                .and_then(|v| String::try_from(v).ok())
                .filter(|s| !s.is_empty())
        };
        let (status, result) = tokio::join!(text("StatusText"), text("Result"));
        Box::new(JobEnd { status, result })
    }

    /// Queue a job and wait for its `JobRemoved` signal, so that "started" means the gateway
    /// sent `READY=1`, not merely that systemd accepted the request.
    pub(crate) async fn run_job(&self, job: Job, unit: &str) -> Result<(), SystemdError> {
        let action = job.verb();
        let err = |e| self.call_error(format!("{action} {unit}"), unit, e);
        self.subscribed
            .get_or_try_init(|| self.manager.subscribe())
            .await
            .map_err(err)?;
        let mut removed = self.manager.receive_job_removed().await.map_err(err)?;
        let (name, mode) = (unit.to_owned(), "replace".to_owned());
        let job: OwnedObjectPath = match job {
            Job::Start => self.manager.start_unit(name, mode).await,
            Job::Stop => self.manager.stop_unit(name, mode).await,
            Job::Restart => self.manager.restart_unit(name, mode).await,
        }
        .map_err(err)?;
        let path = unit_object_path(unit);
        let mut last_status: Option<String> = None;
        let wait = async {
            let mut tick = tokio::time::interval(WATCH_EVERY);
            loop {
                tokio::select! {
                    signal = removed.next() => {
                        let signal = signal?;
                        let Ok(args) = signal.args() else { continue };
                        if *args.job == *job {
                            return Some(args.result.to_string());
                        }
                    }
                    _ = tick.tick(), if self.watch.is_some() => {
                        let status = self
                            .service_property(&path, "StatusText")
                            .await
                            .and_then(|v| String::try_from(v).ok())
                            .unwrap_or_default();
                        if last_status.as_deref() != Some(status.as_str()) {
                            if let Some(watch) = &self.watch {
                                watch.status(unit, &status);
                            }
                            last_status = Some(status);
                        }
                    }
                }
            }
        };
        let waited = tokio::time::timeout(self.job_timeout, wait).await;
        if let Some(watch) = &self.watch {
            watch.over();
        }
        let flag = self.scope.systemctl_flag();
        match waited {
            Ok(Some(result)) if result == "done" => Ok(()),
            Ok(Some(result)) => Err(SystemdError::JobFailed {
                action,
                unit: unit.to_owned(),
                result,
                flag,
                seen: self.job_end(unit).await,
            }),
            Ok(None) => Err(SystemdError::Call {
                action: format!("{action} {unit}"),
                source: zbus::Error::Failure("the bus closed while waiting for the job".into()),
            }),
            Err(_) => Err(SystemdError::JobTimeout {
                action,
                unit: unit.to_owned(),
                secs: self.job_timeout.as_secs(),
                flag,
                seen: self.job_end(unit).await,
            }),
        }
    }

    /// The unit's properties, read as for a running unit (see [`Systemd::properties_as`]).
    pub(crate) async fn properties(&self, unit: &str) -> Result<UnitProperties, SystemdError> {
        self.properties_as(unit, true).await
    }

    /// The unit's properties: one `GetAll` for the Unit interface, and the Service properties
    /// we use.
    ///
    /// For a unit that may run, each Service property is a `Get`, all in flight at once:
    /// `GetAll` on the Service interface makes systemd read every cgroup accounting file of a
    /// running unit, and `GetAll` over all interfaces (what `systemctl show` does) ships
    /// hundreds of properties; both cost more than these nine small replies once units run
    /// (docs/benchmarks.md). A unit that is inactive or failed has no cgroup to read, so there
    /// one `GetAll` over every interface does instead of ten calls.
    pub(crate) async fn properties_as(
        &self,
        unit: &str,
        may_run: bool,
    ) -> Result<UnitProperties, SystemdError> {
        let path = unit_object_path(unit);
        let err = |e| self.call_error(format!("read properties of {unit}"), unit, e);
        let get_all = |iface: &'static str| {
            let path = path.as_str();
            async move {
                let reply = self
                    .conn
                    .call_method(Some(SYSTEMD), path, Some(PROPERTIES), "GetAll", &(iface,))
                    .await?;
                reply.body().deserialize::<UnitProperties>()
            }
        };
        if !may_run {
            // Every interface in one reply: for a unit with no cgroup, the one message costs
            // systemd less than the ten (docs/benchmarks.md).
            return get_all("").await.map_err(err);
        }
        let get = |name: &'static str| self.service_property(&path, name);
        let (all, main_pid, n_restarts, result, status_text, environment) = tokio::join!(
            get_all(UNIT_IFACE),
            get("MainPID"),
            get("NRestarts"),
            get("Result"),
            get("StatusText"),
            get("Environment"),
        );
        let (watchdog_usec, restart, service_type, exec_start) = tokio::join!(
            get("WatchdogUSec"),
            get("Restart"),
            get("Type"),
            get("ExecStart"),
        );
        let mut p = all.map_err(err)?;
        p.main_pid = main_pid.and_then(|v| v.try_into().ok());
        p.n_restarts = n_restarts.and_then(|v| v.try_into().ok());
        p.result = result.and_then(|v| v.try_into().ok());
        p.status_text = status_text.and_then(|v| v.try_into().ok());
        p.environment = environment.and_then(|v| v.try_into().ok());
        p.watchdog_usec = watchdog_usec.and_then(|v| v.try_into().ok());
        p.restart = restart.and_then(|v| v.try_into().ok());
        p.service_type = service_type.and_then(|v| v.try_into().ok());
        p.exec_start = exec_start.and_then(|v| v.try_into().ok());
        Ok(p)
    }

    /// One Service-interface property; `None` when the unit has none (not loaded, not a
    /// service).
    async fn service_property(&self, path: &str, name: &str) -> Option<OwnedVariant> {
        self.property(path, SERVICE_IFACE, name).await
    }

    /// One property of one interface; `None` when the unit has none.
    async fn property(&self, path: &str, iface: &str, name: &str) -> Option<OwnedVariant> {
        let reply = self
            .conn
            .call_method(Some(SYSTEMD), path, Some(PROPERTIES), "Get", &(iface, name))
            .await
            .ok()?;
        reply.body().deserialize::<OwnedVariant>().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_and_systemd_error_replies_are_both_named() {
        let denied = zbus::Error::FDO(Box::new(zbus::fdo::Error::AccessDenied("no".into())));
        assert_eq!(
            error_reply(&denied),
            Some((
                "org.freedesktop.DBus.Error.AccessDenied".into(),
                "no".into()
            ))
        );
        assert_eq!(error_reply(&zbus::Error::InvalidReply), None);
    }

    #[test]
    fn object_paths_escape_like_sd_bus() {
        assert_eq!(
            unit_object_path("hermes-gateway-coder.service"),
            "/org/freedesktop/systemd1/unit/hermes_2dgateway_2dcoder_2eservice"
        );
    }
}

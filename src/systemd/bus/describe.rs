//! `describe`: every gateway unit the manager has loaded or that has a file on its search
//! path, with the properties doctor and status read, for as few messages to the manager as
//! its view allows.

use std::collections::BTreeSet;

use futures_util::StreamExt;
use zbus::OwnedVariant;

use super::{unit_object_path, Systemd, SystemdError, PROPERTIES, SYSTEMD};
use crate::systemd::properties::{Fact, Listed, UnitProperties};
use crate::systemd::unit_on_disk::{self, SearchPath};

/// How many of [`Systemd::describe`]'s `Get`s may wait for an answer at once: the system bus
/// refuses a connection more than 128 by default (`max_replies_per_connection`), and the calls
/// made beside them count too.
const IN_FLIGHT: usize = 96;

/// How many units' whole view (`properties_as`, up to six calls at once each) may be asked at
/// once, for the same bound.
const WHOLE_AT_ONCE: usize = IN_FLIGHT / 6;

/// Where [`Systemd::describe`] takes a loaded unit's properties from.
enum Source {
    /// Its files, and the facts only the manager has: it is loaded from those files.
    Facts(Listed),
    /// The manager's whole view: it did not load the unit from its files (not found, bad
    /// settings, masked), or the files are not to be read.
    Manager { may_run: bool },
}

impl Source {
    fn facts(&self, read: &[Fact]) -> Vec<Fact> {
        match self {
            Source::Facts(listed) => listed.facts(read),
            _ => vec![],
        }
    }
}

/// Whether the unit's file is one the manager wrote itself (a transient unit, or a generator's),
/// which it reports as such (`UnitFileState=transient`, `generated`) where the files alone would
/// pass for a plain unit: its whole view is asked instead.
fn made_by_manager(files: &UnitProperties) -> bool {
    let Some(dir) = files
        .fragment_path
        .as_deref()
        .and_then(|f| std::path::Path::new(f).parent())
    else {
        return false;
    };
    let name = dir.file_name().and_then(|n| n.to_str());
    let systemd = dir.parent().is_some_and(|p| p.ends_with("systemd"));
    systemd
        && matches!(
            name,
            Some("transient" | "generator" | "generator.early" | "generator.late")
        )
}

/// `files`, what a loaded unit's files say, completed with what the listing and the manager
/// said of it; `None` when the manager holds older files than these (it needs a reload) or
/// would not say, and so only its whole view is true.
fn with_facts(
    mut files: UnitProperties,
    listed: &Listed,
    facts: Vec<(Fact, Option<OwnedVariant>)>,
) -> Option<UnitProperties> {
    for (fact, value) in facts {
        files.set_fact(fact, value);
    }
    if files.need_daemon_reload != Some(false) {
        return None;
    }
    files.load_state = Some(listed.load_state.clone());
    files.active_state = Some(listed.active_state.clone());
    files.sub_state = Some(listed.sub_state.clone());
    Some(files)
}

impl Systemd {
    /// Units currently loaded in the manager whose names match any of `patterns`.
    async fn list_units(&self, patterns: &[&str]) -> Result<Vec<Listed>, SystemdError> {
        let patterns = patterns.iter().map(|p| p.to_string()).collect();
        let units = self
            .manager
            .list_units_by_patterns(vec![], patterns)
            .await
            .map_err(|e| self.call_error("list units", "", e))?;
        Ok(units
            .into_iter()
            .map(|u| Listed {
                name: u.0,
                load_state: u.2,
                active_state: u.3,
                sub_state: u.4,
            })
            .collect())
    }

    /// The manager's unit search path, to be listed once (`SearchPath::read`).
    ///
    /// Read over the bus and listed here, rather than asked with `ListUnitFilesByPatterns`,
    /// which works out each file's enablement by reading every `.wants/` directory and with
    /// 100 enabled units blocks the (single-threaded) manager for about 50 ms.
    async fn unit_path(&self) -> Result<Vec<String>, SystemdError> {
        self.manager
            .unit_path()
            .await
            .map_err(|e| self.call_error("read the unit search path", "", e))
    }

    /// Every unit matching `patterns` that the manager has loaded or that has a file on its
    /// search path, each with its properties or why they could not be read.
    ///
    /// A unit's definition is read from its files (`unit_on_disk`), whether the manager has
    /// loaded it or not: asking about a unit it has not loaded makes the manager load it, which
    /// costs milliseconds a unit, only to drop it again; and a loaded unit's files say what the
    /// manager holds as long as it does not say it needs a reload. Of a loaded unit only what
    /// the manager alone knows is asked (its [`Fact`]s). What each costs is the messages the bus
    /// daemon routes and the manager answers, not the wait for them, hence small `Get`s (a
    /// `GetAll` costs as much as ten, and the Service interface's reads every cgroup file of a
    /// running unit), all written at once as soon as the listing says which units are loaded,
    /// so that the bus and the manager work on them while the search path and the files are
    /// read here. Where the files say what the reader cannot reproduce, or the manager needs a
    /// reload, the manager is asked for all of it.
    ///
    /// Of the facts, only those in `wanted` are asked (and whether the files are current): each
    /// costs a message per unit, and `status` shows fewer than doctor checks.
    pub(crate) async fn describe(
        &self,
        patterns: &[&str],
        wanted: &[Fact],
    ) -> Result<Vec<(String, Result<UnitProperties, SystemdError>)>, SystemdError> {
        let (loaded, dirs) = tokio::join!(self.list_units(patterns), self.unit_path());
        let (loaded, dirs) = (loaded?, dirs?);
        crate::test_hook::pause("units-listed");
        let files = !crate::test_hook::switched("ask-manager");
        let loaded: Vec<(String, Source)> = loaded
            .into_iter()
            .map(|l| {
                let name = l.name.clone();
                let source = if files && l.loaded() {
                    Source::Facts(l)
                } else {
                    Source::Manager {
                        may_run: l.may_run(),
                    }
                };
                (name, source)
            })
            .collect();
        // A unit the manager did not load from its files is asked for whole, meanwhile.
        let whole = futures_util::stream::iter(loaded.iter().map(|(name, source)| async move {
            match source {
                Source::Manager { may_run } => Some(self.properties_as(name, *may_run).await),
                _ => None,
            }
        }))
        .buffered(WHOLE_AT_ONCE)
        .collect::<Vec<_>>();
        let read = async {
            let search = SearchPath::read(dirs);
            let manager = unit_on_disk::manager_specifiers(self.scope);
            let read = |name: &str| unit_on_disk::read(&search, &manager, name).ok();
            let listed: Vec<_> = loaded
                .iter()
                .map(|(name, source)| match source {
                    Source::Facts(_) => read(name).filter(|p| !made_by_manager(p)),
                    _ => None,
                })
                .collect();
            // The rest of the files: units the manager has not loaded.
            let names: BTreeSet<&str> = loaded.iter().map(|(n, _)| n.as_str()).collect();
            let unlisted: Vec<_> = search
                .unit_names(patterns)
                .into_iter()
                .filter(|n| !names.contains(n.as_str()))
                .map(|name| {
                    let props = files.then(|| read(&name)).flatten();
                    (name, props)
                })
                .collect();
            (listed, unlisted)
        };
        // `join` polls its first future first: every message is on its way before a directory
        // is listed or a file read.
        let ((facts, whole), (on_disk, unlisted)) = futures_util::future::join(
            futures_util::future::join(self.facts(&loaded, wanted), whole),
            read,
        )
        .await;
        let loaded = loaded.into_iter().zip(whole).zip(facts).zip(on_disk).map(
            |((((name, source), whole), facts), on_disk)| async move {
                let props = match (whole, source, on_disk) {
                    (Some(props), _, _) => props,
                    (None, Source::Facts(l), Some(files)) => match with_facts(files, &l, facts) {
                        Some(props) => Ok(props),
                        None => self.properties_as(&name, l.may_run()).await,
                    },
                    (None, Source::Facts(l), None) => self.properties_as(&name, l.may_run()).await,
                    (None, Source::Manager { may_run }, _) => {
                        self.properties_as(&name, may_run).await
                    }
                };
                (name, props)
            },
        );
        let unlisted = unlisted.into_iter().map(|(name, on_disk)| async move {
            let props = match on_disk {
                Some(files) => Ok(files),
                // Files this reader cannot follow: the unit loads now, inactive, and one
                // message says it all.
                None => self.properties_as(&name, false).await,
            };
            (name, props)
        });
        // Most of these are ready at once; the rest ask the manager for a whole view.
        let (loaded, unlisted) = futures_util::future::join(
            futures_util::stream::iter(loaded)
                .buffered(WHOLE_AT_ONCE)
                .collect::<Vec<_>>(),
            futures_util::stream::iter(unlisted)
                .buffered(WHOLE_AT_ONCE)
                .collect::<Vec<_>>(),
        )
        .await;
        let mut described: Vec<_> = loaded.into_iter().chain(unlisted).collect();
        described.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(described)
    }

    /// The facts of each loaded unit that its files cannot give, in one batch of `Get`s.
    async fn facts(
        &self,
        loaded: &[(String, Source)],
        wanted: &[Fact],
    ) -> Vec<Vec<(Fact, Option<OwnedVariant>)>> {
        let paths: Vec<String> = loaded.iter().map(|(n, _)| unit_object_path(n)).collect();
        let asked: Vec<(usize, Fact)> = loaded
            .iter()
            .enumerate()
            .flat_map(|(i, (_, source))| source.facts(wanted).into_iter().map(move |f| (i, f)))
            .collect();
        let gets: Vec<(&str, &str, &str)> = asked
            .iter()
            .map(|&(i, fact)| {
                let (iface, name) = fact.property();
                (paths[i].as_str(), iface, name)
            })
            .collect();
        let answers = self.get_many(&gets).await;
        let mut facts: Vec<Vec<_>> = loaded.iter().map(|_| vec![]).collect();
        for ((i, fact), value) in asked.into_iter().zip(answers) {
            facts[i].push((fact, value));
        }
        facts
    }

    /// `gets` (object path, interface, property), written to the bus together and their
    /// answers matched by serial; `None` for each the manager would not answer.
    ///
    /// Many to a write rather than one each: a write wakes the bus daemon and then the manager,
    /// and under load each wake-up costs more than the message. At most [`IN_FLIGHT`] wait
    /// for their answers at once.
    async fn get_many(&self, gets: &[(&str, &str, &str)]) -> Vec<Option<OwnedVariant>> {
        let mut out: Vec<Option<OwnedVariant>> = gets.iter().map(|_| None).collect();
        if gets.is_empty() {
            return out;
        }
        // Listening before sending, so that no answer can pass unseen.
        let mut replies = zbus::MessageStream::from(&self.conn);
        let mut waiting = std::collections::HashMap::new();
        let mut msgs = vec![];
        for (i, (path, iface, name)) in gets.iter().enumerate() {
            let Ok(msg) = zbus::Message::method_call(*path, "Get")
                .destination(SYSTEMD)
                .interface(PROPERTIES)
                .build(&(*iface, *name))
            else {
                continue;
            };
            waiting.insert(msg.primary_header().serial_num(), i);
            msgs.push(msg);
        }
        let mut unsent = &msgs[..];
        let mut pending = 0;
        loop {
            if !unsent.is_empty() && pending <= IN_FLIGHT / 2 {
                let (now, later) = unsent.split_at((IN_FLIGHT - pending).min(unsent.len()));
                if self.conn.send_all(now).await.is_err() {
                    break;
                }
                pending += now.len();
                unsent = later;
            }
            if pending == 0 {
                break;
            }
            let Some(Ok(msg)) = replies.next().await else {
                break;
            };
            let Some(i) = msg
                .header()
                .reply_serial()
                .and_then(|serial| waiting.remove(&serial))
            else {
                continue;
            };
            pending -= 1;
            if msg.message_type() == zbus::message::Type::MethodReturn {
                out[i] = msg.body().deserialize::<OwnedVariant>().ok();
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> Listed {
        Listed {
            name: "hermes-gateway-a.service".into(),
            load_state: "loaded".into(),
            active_state: "active".into(),
            sub_state: "running".into(),
        }
    }

    fn files() -> UnitProperties {
        UnitProperties {
            load_state: Some("loaded".into()),
            active_state: Some("inactive".into()),
            sub_state: Some("dead".into()),
            main_pid: Some(0),
            environment: Some(vec!["HERMES_HOME=/h".into()]),
            ..UnitProperties::default()
        }
    }

    #[test]
    fn the_files_of_a_running_unit_take_its_state_from_the_listing_and_its_facts_from_the_manager()
    {
        let facts = vec![
            (Fact::NeedDaemonReload, Some(OwnedVariant::from(false))),
            (Fact::MainPid, Some(OwnedVariant::from(4242u32))),
        ];
        let p = with_facts(files(), &running(), facts).unwrap();
        assert_eq!(p.active_state.as_deref(), Some("active"));
        assert_eq!(p.sub_state.as_deref(), Some("running"));
        assert_eq!(p.main_pid, Some(4242));
        assert_eq!(p.need_daemon_reload, Some(false));
        assert_eq!(p.environment, files().environment);
    }

    #[test]
    fn a_transient_or_generated_unit_is_the_managers_to_describe() {
        for (dir, made) in [
            ("/run/user/1000/systemd/transient", true),
            ("/run/systemd/generator.late", true),
            ("/run/systemd/generator", true),
            ("/home/u/.config/systemd/user", false),
            ("/home/u/transient", false),
        ] {
            let p = UnitProperties {
                fragment_path: Some(format!("{dir}/hermes-gateway-a.service")),
                ..files()
            };
            assert_eq!(made_by_manager(&p), made, "{dir}");
        }
        assert!(!made_by_manager(&files()));
    }

    #[test]
    fn files_the_manager_has_not_read_or_would_not_say_it_had_are_not_its_view() {
        for reload in [Some(OwnedVariant::from(true)), None] {
            let facts = vec![(Fact::NeedDaemonReload, reload)];
            assert!(with_facts(files(), &running(), facts).is_none());
        }
    }
}

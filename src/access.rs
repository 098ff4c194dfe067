//! Who may talk to the agent: the access rules, enforced by the gateway as each chat message is
//! stored (docs/config.md, "Who may talk to the agent").
//!
//! The gateway is the only thing between a stranger and the agent. Hermes trusts whatever its
//! Relay delivers as authorized already (its `delivered_via_upstream_relay`), and its API
//! server checks only its own key: neither looks at the chat user. So nothing reaches either
//! bridge unless a rule here admits it, and by default none does.
//!
//! The verdict is made once, when the message is stored, and stored with it
//! ([`crate::gateway::spool::Verdict`]): the bridges send only what was admitted, across
//! restarts too, and a message refused today is never delivered because a rule changed since;
//! the local API lists every message with its verdict. Deciding is quick and never waits (it
//! runs under the spool's lock): what a verdict asks to be said (a pairing code to a stranger,
//! a notice to a sender over budget) is done by [`answer`], beside it.
//!
//! A front end of the run ([`Frontend`]): started on the stores before any adapter, which is
//! when the spool is given its judge.

pub mod answer;
pub mod budget;
pub mod pairing;
pub mod rules;

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use tokio::sync::{mpsc, watch};

use self::answer::Ask;
use self::budget::{Budgets, Spent};
use self::pairing::{Book, Store};
pub use self::rules::{Rule, Rules};
use crate::config::UnknownDm;
use crate::gateway::adapter::whoami::Whoami;
use crate::gateway::spool::{Event, Judge, Verdict};
use crate::gateway::state_file::{AccessHealth, FrontendHealth};
use crate::logging::Component;
use crate::platform::message::ChatType;
use crate::platform::{requires_mention, GatewayConfig, Normaliser};
use crate::profile::Profile;
use crate::runtime::{Frontend, FrontendError, Started, Stores};

/// The `access` field, with its comma, of a chat message stored without a verdict, as the
/// local API and `events --json` show it: refused, [`Rule::Unjudged`].
pub const UNJUDGED_FIELD: &str = r#""access":{"admitted":false,"rule":"unjudged"},"#;

/// Answers waiting to be sent, at most: past it, a flood's answers are dropped rather than
/// queued (each is a courtesy, and every sender is answered at most once a window anyway).
const ANSWERS_QUEUED: usize = 256;

/// The access rules of one run, as the spool's [`Judge`].
#[derive(Debug)]
pub struct Gate {
    /// Which adapters there are and their kinds, replaced with the rules by a reload (which
    /// may add adapters).
    normaliser: Normaliser,
    /// Each adapter's rules, replaced whole by a reload ([`Gate::set_rules`]).
    rules: RwLock<HashMap<String, Rules>>,
    whoami: Whoami,
    approved: Approved,
    budgets: Mutex<Budgets>,
    tally: Mutex<BTreeMap<Rule, u64>>,
    /// Where answers go; `None` when nothing is said (no `[agent]`, or no outbox).
    answers: Option<mpsc::Sender<Ask>>,
}

impl Gate {
    /// The rules of `config`'s adapters; answers go to `answers` when given.
    pub fn new(
        config: &GatewayConfig,
        store: Store,
        whoami: Whoami,
        answers: Option<mpsc::Sender<Ask>>,
    ) -> Gate {
        Gate {
            normaliser: Normaliser::new(config),
            rules: RwLock::new(Self::rules_of(config)),
            whoami,
            approved: Approved::new(store),
            budgets: Mutex::default(),
            tally: Mutex::default(),
            answers,
        }
    }

    fn rules_of(config: &GatewayConfig) -> HashMap<String, Rules> {
        config
            .adapters
            .iter()
            .map(|a| {
                let kind = a.protocol.kind();
                let rules = Rules::resolve(&a.access, &config.access, requires_mention(kind));
                (a.name.clone(), rules)
            })
            .collect()
    }

    /// Judge by `config`'s rules and adapters from the next message on: what a reload
    /// applies; the messages stored so far keep their verdicts.
    pub fn set_rules(&self, config: &GatewayConfig) {
        let rules = Self::rules_of(config);
        self.normaliser.follow(config);
        *self.rules.write().unwrap_or_else(PoisonError::into_inner) = rules;
    }

    /// The verdict on `event` at `now`, and what it asks to be said.
    fn decide(&self, event: &Event, now: Instant) -> Option<(Rule, Option<Ask>)> {
        let normaliser = &self.normaliser;
        let m = normaliser.message(event)?;
        let all = self.rules.read().unwrap_or_else(PoisonError::into_inner);
        let rules = all.get(&event.adapter)?;
        let bot = self.whoami.get(&event.adapter);
        let sender = &m.said.sender;
        let own = sender.vouched && bot.id.as_deref() == Some(sender.id.as_str());
        let decided = rules.decide(
            &m.said,
            own,
            || normaliser.addressed(event, &bot),
            || self.approved.contains(&event.adapter, &sender.id),
        );
        let in_dm = m.said.chat.chat_type == ChatType::Dm;
        Some(match decided {
            Err(Rule::UnknownSender) if in_dm && rules.unknown_dm == UnknownDm::Pair => {
                (Rule::UnknownSender, Ask::pairing(&m, &event.id))
            }
            Err(rule) => (rule, None),
            Ok(rule) => {
                let spent = self
                    .budgets
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .spend(&event.adapter, &sender.id, rules.budget, now);
                match spent {
                    Spent::Within => (rule, None),
                    Spent::Over { notice } => (
                        Rule::Budget,
                        notice
                            .then(|| Ask::over_budget(&m, &event.id, rules.budget))
                            .flatten(),
                    ),
                }
            }
        })
    }

    /// Messages decided since the run started, by rule.
    pub fn health(&self) -> AccessHealth {
        let tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut admitted, mut refused) = (BTreeMap::new(), BTreeMap::new());
        for (rule, n) in tally.iter() {
            let side = if rule.admits() {
                &mut admitted
            } else {
                &mut refused
            };
            side.insert(rule.as_str().to_owned(), *n);
        }
        AccessHealth { admitted, refused }
    }
}

impl Judge for Gate {
    fn judge(&self, event: &Event) -> Option<Verdict> {
        let (rule, ask) = self.decide(event, Instant::now())?;
        *self
            .tally
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(rule)
            .or_default() += 1;
        if let (Some(ask), Some(answers)) = (ask, &self.answers) {
            if answers.try_send(ask).is_err() {
                tracing::debug!(adapter = %event.adapter, "too many answers waiting; this one is not sent");
            }
        }
        if !rule.admits() {
            tracing::debug!(adapter = %event.adapter, event = %event.id, rule = rule.as_str(), "refused");
        }
        Some(Verdict {
            admitted: rule.admits(),
            rule: rule.as_str().to_owned(),
        })
    }
}

/// The pairing store's approved senders, read again whenever the file changed (a rename by
/// `pairing approve` is a new inode): an approved sender is admitted from their next
/// message, and the store is read once per change, not per message.
#[derive(Debug)]
struct Approved {
    store: Store,
    seen: Mutex<(Option<Stamp>, Book)>,
}

/// What tells one version of a file from another without reading it.
type Stamp = (u64, u64, i64, i64, u64);

impl Approved {
    fn new(store: Store) -> Self {
        Self {
            store,
            seen: Mutex::new((None, Book::default())),
        }
    }

    fn contains(&self, adapter: &str, sender: &str) -> bool {
        let stamp = std::fs::symlink_metadata(self.store.path())
            .ok()
            .map(|m| (m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.size()));
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.0 != stamp {
            let book = match stamp {
                None => Book::default(),
                Some(_) => self.store.read().unwrap_or_else(|e| {
                    // Nobody is taken for approved by a store that cannot be trusted.
                    tracing::warn!(error = %crate::error_chain::one_line(&e), "the pairing store is not read; no paired sender is admitted until it is fixed");
                    Book::default()
                }),
            };
            *seen = (stamp, book);
        }
        seen.1.is_approved(adapter, sender)
    }
}

/// The access rules as a front end of the run: the spool's judge from the start, and the
/// answers it asks for served beside the components.
pub struct Access {
    profile: Profile,
}

impl Access {
    pub fn new(profile: &Profile) -> Self {
        Self {
            profile: profile.clone(),
        }
    }
}

impl Frontend for Access {
    fn start(
        &self,
        stores: Stores<'_>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Option<Started>, FrontendError> {
        let store = Store::new(&self.profile.access_dir());
        // Only a gateway with an agent behind it speaks to strangers: without one, the rules
        // are still judged (the local API shows each verdict), but nobody is told anything.
        let outbox = stores
            .outbox
            .clone()
            .ok()
            .filter(|_| stores.config.agent.is_some());
        let (tx, rx) = mpsc::channel(ANSWERS_QUEUED);
        let gate = Arc::new(Gate::new(
            stores.config,
            store.clone(),
            stores.whoami.clone(),
            outbox.is_some().then_some(tx),
        ));
        stores.spool.set_judge(gate.clone());
        let serve = answer::serve(rx, store, outbox, shutdown);
        let reloaded = gate.clone();
        Ok(Some(Started {
            name: Component::Access,
            serve: Box::pin(async move {
                serve.await;
                Ok(())
            }),
            health: Box::new(move || FrontendHealth::Access(gate.health())),
            reload: Some(Box::new(move |config| reloaded.set_rules(config))),
        }))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::gateway::adapter::whoami::BotId;

    fn gate(toml: &str) -> (Gate, mpsc::Receiver<Ask>, std::path::PathBuf) {
        let text =
            format!("[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"T\"\n\n{toml}");
        let config: GatewayConfig =
            crate::config::parse(std::path::Path::new("/g.toml"), &text).unwrap();
        let dir = std::env::temp_dir().join(format!(
            "hsv-gate-{}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        let whoami = Whoami::default();
        whoami.set(
            "tg",
            BotId {
                id: Some("42".into()),
                handle: Some("hermes_bot".into()),
            },
        );
        let (tx, rx) = mpsc::channel(8);
        let gate = Gate::new(&config, Store::new(&dir.join("access")), whoami, Some(tx));
        (gate, rx, dir)
    }

    fn update(id: u64, chat: i64, from: i64, text: &str, entities: serde_json::Value) -> Event {
        let kind = if chat > 0 { "private" } else { "supergroup" };
        Event::new(
            format!("tg:{id}"),
            "tg",
            "message",
            Some(id),
            json!({"update_id": id, "message": {"message_id": id, "date": 1, "text": text,
                   "from": {"id": from, "is_bot": false, "first_name": "A"},
                   "chat": {"id": chat, "type": kind}, "entities": entities}}),
        )
    }

    fn rule(v: Option<Verdict>) -> String {
        let v = v.expect("a chat message has a verdict");
        format!(
            "{}:{}",
            if v.admitted { "admitted" } else { "refused" },
            v.rule
        )
    }

    #[test]
    fn a_message_is_judged_by_its_platforms_reading_and_the_bots_identity() {
        let (gate, mut asks, dir) = gate(
            "[access]\nallow-users = [\"7\"]\nrequire-mention = true\nunknown-dm = \"pair\"\n\
             budget = \"2/1m\"\n",
        );
        let none = json!([]);
        assert_eq!(
            rule(gate.judge(&update(1, 7, 7, "hi", none.clone()))),
            "admitted:allow-users"
        );
        // A group message mentions the bot by Telegram's entity, or it is not for the bot.
        let mention = json!([{"type": "mention", "offset": 0, "length": 11}]);
        assert_eq!(
            rule(gate.judge(&update(2, -5, 7, "@hermes_bot hi", mention))),
            "admitted:allow-users"
        );
        assert_eq!(
            rule(gate.judge(&update(3, -5, 7, "hermes_bot hi", none.clone()))),
            "refused:not-addressed"
        );
        // The budget (2 a minute) is spent; the first refusal asks for a notice.
        assert_eq!(
            rule(gate.judge(&update(4, 7, 7, "3rd", none.clone()))),
            "refused:budget"
        );
        assert!(asks.try_recv().is_ok(), "one notice");
        assert_eq!(
            rule(gate.judge(&update(5, 7, 7, "4th", none.clone()))),
            "refused:budget"
        );
        assert!(asks.try_recv().is_err(), "only one per window");
        // A stranger's DM is refused and asks for a pairing code; the bot's own id is its echo.
        assert_eq!(
            rule(gate.judge(&update(6, 9, 9, "hello?", none.clone()))),
            "refused:unknown-sender"
        );
        assert!(asks.try_recv().is_ok(), "a pairing code is asked for");
        assert_eq!(
            rule(gate.judge(&update(7, 42, 42, "echo", none.clone()))),
            "refused:own-message"
        );
        // Not a chat message: no verdict.
        let edit = Event::new("tg:8", "tg", "edited_message", Some(8), json!({}));
        assert_eq!(gate.judge(&edit), None);
        let health = gate.health();
        assert_eq!(health.admitted["allow-users"], 2);
        assert_eq!(health.refused["budget"], 2);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_unjudged_field_is_a_verdicts_encoding() {
        let v = Verdict {
            admitted: false,
            rule: Rule::Unjudged.as_str().into(),
        };
        let field = format!("\"access\":{},", serde_json::to_string(&v).unwrap());
        assert_eq!(UNJUDGED_FIELD, field);
    }

    #[test]
    fn an_approval_in_the_store_admits_from_the_next_message() {
        let (gate, _asks, dir) = gate("[access]\nunknown-dm = \"pair\"\n");
        let dm = |id| update(id, 9, 9, "hi", json!([]));
        assert_eq!(rule(gate.judge(&dm(1))), "refused:unknown-sender");
        let store = Store::new(&dir.join("access"));
        let code = store
            .change(|b| b.request("tg", "9", None, pairing::now()))
            .unwrap();
        let pairing::Answer::Code(code) = code else {
            panic!("{code:?}")
        };
        store
            .change(|b| b.approve(&code, pairing::now()))
            .unwrap()
            .unwrap();
        assert_eq!(rule(gate.judge(&dm(2))), "admitted:pairing");
        store.change(|b| b.revoke("tg", "9")).unwrap();
        assert_eq!(rule(gate.judge(&dm(3))), "refused:unknown-sender");
        let _ = std::fs::remove_dir_all(dir);
    }
}

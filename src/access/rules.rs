//! One adapter's rules, resolved, and the decision they make about one message: a pure
//! function of the message and what is known of its sender, so that every case is a unit test.
//!
//! The order is the one Hermes's own gateway follows where the two overlap: the bot's own
//! echo, other bots, a group message not meant for the bot, and then who the sender is. The
//! budget comes last, once a message would be admitted, and is the gate's (it keeps counts).

use std::collections::BTreeSet;

use crate::config::{AccessRules, Budget, UnknownDm, DEFAULT_BUDGET};
use crate::platform::message::{ChatType, Said};

/// What decided a verdict. Its word ([`Rule::as_str`]) is what the spool stores, the API and
/// `events` show, and `status` counts by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// `allow-all = true`.
    AllowAll,
    /// The sender is in `allow-users`.
    AllowUsers,
    /// The group chat is in `allow-chats`.
    AllowChats,
    /// The sender was approved by a pairing code (`hermes-svc pairing approve`).
    Pairing,
    /// The bot's own message, echoed back by its platform.
    OwnMessage,
    /// Another bot's message, and `allow-bots` is off.
    Bot,
    /// A group message that neither mentions the bot nor replies to it, and
    /// `require-mention` is on.
    NotAddressed,
    /// The platform does not vouch for the sender (a post on behalf of a chat or a channel,
    /// a webhook) and no chat rule admits it.
    Unvouched,
    /// No rule admits the sender: the default.
    UnknownSender,
    /// The sender's budget for the window is spent.
    Budget,
    /// Stored before the gateway judged messages: never sent to the agent.
    Unjudged,
}

impl Rule {
    pub const ALL: [Rule; 11] = [
        Rule::AllowAll,
        Rule::AllowUsers,
        Rule::AllowChats,
        Rule::Pairing,
        Rule::OwnMessage,
        Rule::Bot,
        Rule::NotAddressed,
        Rule::Unvouched,
        Rule::UnknownSender,
        Rule::Budget,
        Rule::Unjudged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Rule::AllowAll => "allow-all",
            Rule::AllowUsers => "allow-users",
            Rule::AllowChats => "allow-chats",
            Rule::Pairing => "pairing",
            Rule::OwnMessage => "own-message",
            Rule::Bot => "bot",
            Rule::NotAddressed => "not-addressed",
            Rule::Unvouched => "unvouched",
            Rule::UnknownSender => "unknown-sender",
            Rule::Budget => "budget",
            Rule::Unjudged => "unjudged",
        }
    }

    /// Whether a message this rule decided reaches the agent.
    pub fn admits(self) -> bool {
        matches!(
            self,
            Rule::AllowAll | Rule::AllowUsers | Rule::AllowChats | Rule::Pairing
        )
    }

    /// What a person reads for a refusal, in `events` and the docs.
    pub fn explain(self) -> &'static str {
        match self {
            Rule::AllowAll => "every sender is allowed (allow-all)",
            Rule::AllowUsers => "the sender is in allow-users",
            Rule::AllowChats => "the chat is in allow-chats",
            Rule::Pairing => "the sender was approved with a pairing code",
            Rule::OwnMessage => "the bot's own message",
            Rule::Bot => "a bot's message, and allow-bots is off",
            Rule::NotAddressed => {
                "a group message that does not mention or answer the bot (require-mention)"
            }
            Rule::Unvouched => "posted on behalf of a chat or by a webhook: not a user",
            Rule::UnknownSender => "no rule admits this sender",
            Rule::Budget => "the sender's budget for the window was spent",
            Rule::Unjudged => "stored before the gateway judged messages",
        }
    }
}

impl std::str::FromStr for Rule {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        Rule::ALL.into_iter().find(|r| r.as_str() == s).ok_or(())
    }
}

/// One adapter's rules with every default applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    pub allow_all: bool,
    pub allow_users: BTreeSet<String>,
    pub allow_chats: BTreeSet<String>,
    pub require_mention: bool,
    pub allow_bots: bool,
    pub unknown_dm: UnknownDm,
    pub budget: Budget,
}

impl Rules {
    /// The adapter's own rules over the profile's, over the defaults; `requires_mention` is
    /// its platform's default for groups.
    pub fn resolve(own: &AccessRules, profile: &AccessRules, requires_mention: bool) -> Rules {
        let r = own.over(profile);
        let allow_all = r.allow_all.unwrap_or(false);
        let allow_users = r.allow_users.unwrap_or_default();
        // As Hermes does: whoever wrote an allow-list chose who may talk, and a stranger is
        // not told how to ask (hermes-agent #9337).
        let listed = allow_all || !allow_users.is_empty();
        Rules {
            allow_all,
            allow_users,
            allow_chats: r.allow_chats.unwrap_or_default(),
            require_mention: r.require_mention.unwrap_or(requires_mention),
            allow_bots: r.allow_bots.unwrap_or(false),
            unknown_dm: r.unknown_dm.unwrap_or(if listed {
                UnknownDm::Ignore
            } else {
                UnknownDm::Pair
            }),
            budget: r.budget.unwrap_or(DEFAULT_BUDGET),
        }
    }

    /// Whether anyone at all may reach the agent through this adapter: for doctor.
    pub fn open_to_anyone(&self) -> bool {
        self.allow_all
    }

    /// Who `said`'s sender is to these rules, before the budget: `Ok` with the rule that
    /// admits the message, or `Err` with the one that refuses it. `own` is whether the sender
    /// is the bot itself; `addressed` and `approved` are asked only when they matter (each
    /// may cost a look at the payload or at the pairing store).
    pub fn decide(
        &self,
        said: &Said,
        own: bool,
        addressed: impl FnOnce() -> bool,
        approved: impl FnOnce() -> bool,
    ) -> Result<Rule, Rule> {
        let sender = &said.sender;
        if own {
            return Err(Rule::OwnMessage);
        }
        if sender.is_bot && !self.allow_bots {
            return Err(Rule::Bot);
        }
        let in_group = said.chat.chat_type != ChatType::Dm;
        if in_group && self.require_mention && !addressed() {
            return Err(Rule::NotAddressed);
        }
        if self.allow_all {
            return Ok(Rule::AllowAll);
        }
        // Exact, byte for byte: no case folding, no trimming, no normalising.
        if sender.vouched && self.allow_users.contains(&sender.id) {
            return Ok(Rule::AllowUsers);
        }
        if in_group && self.allow_chats.contains(&said.chat.id) {
            return Ok(Rule::AllowChats);
        }
        if !sender.vouched {
            return Err(Rule::Unvouched);
        }
        if approved() {
            return Ok(Rule::Pairing);
        }
        Err(Rule::UnknownSender)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::message::{Author, Chat, MessageType};

    fn said(chat_type: ChatType, sender: &str) -> Said {
        Said {
            chat: Chat {
                id: "c1".into(),
                chat_type,
                name: None,
            },
            sender: Author {
                id: sender.into(),
                name: None,
                is_bot: false,
                vouched: true,
            },
            thread_id: None,
            message_id: None,
            reply_to_message_id: None,
            message_type: MessageType::Text,
            text: "hi".into(),
            media: vec![],
            answer: None,
        }
    }

    fn rules(text: &str) -> Rules {
        let config: crate::platform::GatewayConfig =
            crate::config::parse(std::path::Path::new("/g.toml"), text).unwrap();
        Rules::resolve(&AccessRules::default(), &config.access, true)
    }

    fn decide(r: &Rules, s: &Said) -> Result<Rule, Rule> {
        r.decide(s, false, || false, || false)
    }

    #[test]
    fn nobody_is_admitted_by_default_and_a_stranger_is_offered_a_code() {
        let r = rules("");
        assert_eq!(
            decide(&r, &said(ChatType::Dm, "42")),
            Err(Rule::UnknownSender)
        );
        assert_eq!(r.unknown_dm, UnknownDm::Pair);
        assert_eq!(r.budget, DEFAULT_BUDGET);
        assert!(rules("[access]\nallow-users = [\"1\"]\n").unknown_dm == UnknownDm::Ignore);
    }

    #[test]
    fn ids_match_exactly() {
        let r = rules("[access]\nallow-users = [\"@ann:example.org\", \"42\"]\n");
        assert_eq!(decide(&r, &said(ChatType::Dm, "42")), Ok(Rule::AllowUsers));
        for other in [
            "42 ",
            " 42",
            "042",
            "@Ann:example.org",
            "@\u{0430}nn:example.org",
        ] {
            assert_eq!(
                decide(&r, &said(ChatType::Dm, other)),
                Err(Rule::UnknownSender),
                "{other:?}"
            );
        }
    }

    #[test]
    fn a_group_message_must_address_the_bot_unless_told_otherwise() {
        let r = rules("[access]\nallow-users = [\"42\"]\n");
        let group = said(ChatType::Group, "42");
        assert_eq!(decide(&r, &group), Err(Rule::NotAddressed));
        assert_eq!(
            r.decide(&group, false, || true, || false),
            Ok(Rule::AllowUsers)
        );
        let free = rules("[access]\nallow-users = [\"42\"]\nrequire-mention = false\n");
        assert_eq!(decide(&free, &group), Ok(Rule::AllowUsers));
        // A direct message needs no mention.
        assert_eq!(decide(&r, &said(ChatType::Dm, "42")), Ok(Rule::AllowUsers));
    }

    #[test]
    fn an_allowed_chat_admits_its_members_but_never_makes_an_unvouched_sender_a_user() {
        let r = rules(
            "[access]\nallow-users = [\"-100\"]\nallow-chats = [\"c1\"]\nrequire-mention = false\n",
        );
        let mut anon = said(ChatType::Group, "-100");
        anon.sender.vouched = false;
        assert_eq!(decide(&r, &anon), Ok(Rule::AllowChats));
        // Elsewhere the same id is not the user "-100".
        anon.chat.id = "c2".into();
        assert_eq!(decide(&r, &anon), Err(Rule::Unvouched));
        assert_eq!(
            r.decide(&anon, false, || true, || true),
            Err(Rule::Unvouched),
            "nor is it approved by a pairing"
        );
        // A direct message's chat is no group: allow-chats does not name users.
        let mut dm = said(ChatType::Dm, "7");
        dm.chat.id = "c1".into();
        assert_eq!(decide(&r, &dm), Err(Rule::UnknownSender));
    }

    #[test]
    fn bots_and_the_bots_own_echo() {
        let mut bot = said(ChatType::Dm, "9");
        bot.sender.is_bot = true;
        let all = rules("[access]\nallow-all = true\n");
        assert_eq!(decide(&all, &bot), Err(Rule::Bot));
        let bots = rules("[access]\nallow-all = true\nallow-bots = true\n");
        assert_eq!(decide(&bots, &bot), Ok(Rule::AllowAll));
        assert_eq!(
            bots.decide(&bot, true, || true, || true),
            Err(Rule::OwnMessage)
        );
    }

    #[test]
    fn a_pairing_admits_and_is_asked_only_when_nothing_else_did() {
        let r = rules("[access]\nallow-users = [\"42\"]\n");
        let asked = std::cell::Cell::new(false);
        let approved = || {
            asked.set(true);
            true
        };
        assert_eq!(
            r.decide(&said(ChatType::Dm, "42"), false, || false, approved),
            Ok(Rule::AllowUsers)
        );
        assert!(!asked.get());
        assert_eq!(
            r.decide(&said(ChatType::Dm, "7"), false, || false, || true),
            Ok(Rule::Pairing)
        );
    }

    #[test]
    fn every_rule_reads_back_from_its_word() {
        for r in Rule::ALL {
            assert_eq!(r.as_str().parse::<Rule>(), Ok(r));
        }
        assert!("allow_all".parse::<Rule>().is_err());
    }
}

//! The access rules: `[access]` for the whole profile, and `[adapter.access]` inside an
//! `[[adapter]]` over it, key by key. They say who may reach the agent behind the gateway, which
//! is the only thing between a stranger and it (docs/config.md, "Who may talk to the agent").
//!
//! Ids are the platform's own and are compared exactly, byte for byte. So an id with a space,
//! a control character or anything beyond printable ASCII is refused here: no platform's stable
//! ids hold one, and such an entry could only ever be a typo or a look-alike that never
//! matches.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::value::Ctx;
use super::ConfigError;

/// One layer of rules as written: a key left out takes the layer below (the profile's
/// `[access]`, then the built-in default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessRules {
    /// Every sender, written out: `allow-all = true`.
    pub allow_all: Option<bool>,
    /// Senders admitted anywhere, by the platform's id.
    pub allow_users: Option<BTreeSet<String>>,
    /// Group chats every member of which is admitted, by the platform's id.
    pub allow_chats: Option<BTreeSet<String>>,
    /// A group message must mention the bot or reply to it; unset, the platform's default.
    pub require_mention: Option<bool>,
    /// Other bots' messages reach the agent (never the bot's own).
    pub allow_bots: Option<bool>,
    /// What an unknown sender's direct message gets.
    pub unknown_dm: Option<UnknownDm>,
    /// At most this many messages of one sender reach the agent in a window.
    pub budget: Option<Budget>,
}

/// What an unknown sender's direct message gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownDm {
    /// One answer with a one-time pairing code the owner may approve.
    Pair,
    /// Nothing at all.
    Ignore,
}

/// A per-sender budget: at most `messages` per `per`, or none at all (`"off"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    Off,
    Limit { messages: u32, per: Duration },
}

/// The budget unless a rule sets one: enough for a person typing fast or a long paste split
/// into pieces, far below a flood.
pub const DEFAULT_BUDGET: Budget = Budget::Limit {
    messages: 20,
    per: Duration::from_secs(60),
};

impl AccessRules {
    /// These rules over `below`: each key given here wins.
    pub fn over(&self, below: &AccessRules) -> AccessRules {
        AccessRules {
            allow_all: self.allow_all.or(below.allow_all),
            allow_users: self
                .allow_users
                .clone()
                .or_else(|| below.allow_users.clone()),
            allow_chats: self
                .allow_chats
                .clone()
                .or_else(|| below.allow_chats.clone()),
            require_mention: self.require_mention.or(below.require_mention),
            allow_bots: self.allow_bots.or(below.allow_bots),
            unknown_dm: self.unknown_dm.or(below.unknown_dm),
            budget: self.budget.or(below.budget),
        }
    }
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawAccess {
    allow_all: Option<bool>,
    allow_users: Option<Spanned<Vec<Spanned<String>>>>,
    allow_chats: Option<Spanned<Vec<Spanned<String>>>>,
    require_mention: Option<bool>,
    allow_bots: Option<bool>,
    unknown_dm: Option<UnknownDm>,
    budget: Option<Spanned<String>>,
}

/// One layer, `section` naming it in errors (`[access]`, `adapter "tg": [adapter.access]`).
pub(super) fn access(
    ctx: &Ctx,
    section: &str,
    raw: &RawAccess,
) -> Result<AccessRules, ConfigError> {
    Ok(AccessRules {
        allow_all: raw.allow_all,
        allow_users: ids(ctx, section, "allow-users", raw.allow_users.as_ref())?,
        allow_chats: ids(ctx, section, "allow-chats", raw.allow_chats.as_ref())?,
        require_mention: raw.require_mention,
        allow_bots: raw.allow_bots,
        unknown_dm: raw.unknown_dm,
        budget: raw
            .budget
            .as_ref()
            .map(|b| budget(ctx, section, b))
            .transpose()?,
    })
}

fn ids(
    ctx: &Ctx,
    section: &str,
    key: &str,
    raw: Option<&Spanned<Vec<Spanned<String>>>>,
) -> Result<Option<BTreeSet<String>>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let mut out = BTreeSet::new();
    for id in raw.get_ref() {
        if let Err(why) = check_id(id.get_ref()) {
            return ctx.err(
                id.span(),
                format!(
                    "{section} {key}: {:?} {why}; ids are the platform's own, compared exactly \
                     (docs/config.md lists which id each platform uses)",
                    id.get_ref()
                ),
            );
        }
        if !out.insert(id.get_ref().clone()) {
            return ctx.err(
                id.span(),
                format!(
                    "{section} {key}: {:?} is listed twice; remove one",
                    id.get_ref()
                ),
            );
        }
    }
    Ok(Some(out))
}

/// Why `id` can be no platform's id, if it cannot.
fn check_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() {
        return Err("is empty");
    }
    if id.len() > 256 {
        return Err("is longer than any platform's id");
    }
    if id.trim() != id || id.contains(' ') {
        return Err("holds a space");
    }
    if !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("holds a character that is not printable ASCII (a look-alike or a control)");
    }
    Ok(())
}

/// `"20/1m"`: at most 20 messages a minute; `"off"`: no budget.
fn budget(ctx: &Ctx, section: &str, raw: &Spanned<String>) -> Result<Budget, ConfigError> {
    let text = raw.get_ref().trim();
    if text == "off" {
        return Ok(Budget::Off);
    }
    let bad = || {
        ctx.err(
            raw.span(),
            format!(
                "{section} budget = {:?} is not a budget; write the most messages of one \
                 sender per window, like \"20/1m\" or \"100/1h\", or \"off\"",
                raw.get_ref()
            ),
        )
    };
    let Some((n, per)) = text.split_once('/') else {
        return bad();
    };
    let (Ok(messages), Ok(per)) = (
        n.trim().parse::<u32>(),
        humantime::parse_duration(per.trim()),
    ) else {
        return bad();
    };
    if messages == 0 || per.is_zero() || per > super::MAX_DURATION {
        return bad();
    }
    Ok(Budget::Limit { messages, per })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<AccessRules, ConfigError> {
        #[derive(Deserialize)]
        struct File {
            access: RawAccess,
        }
        let path = std::path::Path::new("/p/gateway.toml");
        let ctx = Ctx { path, text };
        let file: File = toml::from_str(text).unwrap();
        access(&ctx, "[access]", &file.access)
    }

    #[test]
    fn a_layer_reads_and_lies_over_another() {
        let rules = parse(
            "[access]\nallow-users = [\"42\", \"@ann:example.org\"]\nbudget = \"5/30s\"\n\
             unknown-dm = \"ignore\"\n",
        )
        .unwrap();
        assert_eq!(
            rules
                .allow_users
                .as_ref()
                .unwrap()
                .iter()
                .collect::<Vec<_>>(),
            ["42", "@ann:example.org"]
        );
        assert_eq!(
            rules.budget,
            Some(Budget::Limit {
                messages: 5,
                per: Duration::from_secs(30)
            })
        );
        let own = AccessRules {
            allow_users: Some(BTreeSet::from(["7".to_owned()])),
            allow_bots: Some(true),
            ..AccessRules::default()
        };
        let both = own.over(&rules);
        assert_eq!(both.allow_users, own.allow_users);
        assert_eq!(both.budget, rules.budget);
        assert_eq!(both.unknown_dm, Some(UnknownDm::Ignore));
        assert_eq!(both.allow_bots, Some(true));
        assert_eq!(
            parse("[access]\nbudget = \"off\"\n").unwrap().budget,
            Some(Budget::Off)
        );
    }

    #[test]
    fn an_id_that_can_match_nothing_is_an_error_naming_its_line() {
        for (id, why) in [
            ("42 ", "holds a space"),
            ("", "is empty"),
            ("\u{0430}nn", "not printable ASCII"),
            ("4\u{200b}2", "not printable ASCII"),
        ] {
            let text = format!("[access]\nallow-users = [\n  \"1\",\n  \"{id}\",\n]\n");
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains("gateway.toml:4"), "{e}");
            assert!(e.contains(why), "{id:?}: {e}");
        }
        let e = parse("[access]\nallow-chats = [\"-1\", \"-1\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("listed twice"), "{e}");
    }

    #[test]
    fn an_adapters_table_lies_over_the_profiles_and_a_typo_in_either_names_its_line() {
        let parse_file = |text: &str| {
            crate::config::parse::<crate::platform::Protocol>(
                std::path::Path::new("/p/gateway.toml"),
                text,
            )
        };
        let tg =
            "[[adapter]]\nname = \"ws\"\nkind = \"websocket\"\nurl = \"wss://example.com/ws\"\n";
        let c = parse_file(&format!(
            "[access]\nallow-users = [\"1\"]\nbudget = \"5/1m\"\n\n{tg}\n[adapter.access]\n\
             allow-users = [\"2\"]\n"
        ))
        .unwrap();
        let own = c.adapters[0].access.over(&c.access);
        assert_eq!(own.allow_users, Some(BTreeSet::from(["2".to_owned()])));
        assert_eq!(own.budget, c.access.budget);
        for (text, line) in [
            ("[access]\nallow-user = [\"1\"]\n".to_owned(), 2),
            (
                format!("{tg}\n[adapter.access]\nrequire_mention = true\n"),
                7,
            ),
            (
                format!("{tg}\n[adapter.access]\nunknown-dm = \"reply\"\n"),
                7,
            ),
        ] {
            let e = parse_file(&text).unwrap_err().to_string();
            assert!(e.contains(&format!("gateway.toml:{line}")), "{text}: {e}");
        }
    }

    #[test]
    fn a_budget_is_messages_per_window() {
        for bad in ["20", "0/1m", "20/0s", "x/1m", "20/fortnight", "-1/1m"] {
            let e = parse(&format!("[access]\nbudget = {bad:?}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("\"20/1m\""), "{bad}: {e}");
        }
    }
}

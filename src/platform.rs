//! The platforms, and the registry: the one place that names them all.
//!
//! Each platform is a wing, `platform/<kind>/`, holding what only it knows (docs/architecture.md
//! "Adding a platform"). A wing implements [`Platform`]; the `registry!` line below makes it
//! a kind of adapter: a variant of [`Protocol`], which is what the configuration
//! ([`config::Platforms`]) and everything above it hold, and a word in every list of kinds.

pub mod discord;
pub mod feishu;
pub mod qqbot;
pub mod telegram;
pub mod websocket;
pub mod weixin;

use std::fmt;

use crate::config::{self, AdapterKeys, ConfigError, Secret};
use crate::gateway::send::Target;

/// What a platform declares about itself to the rest of the gateway.
pub trait Platform {
    /// `kind = "..."` in `gateway.toml`.
    const KIND: &'static str;
    /// The keys of its `[[adapter]]`, beside the ones every adapter has.
    const KEYS: &'static [&'static str];
    /// Its adapter's settings, read from those keys.
    type Config: Clone + fmt::Debug + PartialEq;

    fn parse(keys: &AdapterKeys) -> Result<Self::Config, ConfigError>;

    /// The `.env` variables its secrets come from, in the order [`Platform::identity`] takes
    /// them.
    fn credential_envs(config: &Self::Config) -> Vec<&str>;

    /// A secret it keeps elsewhere than `.env` (a login file), read, or why it cannot be.
    fn stored_credential(_config: &Self::Config) -> Option<Result<Secret, String>> {
        None
    }

    /// Who it is to the platform: two gateways with one identity would take each other's
    /// events or sessions. Only its hash leaves the process.
    fn identity(config: &Self::Config, secrets: &[Secret]) -> String;
}

/// The first secret, or nothing: what an identity of one credential is keyed on.
fn first(secrets: &[Secret]) -> &str {
    secrets.first().map_or("", Secret::expose)
}

/// The whole configuration, with these platforms.
pub type GatewayConfig = config::GatewayConfig<Protocol>;
/// One adapter, with its platform's settings.
pub type AdapterSpec = config::AdapterSpec<Protocol>;
/// One cron job, delivering to a target of these platforms.
pub type CronSpec = config::CronSpec<Target>;

macro_rules! registry {
    ($($variant:ident => $wing:ident :: $platform:ident,)+) => {
        /// One adapter's platform, with that platform's settings.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Protocol {
            $($variant(<$wing::$platform as Platform>::Config),)+
        }

        impl config::Platforms for Protocol {
            type Target = Target;

            fn kinds() -> &'static [&'static str] {
                &[$(<$wing::$platform as Platform>::KIND,)+]
            }

            fn keys(kind: &str) -> Option<&'static [&'static str]> {
                $(if kind == <$wing::$platform as Platform>::KIND {
                    return Some(<$wing::$platform as Platform>::KEYS);
                })+
                None
            }

            fn parse(kind: &str, keys: &AdapterKeys) -> Result<Self, ConfigError> {
                $(if kind == <$wing::$platform as Platform>::KIND {
                    return <$wing::$platform as Platform>::parse(keys).map(Protocol::$variant);
                })+
                keys.err(keys.span(), format!("adapter {:?}: unknown kind {kind:?}", keys.name()))
            }

            fn kind(&self) -> &'static str {
                match self {
                    $(Protocol::$variant(_) => <$wing::$platform as Platform>::KIND,)+
                }
            }

            fn credential_envs(&self) -> Vec<&str> {
                match self {
                    $(Protocol::$variant(c) => <$wing::$platform as Platform>::credential_envs(c),)+
                }
            }

            fn stored_credential(&self) -> Option<Result<Secret, String>> {
                match self {
                    $(Protocol::$variant(c) => <$wing::$platform as Platform>::stored_credential(c),)+
                }
            }

            fn identity(&self, secrets: &[Secret]) -> String {
                match self {
                    $(Protocol::$variant(c) => <$wing::$platform as Platform>::identity(c, secrets),)+
                }
            }

            fn parse_target(&self, text: &str) -> Result<Target, String> {
                Target::parse(self.kind(), text).map_err(|e| e.to_string())
            }
        }
    };
}

registry! {
    QqBot => qqbot::QqBot,
    Discord => discord::Discord,
    Feishu => feishu::Feishu,
    Telegram => telegram::Telegram,
    Weixin => weixin::Weixin,
    WebSocket => websocket::WebSocket,
}

impl Protocol {
    /// `kind = "..."`, for logs and health.
    pub fn kind(&self) -> &'static str {
        config::Platforms::kind(self)
    }
}

#[cfg(test)]
mod tests;

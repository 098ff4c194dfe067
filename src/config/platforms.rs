//! What the configuration asks of the platforms, which it does not name: the platform
//! registry (`crate::platform`) implements [`Platforms`], and the configuration is generic
//! over it. So the parser of `gateway.toml` stays the same when a platform is added, and a
//! kind that is listed but has no parser cannot exist: the list and the parsers are one table.

use std::fmt;

use super::{AdapterKeys, ConfigError, Secret};

/// The settings of one adapter of some platform, and what the configuration needs to know
/// about every platform to read and check a file.
pub trait Platforms: Clone + fmt::Debug + PartialEq + Sized {
    /// Where a message goes on an adapter: parsed once, when a file or a request names it.
    type Target: Clone + fmt::Debug + PartialEq + fmt::Display;

    /// Every kind, in the order error texts list them.
    fn kinds() -> &'static [&'static str];

    /// The keys an adapter of `kind` takes beside the ones every adapter has; `None` for a
    /// kind that does not exist.
    fn keys(kind: &str) -> Option<&'static [&'static str]>;

    /// An adapter of `kind` (one [`Platforms::keys`] knows) read from its keys.
    fn parse(kind: &str, keys: &AdapterKeys) -> Result<Self, ConfigError>;

    fn kind(&self) -> &'static str;

    /// The variables in the profile's `.env` (or the manager's credentials) this adapter's
    /// secrets come from, in the order the platform's identity uses them.
    fn credential_envs(&self) -> Vec<&str>;

    /// A secret kept elsewhere than `.env`, where the platform has one (a login file written
    /// by `hermes-svc login`): read it, or say in one line why it cannot be read.
    fn stored_credential(&self) -> Option<Result<Secret, String>> {
        None
    }

    /// The identity two gateways must not share, given the adapter's secrets (in the order
    /// of [`Platforms::credential_envs`], or the stored one). Only its hash leaves the process.
    fn identity(&self, secrets: &[Secret]) -> String;

    /// `text` as a target of this adapter, or why it is not one.
    fn parse_target(&self, text: &str) -> Result<Self::Target, String>;
}

//! The keys of one `[[adapter]]` that belong to its platform, handed to the platform's parser
//! with their places in the file, and the checks every platform's keys share (URLs,
//! durations, intents, a variable's name), so that each wing words and places its errors as
//! the rest of the file does.

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use serde::de::DeserializeOwned;
use toml::de::{DeValue, ValueDeserializer};
use toml::Spanned;

use super::value::Ctx;
use super::ConfigError;

/// An intent by name (kebab-case of the platform's constant), its bit, and what a bot needs
/// before the platform grants it (`None`: every bot has it).
pub type Intent = (&'static str, u64, Option<&'static str>);

/// One adapter's own keys: the table as written, less the keys every adapter has.
pub struct AdapterKeys<'a> {
    pub(super) ctx: &'a Ctx<'a>,
    pub(super) name: &'a str,
    pub(super) kind: &'a str,
    /// The whole `[[adapter]]`, where a missing key is reported.
    pub(super) span: Range<usize>,
    pub(super) table: Spanned<DeValue<'a>>,
}

impl AdapterKeys<'_> {
    pub fn name(&self) -> &str {
        self.name
    }

    pub fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    /// The `gateway.toml` being read: files of the profile live beside it.
    pub fn config_path(&self) -> &Path {
        self.ctx.path
    }

    /// The keys read into the platform's own table type, each value keeping its place.
    pub fn read<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        T::deserialize(ValueDeserializer::from(self.table.clone())).map_err(|e| {
            ConfigError::Invalid {
                path: self.ctx.path.to_owned(),
                line: e
                    .span()
                    .map_or(self.ctx.line(self.span.start), |s| self.ctx.line(s.start)),
                message: format!(
                    "adapter {:?}: {}",
                    self.name,
                    e.message().trim().replace('\n', " ")
                ),
            }
        })
    }

    pub fn err<T>(&self, span: Range<usize>, message: impl Into<String>) -> Result<T, ConfigError> {
        self.ctx.err(span, message)
    }

    /// A required key, or the error that says to add it, with an example value.
    pub fn required<T: Clone>(
        &self,
        value: &Option<T>,
        key: &str,
        example: &str,
    ) -> Result<T, ConfigError> {
        match value {
            Some(v) => Ok(v.clone()),
            None => self.err(
                self.span(),
                format!(
                    "adapter {:?} (kind {}): missing {key}; add {key} = {example}",
                    self.name, self.kind
                ),
            ),
        }
    }

    /// A key naming a variable of the profile's `.env`. The value is not echoed: what lands
    /// here by mistake is most often the secret itself.
    pub fn env_name(&self, key: &str, value: &Option<String>) -> Result<(), ConfigError> {
        let Some(env) = value else { return Ok(()) };
        if crate::env_file::is_name(env) {
            return Ok(());
        }
        self.err(
            self.span(),
            format!(
                "adapter {:?}: {key} must name a variable in the profile's .env (like \
                 \"BOT_SECRET\"), not hold the secret itself; the value given ({} characters, \
                 not shown) is not a variable name",
                self.name,
                env.chars().count()
            ),
        )
    }

    /// An optional URL key: `secure` anywhere, `plain` only to loopback.
    pub fn url(
        &self,
        key: &str,
        raw: &Option<Spanned<String>>,
        secure: &str,
        plain: &str,
    ) -> Result<Option<String>, ConfigError> {
        raw.as_ref()
            .map(|r| self.ctx.url(key, r, secure, plain))
            .transpose()
    }

    /// An optional base URL of an HTTP API, without the trailing slash every path would
    /// double, or `default`.
    pub fn api_base(
        &self,
        raw: &Option<Spanned<String>>,
        default: &str,
    ) -> Result<String, ConfigError> {
        Ok(self
            .url("api-base", raw, "https://", "http://")?
            .map_or_else(
                || default.to_owned(),
                |u| u.trim_end_matches('/').to_owned(),
            ))
    }

    pub fn duration(&self, key: &str, raw: &Spanned<String>) -> Result<Duration, ConfigError> {
        self.ctx.duration(key, raw)
    }

    pub fn opt_duration(
        &self,
        key: &str,
        raw: &Option<Spanned<String>>,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        self.ctx.opt_duration(key, raw, default)
    }

    /// `intents = [...]` looked up by name in the platform's `table`; `default` when absent.
    pub fn intents(
        &self,
        raw: &Option<Spanned<Vec<String>>>,
        table: &[Intent],
        default: &[&str],
    ) -> Result<u64, ConfigError> {
        let names: Vec<String> = match raw {
            Some(r) => r.get_ref().clone(),
            None => default.iter().map(|s| s.to_string()).collect(),
        };
        let mut bits = 0;
        for name in &names {
            match table.iter().find(|(n, _, _)| n == name) {
                Some((_, b, _)) => bits |= b,
                None => {
                    let known: Vec<_> = table.iter().map(|(n, _, _)| *n).collect();
                    return self.err(
                        raw.as_ref().map_or(0..0, |r| r.span()),
                        format!("unknown intent {name:?}; known: {}", known.join(", ")),
                    );
                }
            }
        }
        Ok(bits)
    }
}

//! Checks that every section shares (names, durations, URLs), each failing with the line the
//! value sits on, so that all sections word and place their errors the same way.

use std::path::Path;
use std::time::Duration;

use toml::Spanned;

use super::ConfigError;

/// The longest duration any key takes. The gateway adds and doubles these (deadlines, backoff,
/// timeouts) and adds them to the clock; far beyond any useful setting, and far from overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The file being parsed: where errors point.
pub(super) struct Ctx<'a> {
    pub(super) path: &'a Path,
    pub(super) text: &'a str,
}

impl Ctx<'_> {
    pub(super) fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .bytes()
            .filter(|b| *b == b'\n')
            .count()
            + 1
    }

    pub(super) fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
    ) -> Result<T, ConfigError> {
        Err(ConfigError::Invalid {
            path: self.path.to_owned(),
            line: self.line(span.start),
            message: message.into(),
        })
    }

    pub(super) fn duration(
        &self,
        key: &str,
        raw: &Spanned<String>,
    ) -> Result<Duration, ConfigError> {
        match humantime::parse_duration(raw.get_ref()) {
            Ok(d) if d > MAX_DURATION => self.err(
                raw.span(),
                format!(
                    "{key} = {:?} is too long; the most any duration may be is 365 days",
                    raw.get_ref()
                ),
            ),
            Ok(d) if !d.is_zero() => Ok(d),
            _ => self.err(
                raw.span(),
                format!(
                    "{key} = {:?} is not a duration; write it like \"30s\", \"5m\" or \"1h 30m\"",
                    raw.get_ref()
                ),
            ),
        }
    }

    pub(super) fn opt_duration(
        &self,
        key: &str,
        raw: &Option<Spanned<String>>,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        raw.as_ref().map_or(Ok(default), |r| self.duration(key, r))
    }

    /// `https://`/`wss://` anywhere; `http://`/`ws://` only to loopback (tests, sandboxes).
    /// Read by the URL parser the HTTP client uses, so what is accepted here is what is
    /// dialled: `ws://127.0.0.1:99999/ws` was once accepted, and the port dropped, dialling 80.
    pub(super) fn url(
        &self,
        key: &str,
        raw: &Spanned<String>,
        secure: &str,
        plain: &str,
    ) -> Result<String, ConfigError> {
        let url = raw.get_ref();
        let err = |why: String| self.err(raw.span(), format!("{key} = {url:?}: {why}"));
        // The parser drops tabs and newlines silently; a value holding one is not a URL.
        if url.chars().any(char::is_control) || url.contains(' ') {
            return err("holds a space or a control character".into());
        }
        let parsed = match reqwest::Url::parse(url) {
            Ok(p) => p,
            Err(e) => return err(format!("not a URL ({e}); use {secure}HOST[:PORT]/PATH")),
        };
        let scheme = |prefix: &str| prefix.strip_suffix("://").unwrap_or(prefix).to_owned();
        let Some(host) = parsed.host_str().filter(|h| !h.is_empty()) else {
            return err(format!("has no host; use {secure}HOST[:PORT]/PATH"));
        };
        let ip = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = host == "localhost"
            || ip
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if parsed.scheme() == scheme(secure) || (parsed.scheme() == scheme(plain) && loopback) {
            return Ok(url.clone());
        }
        if parsed.scheme() == scheme(plain) {
            return err(format!("{plain} is allowed only to loopback; use {secure}"));
        }
        err(format!("must start with {secure}"))
    }
}

/// One rule for adapter and cron names, which the gateway prints in its logs and health
/// summaries.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

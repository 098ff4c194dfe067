//! The `[[cron]]` section. The schedule is parsed here, once, and the job carries the parsed
//! value, so a bad schedule is a config error naming its line and the ticker never sees one.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::value::{valid_name, Ctx};
use super::{AdapterSpec, ConfigError, Platforms};

/// One cron job, validated; `T` is where a message goes (the registry's target).
#[derive(Clone, Debug, PartialEq)]
pub struct CronSpec<T> {
    pub(crate) name: String,
    pub(crate) schedule: CronSchedule,
    pub(crate) command: Vec<String>,
    pub timeout: Duration,
    /// Where the job's output goes, through the outbox.
    pub(crate) deliver: Option<Deliver<T>>,
    /// Also send a short notice when a run fails (only with `deliver`).
    pub(crate) deliver_failures: bool,
    /// The directories (relative ones in the profile home) from which a `MEDIA:/path` tag
    /// in the output may attach a file (only with `deliver`).
    pub(crate) attach_from: Vec<PathBuf>,
}

impl<T> CronSpec<T> {
    /// The same job, with its target as `f` makes it (its platform's canonical text, say).
    pub fn map_target<U>(self, f: impl FnOnce(T) -> U) -> CronSpec<U> {
        CronSpec {
            name: self.name,
            schedule: self.schedule,
            command: self.command,
            timeout: self.timeout,
            deliver: self.deliver.map(|d| Deliver {
                adapter: d.adapter,
                target: f(d.target),
            }),
            deliver_failures: self.deliver_failures,
            attach_from: self.attach_from,
        }
    }
}

/// `deliver = "ADAPTER:TARGET"`: an adapter of this profile and a target it can send to,
/// parsed once, here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deliver<T> {
    pub(crate) adapter: String,
    pub(crate) target: T,
}

/// A cron expression: five fields (minute hour day month weekday), or six with leading
/// seconds. It keeps the text as written, because croner's own copy is upper-cased and has
/// its aliases replaced, and messages should quote what the user wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct CronSchedule {
    text: String,
    cron: croner::Cron,
}

impl CronSchedule {
    pub(crate) fn parse(text: &str) -> Result<Self, croner::errors::CronError> {
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .build()
            .parse(text)?;
        Ok(Self {
            text: text.to_owned(),
            cron,
        })
    }

    pub(crate) fn cron(&self) -> &croner::Cron {
        &self.cron
    }
}

impl fmt::Display for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawCron {
    pub(super) name: Spanned<String>,
    schedule: Spanned<String>,
    command: Spanned<Vec<String>>,
    timeout: Option<Spanned<String>>,
    deliver: Option<Spanned<String>>,
    deliver_failures: Option<Spanned<bool>>,
    attach_from: Option<Spanned<Vec<String>>>,
}

pub(super) fn cron<P: Platforms>(
    ctx: &Ctx,
    spanned: &Spanned<RawCron>,
    adapters: &[AdapterSpec<P>],
) -> Result<CronSpec<P::Target>, ConfigError> {
    let c = spanned.get_ref();
    let name = c.name.get_ref().clone();
    if !valid_name(&name) {
        return ctx.err(
            c.name.span(),
            format!("cron name {name:?}: use 1-32 characters of a-z, 0-9, '-' and '_'"),
        );
    }
    let text = c.schedule.get_ref().trim();
    let schedule = match CronSchedule::parse(text) {
        Ok(s) => s,
        Err(e) => {
            return ctx.err(
                c.schedule.span(),
                format!(
                    "cron {name:?}: schedule {text:?}: {e}; use five fields like \"0 9 * * *\""
                ),
            )
        }
    };
    let command = c.command.get_ref().clone();
    if command.is_empty() || command[0].is_empty() {
        return ctx.err(
            c.command.span(),
            format!("cron {name:?}: command must name a program, like [\"/usr/bin/env\", \"python3\", \"job.py\"]"),
        );
    }
    let deliver = match &c.deliver {
        Some(d) => Some(deliver(ctx, &name, d, adapters)?),
        None => None,
    };
    let deliver_failures = match &c.deliver_failures {
        Some(f) if *f.get_ref() && deliver.is_none() => {
            return ctx.err(
                f.span(),
                format!(
                "cron {name:?}: deliver-failures needs deliver = \"ADAPTER:TARGET\" to say where"
            ),
            )
        }
        Some(f) => *f.get_ref(),
        None => false,
    };
    let attach_from = match &c.attach_from {
        None => vec![],
        Some(dirs) if deliver.is_none() => {
            return ctx.err(
                dirs.span(),
                format!("cron {name:?}: attach-from needs deliver = \"ADAPTER:TARGET\" to say where the files go"),
            )
        }
        Some(dirs) => {
            if dirs.get_ref().iter().any(|d| d.trim().is_empty()) {
                return ctx.err(
                    dirs.span(),
                    format!("cron {name:?}: attach-from holds an empty path; name directories, like [\"reports\"]"),
                );
            }
            dirs.get_ref().iter().map(PathBuf::from).collect()
        }
    };
    Ok(CronSpec {
        name,
        schedule,
        command,
        timeout: ctx.opt_duration("timeout", &c.timeout, Duration::from_secs(300))?,
        deliver,
        deliver_failures,
        attach_from,
    })
}

/// `deliver` names an adapter of this profile that can send, and a target in its syntax.
fn deliver<P: Platforms>(
    ctx: &Ctx,
    job: &str,
    spanned: &Spanned<String>,
    adapters: &[AdapterSpec<P>],
) -> Result<Deliver<P::Target>, ConfigError> {
    let text = spanned.get_ref().trim();
    let fail = |why: String| {
        ctx.err(
            spanned.span(),
            format!("cron {job:?}: deliver {text:?}: {why}"),
        )
    };
    let Some((adapter, target)) = text.split_once(':') else {
        return fail(
            "use \"ADAPTER:TARGET\", an adapter's name and a target in its syntax, like \
             \"qq:group:OPENID\""
                .into(),
        );
    };
    let Some(spec) = adapters.iter().find(|a| a.name == adapter) else {
        let names: Vec<&str> = adapters.iter().map(|a| a.name.as_str()).collect();
        return fail(format!(
            "no [[adapter]] named {adapter:?} in this file (adapters: {})",
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        ));
    };
    match spec.protocol.parse_target(target) {
        Ok(target) => Ok(Deliver {
            adapter: adapter.to_owned(),
            target,
        }),
        Err(e) => fail(e),
    }
}

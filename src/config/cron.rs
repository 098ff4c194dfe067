//! The `[[cron]]` section. The schedule is parsed here, once, and the job carries the parsed
//! value, so a bad schedule is a config error naming its line and the ticker never sees one.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::value::{valid_name, Ctx};
use super::ConfigError;

/// One cron job, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct CronSpec {
    pub(crate) name: String,
    pub(crate) schedule: CronSchedule,
    pub(crate) command: Vec<String>,
    pub timeout: Duration,
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
}

pub(super) fn cron(ctx: &Ctx, spanned: &Spanned<RawCron>) -> Result<CronSpec, ConfigError> {
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
    Ok(CronSpec {
        name,
        schedule,
        command,
        timeout: ctx.opt_duration("timeout", &c.timeout, Duration::from_secs(300))?,
    })
}

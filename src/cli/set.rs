//! `set` and `unset`: edit only our settings file (and, under launchd, the plist that carries
//! it), then restart a running job so it takes effect.

use super::apply::edit_job;
use super::args::{SetArgs, UnsetArgs};
use super::error::{usage, CliError};
use super::validate::{parse_profile, set_pairs};
use crate::service::role::Role;
use crate::service::settings::Directive;
use crate::systemd::escape;

pub(super) async fn set(args: SetArgs) -> Result<u8, CliError> {
    parse_profile(&args.edit.unit.profile)?;
    let settings = set_pairs(&args.pairs)?;
    edit_job(
        &args.edit.unit.profile,
        &args.edit.unit.scope,
        (Role::Gateway, false),
        args.edit.output.output(),
        "updated",
        |service, observed| service.plan_set(&settings, observed, !args.edit.no_restart),
    )
    .await
}

pub(super) async fn unset(args: UnsetArgs) -> Result<u8, CliError> {
    parse_profile(&args.edit.unit.profile)?;
    for key in &args.keys {
        if Directive::from_name(key).is_none() {
            escape::env_name(key).map_err(|e| usage(e.to_string()))?;
        }
    }
    edit_job(
        &args.edit.unit.profile,
        &args.edit.unit.scope,
        (Role::Gateway, false),
        args.edit.output.output(),
        "updated",
        |service, observed| service.plan_unset(&args.keys, observed, !args.edit.no_restart),
    )
    .await
}

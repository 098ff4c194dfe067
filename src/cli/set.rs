//! `set` and `unset`: edit only our drop-in, then restart a running unit so it takes effect.

use super::apply::edit_unit;
use super::args::{SetArgs, UnsetArgs};
use super::error::{usage, CliError};
use super::validate::{resolve_profile, set_pairs};
use crate::service::planner;
use crate::systemd::dropin::Directive;
use crate::systemd::escape;

pub(super) async fn set(args: SetArgs) -> Result<u8, CliError> {
    let scope = args.unit.scope.scope();
    let profile = resolve_profile(&args.unit.profile, scope, None)?;
    let settings = set_pairs(&args.pairs)?;
    edit_unit(
        &profile,
        scope,
        args.output.output(),
        "updated",
        |observed| planner::plan_set(&args.unit.profile, &settings, observed, !args.no_restart),
    )
    .await
}

pub(super) async fn unset(args: UnsetArgs) -> Result<u8, CliError> {
    let scope = args.unit.scope.scope();
    let profile = resolve_profile(&args.unit.profile, scope, None)?;
    for key in &args.keys {
        if Directive::from_name(key).is_none() {
            escape::env_name(key).map_err(|e| usage(e.to_string()))?;
        }
    }
    edit_unit(
        &profile,
        scope,
        args.output.output(),
        "updated",
        |observed| planner::plan_unset(&args.unit.profile, &args.keys, observed, !args.no_restart),
    )
    .await
}

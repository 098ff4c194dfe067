//! `set` and `unset`: edit only our drop-in, then restart a running unit so it takes effect.

use super::apply::{carry_out, connect, edit_lock};
use super::args::{SetArgs, UnsetArgs};
use super::error::{usage, CliError};
use super::report::Output;
use super::validate::{resolve_profile, set_pairs};
use crate::dropin::Directive;
use crate::escape;
use crate::install;
use crate::observed::{self, Siblings};

pub(super) async fn set(args: SetArgs) -> Result<u8, CliError> {
    let scope = args.scope.scope();
    let profile = resolve_profile(&args.profile, scope, None)?;
    let settings = set_pairs(&args.pairs)?;
    let _lock = edit_lock(scope, args.dry_run).await?;
    let systemd = connect(scope, args.dry_run).await?;
    let observed = observed::observe(&profile, scope, systemd.as_ref(), Siblings::Skip).await?;
    let plan = install::plan_set(&args.profile, &settings, &observed, !args.no_restart)?;
    let out = Output {
        dry_run: args.dry_run,
        json: args.json,
    };
    carry_out(&plan, systemd.as_ref(), scope, "updated", out, None).await
}

pub(super) async fn unset(args: UnsetArgs) -> Result<u8, CliError> {
    let scope = args.scope.scope();
    let profile = resolve_profile(&args.profile, scope, None)?;
    for key in &args.keys {
        if Directive::from_name(key).is_none() {
            escape::env_name(key).map_err(|e| usage(e.to_string()))?;
        }
    }
    let _lock = edit_lock(scope, args.dry_run).await?;
    let systemd = connect(scope, args.dry_run).await?;
    let observed = observed::observe(&profile, scope, systemd.as_ref(), Siblings::Skip).await?;
    let plan = install::plan_unset(&args.profile, &args.keys, &observed, !args.no_restart)?;
    let out = Output {
        dry_run: args.dry_run,
        json: args.json,
    };
    carry_out(&plan, systemd.as_ref(), scope, "updated", out, None).await
}

//! `render`: the files `install` would write, with no side effects, so a person can read them
//! before trusting them: a unit and its drop-in, or a LaunchAgent plist (`--target`).

use super::args::RenderArgs;
use super::error::{usage, CliError};
use super::service::{self, Spec};
use super::validate::settings;
use crate::exit_code;
use crate::launchd::plist::Overrides;
use crate::service::definition::Definition;
use crate::service::manager::Manager;
use crate::systemd::dropin::{DropIn, DROPIN_NAME};

pub(super) fn run(args: RenderArgs) -> Result<u8, CliError> {
    let manager = match args.target {
        Some(t) => t.into(),
        None => Manager::current().map_err(|e| usage(e.to_string()))?,
    };
    let spec = service::spec(manager, &args.source)?;
    let settings = settings(&args.env, &[], None, None)?;
    match spec {
        Spec::Unit(unit) => {
            print!("{}", unit.render()?);
            let mut dropin = DropIn::default();
            dropin.env.extend(settings.env);
            if !dropin.is_empty() {
                println!("\n# {DROPIN_NAME}");
                print!("{}", dropin.render()?);
            }
        }
        Spec::LaunchAgent(agent) => {
            // launchd has no drop-ins: the variables go into the plist itself.
            let mut overrides = Overrides::default();
            overrides.env.extend(settings.env);
            let text = Definition::render(&agent, &overrides).map_err(|e| usage(e.to_string()))?;
            print!("{text}");
        }
    }
    Ok(exit_code::OK)
}

//! `render`: the unit and drop-in that `install` would write, with no side effects, so a
//! person can read them before trusting them.

use super::args::RenderArgs;
use super::error::CliError;
use super::validate::{settings, unit_spec};
use crate::exit_code;
use crate::systemd::dropin::{DropIn, DROPIN_NAME};

pub(super) fn run(args: RenderArgs) -> Result<u8, CliError> {
    let spec = unit_spec(&args.source)?;
    let settings = settings(&args.env, None, None)?;
    print!("{}", spec.render()?);
    let mut dropin = DropIn::default();
    dropin.env.extend(settings.env);
    if !dropin.is_empty() {
        println!("\n# {DROPIN_NAME}");
        print!("{}", dropin.render()?);
    }
    Ok(exit_code::OK)
}

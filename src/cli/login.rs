//! `login KIND`: a login that needs a person (a QR code to scan), for a profile's adapter of a
//! platform that has one, stored where the adapter reads it by the platform's wing. The
//! credential is never printed; the bot's account and a short fingerprint say which login it
//! is.

use super::args::{LifecycleArgs, LoginCommand, UnitArgs, WaitArgs};
use super::error::{usage, CliError};
use super::validate::resolve_profile;
use crate::config;
use crate::exit_code;
use crate::platform::Protocol;
use crate::systemd::Job;

pub(super) fn run(login: LoginCommand) -> Result<u8, CliError> {
    let LoginCommand { kind, args } = login;
    let profile = resolve_profile(&args.profile, args.scope.scope(), None)?;
    let config_path = profile.config_file();
    let config = config::load::<Protocol>(&config_path)?;
    let of_kind: Vec<_> = config
        .adapters
        .iter()
        .filter(|a| a.protocol.kind() == kind)
        .collect();
    let spec = match (&args.adapter, of_kind.as_slice()) {
        (Some(name), _) => of_kind.iter().find(|a| &a.name == name).ok_or_else(|| {
            usage(format!(
                "--adapter {name}: {} has no {kind} adapter of that name",
                config_path.display()
            ))
        })?,
        (None, [one]) => one,
        (None, []) => {
            return Err(usage(format!(
                "{} has no {kind} adapter; add one ([[adapter]] with kind = \"{kind}\") first",
                config_path.display()
            )))
        }
        (None, _) => {
            return Err(usage(format!(
                "{} has several {kind} adapters; name one with --adapter",
                config_path.display()
            )))
        }
    };
    let rt = super::runtime()?;
    let login = rt.block_on(crate::platform::log_in(spec, args.timeout))?;
    let identity = spec.identity(&[login.credential]);
    println!(
        "\nLogged in: bot {} (token fingerprint {}), stored in {} (mode 0600).",
        crate::safe_text::visible(&login.account),
        crate::gateway::token_lock::fingerprint(&identity),
        login.stored_at.display()
    );
    if args.restart {
        let restart = LifecycleArgs {
            unit: UnitArgs {
                profile: args.profile.clone(),
                scope: args.scope.clone(),
            },
            wait: WaitArgs::default(),
        };
        rt.block_on(super::lifecycle::run(restart, Job::Restart))?;
    } else {
        println!(
            "A running gateway that waits for this login picks it up within seconds. \
             Otherwise start it: hermes-svc restart --profile {}",
            args.profile
        );
    }
    Ok(exit_code::OK)
}

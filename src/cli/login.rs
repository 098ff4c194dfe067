//! `login weixin`: a QR login for a profile's Weixin adapter, stored where the adapter reads
//! it. The token is never printed; the bot's account id and a short fingerprint say which
//! login it is.

use std::io::Write;

use super::args::{LifecycleArgs, UnitArgs, WaitArgs, WeixinLoginArgs};
use super::error::{usage, CliError};
use super::validate::resolve_profile;
use crate::config;
use crate::exit_code;
use crate::platform::weixin::qr::{self, Step};
use crate::platform::{weixin, Protocol};
use crate::systemd::Job;

pub(super) fn weixin(args: WeixinLoginArgs) -> Result<u8, CliError> {
    let profile = resolve_profile(&args.profile, args.scope.scope(), None)?;
    let config_path = profile.config_file();
    let config = config::load(&config_path)?;
    let weixin: Vec<_> = config
        .adapters
        .iter()
        .filter(|a| matches!(a.protocol, Protocol::Weixin(_)))
        .collect();
    let spec = match (&args.adapter, weixin.as_slice()) {
        (Some(name), _) => weixin.iter().find(|a| &a.name == name).ok_or_else(|| {
            usage(format!(
                "--adapter {name}: {} has no Weixin adapter of that name",
                config_path.display()
            ))
        })?,
        (None, [one]) => one,
        (None, []) => {
            return Err(usage(format!(
                "{} has no Weixin adapter; add one ([[adapter]] with kind = \"weixin\") first",
                config_path.display()
            )))
        }
        (None, _) => {
            return Err(usage(format!(
                "{} has several Weixin adapters; name one with --adapter",
                config_path.display()
            )))
        }
    };
    let Protocol::Weixin(weixin::Config {
        api_base,
        login_file,
        ..
    }) = &spec.protocol
    else {
        return Err(usage("not a Weixin adapter"));
    };
    let http = reqwest::Client::builder()
        .user_agent(concat!("hermes-svc/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| usage(format!("cannot build an HTTP client: {e}")))?;
    let rt = super::runtime()?;
    println!(
        "Scan this code with WeChat to log in adapter {:?}:",
        spec.name
    );
    let login = rt.block_on(qr::login(&http, api_base, args.timeout, show))?;
    login.write(login_file)?;
    let identity = spec.identity(&[login.token()]);
    println!(
        "\nLogged in: bot {} (token fingerprint {}), stored in {} (mode 0600).",
        crate::safe_text::visible(&login.account_id),
        crate::gateway::token_lock::fingerprint(&identity),
        login_file.display()
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

fn show(step: Step) {
    match step {
        Step::Code { url, drawing } => {
            println!("{drawing}");
            println!("Or open: {}", crate::safe_text::visible(url));
        }
        Step::Waiting => print!("."),
        Step::Scanned => println!("\nScanned; confirm the login in WeChat."),
        Step::Redirected => println!("\nScanned; the platform moved this login to another host."),
        Step::Expired { refresh } => println!("\nThe code expired; a new one ({refresh}/3):"),
    }
    let _ = std::io::stdout().flush();
}

//! `hermes-svc login weixin` at the terminal: the QR code drawn, each step said, and the
//! confirmed login stored where the adapter reads it. The token is never printed.

use std::io::Write;
use std::time::Duration;

use super::qr::{self, Step};
use super::Config;
use crate::config::AdapterSpec;
use crate::platform::{LoggedIn, LoginError};

pub(super) async fn log_in(
    spec: &AdapterSpec<Config>,
    timeout: Duration,
) -> Result<LoggedIn, LoginError> {
    let http = reqwest::Client::builder()
        .user_agent(concat!("hermes-svc/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| incomplete(Box::new(e)))?;
    println!(
        "Scan this code with WeChat to log in adapter {:?}:",
        spec.name
    );
    let config = &spec.protocol;
    let login = qr::login(&http, &config.api_base, timeout, show)
        .await
        .map_err(|e| incomplete(Box::new(e)))?;
    login
        .write(&config.login_file)
        .map_err(|e| LoginError::Store(Box::new(e)))?;
    Ok(LoggedIn {
        account: login.account_id.clone(),
        credential: login.token(),
        stored_at: config.login_file.clone(),
    })
}

fn incomplete(source: Box<dyn std::error::Error + Send + Sync>) -> LoginError {
    LoginError::Incomplete {
        platform: "Weixin",
        source,
    }
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

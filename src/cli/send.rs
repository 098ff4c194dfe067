//! `send`: a message handed to a profile's running gateway through its local API, which
//! queues it durably before answering. The command never talks to a platform itself, so it
//! needs no token and cannot race the gateway's own sends.

use std::io::{self, IsTerminal, Read};

use super::args::SendArgs;
use super::error::{usage, CliError};
use super::validate::parse_profile;
use crate::api::client::{Client, ClientError};
use crate::api::wire::SendBody;
use crate::api::{Submitted, MAX_BODY};
use crate::exit_code;
use crate::gateway::outbox::{Message, Policy};
use crate::profile::Profile;
use crate::safe_text::visible;

pub(super) fn run(args: SendArgs) -> Result<u8, CliError> {
    let profile =
        Profile::from_env(parse_profile(&args.profile)?).map_err(|e| usage(e.to_string()))?;
    let (adapter, target) = parse_to(&args.to)?;
    let text = match args.text {
        Some(text) => text,
        None if !args.attach.is_empty() && io::stdin().is_terminal() => String::new(),
        None => read_stdin()?,
    };
    let idempotency_key = match args.idempotency_key {
        Some(key) if key.trim().is_empty() => {
            return Err(usage(
                "--idempotency-key must not be empty: give a key of your own, or leave the flag out for a random one",
            ))
        }
        Some(key) => key,
        None => random_key(),
    };
    let mut body = SendBody {
        adapter,
        target,
        text,
        reply_to: args.reply_to,
        idempotency_key,
        policy: args.at_least_once.then_some(Policy::AtLeastOnce),
        attachments: vec![],
    };
    let client = Client::new(profile.api_socket());
    let runtime = super::runtime()?;
    for path in &args.attach {
        let (file, len, name) = open_attachment(path)?;
        let uploaded = runtime
            .block_on(client.upload(file, len, &name))
            .map_err(|e| api_error(&profile, &args.to, &body.idempotency_key, e))?;
        body.attachments.push(uploaded.id);
    }
    let submitted = runtime
        .block_on(client.submit(&body))
        .map_err(|e| api_error(&profile, &args.to, &body.idempotency_key, e))?;
    println!("{}", describe(&submitted, args.json)?);
    Ok(exit_code::OK)
}

/// The file `--attach` names, opened to stream, with its length and the name the chat is to
/// show (its own).
fn open_attachment(path: &std::path::Path) -> Result<(tokio::fs::File, u64, String), CliError> {
    let fail = |e: io::Error| usage(format!("--attach {}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(fail)?;
    let meta = file.metadata().map_err(fail)?;
    if !meta.is_file() {
        return Err(usage(format!(
            "--attach {}: not a regular file; give the path of a file to send",
            path.display()
        )));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    Ok((tokio::fs::File::from_std(file), meta.len(), name))
}

/// `ADAPTER:TARGET`, split at the first colon: the target may hold colons of its own
/// (`qq:group:OPENID`).
fn parse_to(to: &str) -> Result<(String, String), CliError> {
    match to.split_once(':') {
        Some((adapter, target)) if !adapter.is_empty() && !target.is_empty() => {
            Ok((adapter.to_owned(), target.to_owned()))
        }
        _ => Err(usage(format!(
            "--to {to:?} is not ADAPTER:TARGET: give an adapter's name from gateway.toml, a colon and the target, e.g. --to qq:group:OPENID or --to dc:CHANNEL_ID"
        ))),
    }
}

/// The text from stdin, at most [`MAX_BODY`] bytes, without one trailing newline. A
/// terminal is refused rather than waited on: a missing TEXT is more likely than a message
/// about to be typed.
fn read_stdin() -> Result<String, CliError> {
    let stdin = io::stdin();
    if stdin.is_terminal() {
        return Err(usage(
            "no message text: give it as the last argument, or pipe it in on stdin",
        ));
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .take(MAX_BODY as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| usage(format!("cannot read the message text from stdin: {e}")))?;
    if bytes.len() > MAX_BODY {
        return Err(usage(format!(
            "the message text on stdin is over {} KiB; no platform takes a message that long",
            MAX_BODY / 1024
        )));
    }
    let mut text =
        String::from_utf8(bytes).map_err(|_| usage("the message text on stdin is not UTF-8"))?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}

/// 128 random bits: a command run twice is two messages, unless given a key to share.
fn random_key() -> String {
    format!("cli-{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// What a failed submit tells the user. Where the request may have reached the gateway (no
/// answer in time, the connection dropped, the gateway's own failure) the message may be
/// queued, so the answer is "unknown" with the key to retry under: a retry with that key is
/// queued at most once, where a retry without it would post a second copy.
fn api_error(profile: &Profile, to: &str, key: &str, error: ClientError) -> CliError {
    match error {
        ClientError::NotRunning { socket, .. } => CliError::GatewayNotRunning {
            profile: profile.name().to_string(),
            socket,
        },
        e @ (ClientError::Timeout { .. } | ClientError::Http { .. }) => {
            outcome_unknown(profile, to, key, e)
        }
        // 503 is the one 5xx that says what happened: no outbox, nothing queued.
        e @ (ClientError::Refused { status, .. } | ClientError::Unexpected { status, .. })
            if status >= 500 && status != 503 =>
        {
            outcome_unknown(profile, to, key, e)
        }
        other => CliError::Api(other),
    }
}

fn outcome_unknown(profile: &Profile, to: &str, key: &str, source: ClientError) -> CliError {
    CliError::SendOutcomeUnknown {
        retry: format!(
            "hermes-svc send --profile {} --to {} --idempotency-key {}",
            profile.name(),
            crate::safe_text::visible(to),
            crate::safe_text::visible(key)
        ),
        source,
    }
}

/// `ID STATE`, noting a message that an earlier submit with the same key queued; or the
/// message as JSON.
fn describe(submitted: &Submitted, json: bool) -> Result<String, CliError> {
    let message = &submitted.message;
    if json {
        return Ok(serde_json::to_string(message)?);
    }
    let mut line = format!("{} {}", visible(&message.id), state_name(message));
    if !submitted.new {
        line.push_str(" (already queued with this idempotency key; not queued again)");
    }
    Ok(line)
}

fn state_name(message: &Message) -> String {
    serde_json::to_value(message.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_splits_at_the_first_colon_and_names_the_fix() {
        assert_eq!(
            parse_to("qq:group:ABC").unwrap(),
            ("qq".to_owned(), "group:ABC".to_owned())
        );
        assert_eq!(
            parse_to("dc:123").unwrap(),
            ("dc".to_owned(), "123".to_owned())
        );
        for bad in ["qq", ":x", "qq:", ""] {
            let err = parse_to(bad).unwrap_err();
            assert_eq!(err.exit_code(), exit_code::USAGE);
            assert!(err.to_string().contains("ADAPTER:TARGET"), "{err}");
        }
    }

    #[test]
    fn random_keys_differ() {
        let (a, b) = (random_key(), random_key());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
    }

    #[test]
    fn not_running_names_the_profile_socket_and_fix() {
        let profile = Profile::new(
            crate::profile::ProfileName::parse("coder").unwrap(),
            "/h".into(),
        )
        .unwrap();
        let err = api_error(
            &profile,
            "qq:group:A",
            "k",
            ClientError::NotRunning {
                socket: profile.api_socket(),
                source: io::ErrorKind::NotFound.into(),
            },
        );
        assert_eq!(
            err.to_string(),
            "the gateway for profile coder is not running (no API socket at /h/profiles/coder/state/api/agent.sock); start it with hermes-svc start --profile coder"
        );
        assert_eq!(err.exit_code(), exit_code::FAILURE);
        let refused = CliError::Api(ClientError::Refused {
            status: 400,
            code: "unknown_adapter".into(),
            message: "no adapter x".into(),
        });
        assert_eq!(refused.exit_code(), exit_code::USAGE);
    }
}

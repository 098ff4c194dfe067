//! `pairing`: the owner's side of DM pairing (`access/pairing.rs`). A stranger who writes to
//! the bot is sent a code; the owner lists who asked, and approves or denies by the code.
//! Everything goes through the profile's pairing store under its lock, whether or not the
//! gateway runs: a running gateway sees the change on the sender's next message.

use serde_json::json;

use super::args::PairingCommand;
use super::error::{usage, CliError};
use super::validate::parse_profile;
use crate::access::pairing::{self, Book, PairingError, Store};
use crate::exit_code;
use crate::profile::Profile;
use crate::safe_text::visible;

pub(super) fn run(command: PairingCommand) -> Result<u8, CliError> {
    let profile_name = match &command {
        PairingCommand::List { profile, .. }
        | PairingCommand::Approve { profile, .. }
        | PairingCommand::Deny { profile, .. }
        | PairingCommand::Revoke { profile, .. } => profile.clone(),
    };
    let profile =
        Profile::from_env(parse_profile(&profile_name)?).map_err(|e| usage(e.to_string()))?;
    refuse_another_users_home(&profile)?;
    let store = Store::new(&profile.access_dir());
    let now = pairing::now();
    match command {
        PairingCommand::List { json, .. } => {
            let book = store.read().map_err(failed)?.at(now);
            if json {
                println!("{}", list_json(&book, now));
            } else {
                print!("{}", list_text(&book, now));
            }
            Ok(exit_code::OK)
        }
        PairingCommand::Approve { code, .. } => {
            let p = store
                .change(|b| b.approve(&code, now))
                .map_err(failed)?
                .map_err(refused)?;
            said(&p, "approved", "their next message reaches the agent")
        }
        PairingCommand::Deny { code, .. } => {
            let p = store
                .change(|b| b.deny(&code, now))
                .map_err(failed)?
                .map_err(refused)?;
            said(&p, "denied the code sent to", "they are not admitted")
        }
        PairingCommand::Revoke {
            adapter, sender, ..
        } => {
            if store
                .change(|b| b.revoke(&adapter, &sender))
                .map_err(failed)?
            {
                println!(
                    "revoked {} on adapter {}: their messages no longer reach the agent",
                    visible(&sender),
                    visible(&adapter)
                );
                Ok(exit_code::OK)
            } else {
                Err(CliError::Pairing(format!(
                    "{} is not an approved sender on adapter {}; `hermes-svc pairing list -p {}` \
                     shows who is",
                    visible(&sender),
                    visible(&adapter),
                    profile.name().as_str()
                )))
            }
        }
    }
}

/// Root changing another account's pairing store would leave files that account's gateway
/// cannot read (or, worse, must refuse as not its own): the store is the profile user's.
fn refuse_another_users_home(profile: &Profile) -> Result<(), CliError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(profile.home()) else {
        return Ok(());
    };
    let me = nix::unistd::geteuid().as_raw();
    if me != meta.uid() {
        let owner = nix::unistd::User::from_uid(meta.uid().into())
            .ok()
            .flatten()
            .map_or_else(|| meta.uid().to_string(), |u| u.name);
        return Err(usage(format!(
            "{} belongs to {owner}: run this as that user (sudo -u {owner} hermes-svc pairing ...), \
             so the pairing store stays theirs",
            profile.home().display()
        )));
    }
    Ok(())
}

/// What became of the sender `p` names: `DONE SENDER on adapter ADAPTER: THEN`.
fn said(p: &pairing::Pending, done: &str, then: &str) -> Result<u8, CliError> {
    println!(
        "{done} {} on adapter {}: {then}",
        who(&p.sender, p.name.as_deref()),
        visible(&p.adapter)
    );
    Ok(exit_code::OK)
}

fn failed(e: PairingError) -> CliError {
    CliError::Pairing(crate::error_chain::one_line(&e))
}

fn refused(e: PairingError) -> CliError {
    match e {
        PairingError::NotACode { .. } => usage(e.to_string()),
        e => CliError::Pairing(e.to_string()),
    }
}

fn who(sender: &str, name: Option<&str>) -> String {
    match name {
        Some(name) => format!("{} ({})", visible(sender), visible(name)),
        None => visible(sender).into_owned(),
    }
}

fn ago(then: u64, now: u64) -> String {
    crate::gateway::health::short(std::time::Duration::from_secs(now.saturating_sub(then)))
}

fn list_text(book: &Book, now: u64) -> String {
    let mut out = String::new();
    if let Some(until) = book.locked_until {
        out.push_str(&format!(
            "approval is LOCKED OUT for {} more minutes after too many wrong codes\n",
            until.saturating_sub(now).div_ceil(60)
        ));
    }
    if book.pending.is_empty() {
        out.push_str("no code waits for approval\n");
    } else {
        out.push_str(
            "waiting for approval (approve with: hermes-svc pairing approve -p PROFILE CODE):\n",
        );
        for p in &book.pending {
            out.push_str(&format!(
                "  {:<12} {:<24} sent {} ago, expires in {}  [{}]\n",
                visible(&p.adapter),
                who(&p.sender, p.name.as_deref()),
                ago(p.created_at, now),
                ago(now, p.expires_at()),
                p.tag()
            ));
        }
    }
    let approved: Vec<_> = book
        .approved
        .iter()
        .flat_map(|(adapter, senders)| senders.iter().map(move |(s, a)| (adapter, s, a)))
        .collect();
    if approved.is_empty() {
        out.push_str("no sender is approved\n");
    } else {
        out.push_str("approved:\n");
        for (adapter, sender, a) in approved {
            out.push_str(&format!(
                "  {:<12} {:<24} approved {} ago\n",
                visible(adapter),
                who(sender, a.name.as_deref()),
                ago(a.approved_at, now)
            ));
        }
    }
    out
}

fn list_json(book: &Book, now: u64) -> serde_json::Value {
    let pending: Vec<_> = book
        .pending
        .iter()
        .map(|p| {
            json!({
                "adapter": p.adapter, "sender": p.sender, "name": p.name,
                "created_at": p.created_at, "expires_at": p.expires_at(), "tag": p.tag(),
            })
        })
        .collect();
    let approved: Vec<_> = book
        .approved
        .iter()
        .flat_map(|(adapter, senders)| {
            senders.iter().map(move |(sender, a)| {
                json!({"adapter": adapter, "sender": sender, "name": a.name, "approved_at": a.approved_at})
            })
        })
        .collect();
    json!({
        "pending": pending,
        "approved": approved,
        "locked_until": book.locked_until.filter(|until| *until > now),
    })
}

//! What the shell and `man` learn from the clap definitions in `args.rs`: completion scripts
//! (`completions SHELL`), the answers to the completion requests those scripts make, and a
//! manual page per command (`man DIR`).
//!
//! Completion is dynamic: the registered script calls `HERMES_SVC_COMPLETE=SHELL hermes-svc -- WORDS...`
//! at each TAB, so `--profile` completes from the profiles on disk at that moment, and a new
//! subcommand or flag needs no new script. Since the binary answers, a script written by one
//! version keeps working with the next.

use std::io::Write;
use std::path::Path;

use clap::CommandFactory;
use clap_complete::env::Shells;

use super::args::{Cli, CompletionsArgs, ManArgs};
use super::error::CliError;
use crate::exit_code;

/// The variable the scripts set when they ask for completions: a name of our own, so that a
/// `COMPLETE` some other tool leaves in the environment never turns a gateway into a completer.
const VAR: &str = "HERMES_SVC_COMPLETE";
const BIN: &str = "hermes-svc";

/// Answer a completion request, if this run is one, and exit; otherwise return at once.
/// Runs before anything else writes to stdout.
pub(super) fn answer_completion_request() {
    clap_complete::CompleteEnv::with_factory(Cli::command)
        .var(VAR)
        .bin(BIN)
        .completer(BIN)
        .complete();
}

pub(super) fn completions(args: CompletionsArgs) -> Result<u8, CliError> {
    let shells = Shells::builtins();
    let shell = shells
        .completer(&args.shell)
        .ok_or_else(|| CliError::Usage(format!("no completions for shell {:?}", args.shell)))?;
    let mut script = Vec::new();
    // The script runs `hermes-svc` from PATH, as a packaged or `cargo install`ed binary is.
    shell
        .write_registration(VAR, BIN, BIN, BIN, &mut script)
        .map_err(CliError::Stdout)?;
    if args.shell == "zsh" {
        script.extend_from_slice(zsh_autoload_tail().as_bytes());
    }
    std::io::stdout()
        .write_all(&script)
        .map_err(CliError::Stdout)?;
    Ok(exit_code::OK)
}

/// What makes the zsh script also work as an autoloaded `_hermes-svc` in `$fpath` (as Debian's
/// package installs it in vendor-completions): compinit then runs the whole file as that
/// function at the first TAB, and clap's script only registers its completer there, so
/// without this tail the first TAB of every shell offers nothing. Sourced, it does nothing.
fn zsh_autoload_tail() -> String {
    format!("if [[ ${{funcstack[1]-}} == _{BIN} ]]; then\n    \"$_comps[{BIN}]\" \"$@\"\nfi\n")
}

/// One page per command, `hermes-svc.1`, `hermes-svc-install.1`, ..., each written whole.
pub(super) fn man(args: ManArgs) -> Result<u8, CliError> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut written = vec![];
    write_pages(&cmd, &args.dir, &mut written).map_err(|e| CliError::Write {
        path: args.dir.clone(),
        source: e,
    })?;
    for path in written {
        println!("{}", path.display());
    }
    Ok(exit_code::OK)
}

fn write_pages(
    cmd: &clap::Command,
    dir: &Path,
    written: &mut Vec<std::path::PathBuf>,
) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut page = Vec::new();
    man.render(&mut page)?;
    let path = dir.join(man.get_filename());
    crate::atomic_file::write(&path, &page, 0o644)?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}

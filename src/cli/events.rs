//! `events`: the inbound events a profile's gateway has spooled, printed for a person or for
//! `jq`, once or following the inbox as it grows and rotates.

use std::io::{self, Write};
use std::path::Path;

mod via_api;

use super::args::EventsArgs;
use super::error::{usage, CliError, FollowError};
use super::validate::parse_profile;
use crate::api::client::Client;
use crate::config;
use crate::exit_code;
use crate::gateway::spool::reader::{after, read_new, read_records, Record};
use crate::gateway::spool::{SpoolError, FILE_NAME, FOLLOW_POLL};
use crate::platform::{Normaliser, Protocol};
use crate::profile::Profile;
use crate::safe_text::visible;

/// With `--follow`, through the gateway's API when it answers (a long-poll, so a new event
/// shows at once), else by watching the files.
pub(super) fn run(args: EventsArgs) -> Result<u8, CliError> {
    let profile =
        Profile::from_env(parse_profile(&args.profile)?).map_err(|e| usage(e.to_string()))?;
    let mut out = std::io::stdout();
    // Without a readable config the events are still there, only not read as messages.
    let normaliser = config::load::<Protocol>(&profile.config_file())
        .map(|c| Normaliser::new(&c))
        .unwrap_or_default();
    let listing = Listing {
        since: args.since.as_deref(),
        follow: args.follow,
        json: args.json,
        normaliser: &normaliser,
    };
    let runtime = super::runtime()?;
    if listing.follow {
        let client = Client::new(profile.api_socket());
        let followed = runtime.block_on(via_api::follow(
            &client,
            &profile.inbox_dir(),
            listing,
            &mut out,
        ));
        match followed {
            Ok(false) => {} // no gateway answers: the files
            Ok(true) => return Ok(exit_code::OK),
            Err(FollowError::Spool(SpoolError::Output(e)))
                if e.kind() == io::ErrorKind::BrokenPipe =>
            {
                return Ok(exit_code::OK)
            }
            Err(e) => return Err(e.into()),
        }
    }
    runtime.block_on(events_command(&profile.inbox_dir(), listing, &mut out))?;
    Ok(exit_code::OK)
}

/// Which events `events` prints and how: the flags, apart from the profile they are read from.
#[derive(Clone, Copy)]
struct Listing<'a> {
    since: Option<&'a str>,
    follow: bool,
    json: bool,
    /// With `json`, a chat message's line gains `"message"`, its normalised form.
    normaliser: &'a Normaliser,
}

/// `hermes-svc events`: print the spool, one event per line; with `follow`, keep printing new
/// events until the process is killed. With `json` each line is the stored JSON; otherwise
/// `<received_at> <adapter> <kind> <id> <data>`, with control characters shown as escapes
/// (see [`crate::safe_text`]). A closed output (`| head`) ends it quietly.
///
/// File reads are small and blocking, which is fine on the CLI's own runtime.
async fn events_command(
    dir: &Path,
    listing: Listing<'_>,
    out: &mut (dyn Write + Send),
) -> Result<(), SpoolError> {
    match events_inner(dir, listing, out).await {
        Err(SpoolError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

async fn events_inner(
    dir: &Path,
    listing: Listing<'_>,
    out: &mut (dyn Write + Send),
) -> Result<(), SpoolError> {
    let Listing { since, follow, .. } = listing;
    let (mut records, mut current) = read_records(dir)?;
    if !follow {
        if let Some(current) = current.as_mut() {
            current.finish(&mut records);
        }
    }
    print(&after(records, since)?, listing, out)?;
    if !follow {
        return Ok(());
    }

    let path = dir.join(FILE_NAME);
    loop {
        tokio::time::sleep(FOLLOW_POLL).await;
        let mut batch = Vec::new();
        read_new(&path, &mut current, &mut batch)?;
        print(&batch, listing, out)?;
    }
}

fn print(
    records: &[Record],
    listing: Listing<'_>,
    out: &mut (dyn Write + Send),
) -> Result<(), SpoolError> {
    for r in records {
        if listing.json {
            match listing.normaliser.message(&r.event) {
                Some(m) if r.raw.starts_with('{') => {
                    let m = serde_json::to_string(&m).expect("a message serialises");
                    let unjudged = if r.event.access.is_none() {
                        crate::access::UNJUDGED_FIELD
                    } else {
                        ""
                    };
                    writeln!(out, "{{\"message\":{m},{unjudged}{}", &r.raw[1..])
                }
                _ => writeln!(out, "{}", r.raw),
            }
        } else {
            // Every field came from a platform or the spool file, so none is printed raw: an
            // event kind of `ESC[2J` must not clear the reader's screen. `data` is JSON, whose
            // encoder escapes C0 controls but not DEL, C1 or the bidi overrides.
            let e = &r.event;
            let data = e.data.to_string();
            writeln!(
                out,
                "{} {} {} {} {}{}",
                visible(&e.received_at),
                visible(&e.adapter),
                visible(&e.kind),
                visible(&e.id),
                verdict(e, listing.normaliser),
                visible(&data)
            )
        }
        .map_err(SpoolError::Output)?;
    }
    out.flush().map_err(SpoolError::Output)
}

/// A chat message's verdict as a word before its data, `refused:RULE ` or `admitted:RULE `
/// (docs/config.md lists the rules); nothing for an event that is not a chat message.
fn verdict(e: &crate::gateway::spool::Event, normaliser: &Normaliser) -> String {
    match &e.access {
        Some(v) if v.admitted => format!("admitted:{} ", visible(&v.rule)),
        Some(v) => format!("refused:{} ", visible(&v.rule)),
        None if normaliser.message(e).is_some() => {
            format!("refused:{} ", crate::access::Rule::Unjudged.as_str())
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::gateway::spool::tests::{event, small, temp_dir};
    use crate::gateway::spool::{Event, Spool, ROTATED_NAME};

    /// `events` without `--follow`, into a string.
    async fn list_once(dir: &Path, since: Option<&str>, json: bool) -> Result<String, SpoolError> {
        let mut out = Vec::new();
        let listing = Listing {
            since,
            follow: false,
            json,
            normaliser: &Normaliser::default(),
        };
        events_command(dir, listing, &mut out).await?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[tokio::test]
    async fn events_prints_text_or_stored_json() {
        let dir = temp_dir("print");
        let spool = Spool::open(&dir).unwrap();
        spool.append(&event("a")).await.unwrap();
        spool.append(&event("b")).await.unwrap();

        assert_eq!(
            list_once(&dir, Some("a"), false).await.unwrap(),
            "2024-05-01T09:00:00.123Z qq MESSAGE_CREATE b {\"content\":\"hello b\",\"n\":[1,2]}\n"
        );
        assert_eq!(
            list_once(&dir, None, true).await.unwrap(),
            fs::read_to_string(spool.path()).unwrap()
        );
        let err = list_once(&dir, Some("nope"), true).await;
        assert!(matches!(err, Err(SpoolError::UnknownSince(_))));

        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        events_command(
            &dir,
            Listing {
                since: None,
                follow: false,
                json: false,
                normaliser: &Normaliser::default(),
            },
            &mut Closed,
        )
        .await
        .unwrap();
        let _ = fs::remove_dir_all(dir);
    }

    #[derive(Clone, Default)]
    struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn ids(&self) -> Vec<String> {
            String::from_utf8_lossy(&self.0.lock().unwrap())
                .lines()
                .filter_map(|l| serde_json::from_str::<Event>(l).ok())
                .map(|e| e.id)
                .collect()
        }
    }

    #[tokio::test]
    async fn follow_prints_new_events_across_rotation() {
        let dir = temp_dir("follow");
        let line_len = serde_json::to_string(&event("f000")).unwrap().len() as u64 + 1;
        let spool = Spool::open_with(&dir, small(4 * line_len)).unwrap();
        spool.append(&event("f000")).await.unwrap();
        spool.append(&event("f001")).await.unwrap();

        let out = Shared::default();
        let follower = tokio::spawn({
            let (dir, mut out) = (dir.clone(), out.clone());
            async move {
                events_command(
                    &dir,
                    Listing {
                        since: Some("f000"),
                        follow: true,
                        json: true,
                        normaliser: &Normaliser::default(),
                    },
                    &mut out,
                )
                .await
            }
        });
        let want = |n: usize| (1..n).map(|i| format!("f{i:03}")).collect::<Vec<_>>();
        let wait_for = |n: usize| {
            let out = out.clone();
            async move {
                let deadline = Instant::now() + Duration::from_secs(5);
                while out.ids() != want(n) && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                out.ids()
            }
        };
        assert_eq!(wait_for(2).await, want(2));

        // Two more, then a rotation (after f003), then more in the new file.
        for i in 2..7 {
            spool.append(&event(&format!("f{i:03}"))).await.unwrap();
        }
        assert!(dir.join(ROTATED_NAME).exists());
        assert_eq!(wait_for(7).await, want(7));
        spool.append(&event("f007")).await.unwrap();
        assert_eq!(wait_for(8).await, want(8));
        assert!(!follower.is_finished());
        follower.abort();
        let _ = fs::remove_dir_all(dir);
    }
}

//! The spool's tests: appends, dedupe, rotation and torn lines, checked by reading back.

use super::*;
use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::PermissionsExt;
use std::time::Instant;

pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hsv-spool-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

pub(crate) fn event(id: &str) -> Event {
    Event {
        id: id.to_owned(),
        adapter: "qq".into(),
        kind: "MESSAGE_CREATE".into(),
        seq: Some(7),
        received_at: "2024-05-01T09:00:00.123Z".into(),
        data: serde_json::json!({"content": format!("hello {id}"), "n": [1, 2]}),
        access: None,
    }
}

fn ids(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.id.as_str()).collect()
}

pub(crate) fn small(rotate_bytes: u64) -> SpoolOptions {
    SpoolOptions {
        rotate_bytes,
        ..SpoolOptions::default()
    }
}

#[test]
fn the_spool_is_send_and_sync() {
    fn assert<T: Send + Sync>() {}
    assert::<Spool>();
    assert::<Arc<Spool>>();
}

#[tokio::test]
async fn appended_events_read_back_in_order() {
    let dir = temp_dir("roundtrip");
    let spool = Spool::open(&dir.join("inbox")).unwrap();
    let dir = dir.join("inbox");
    assert_eq!(spool.path(), dir.join("events.jsonl"));
    let events = [
        event("a"),
        event("b"),
        Event::new("c", "dc", "X", None, serde_json::Value::Null),
    ];
    for e in &events {
        assert_eq!(spool.append(e).await.unwrap(), Appended::New);
    }
    spool.sync().await.unwrap();
    assert_eq!(read(&dir, None).unwrap(), events);
    assert_eq!(fs::read_to_string(spool.path()).unwrap().lines().count(), 3);
    assert_eq!(
        fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        fs::metadata(spool.path()).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let at = &events[2].received_at;
    assert!(
        at.len() == 24 && at.ends_with('Z') && at.as_bytes()[19] == b'.',
        "{at}"
    );
    let _ = fs::remove_dir_all(dir.parent().unwrap());
}

#[tokio::test]
async fn a_duplicate_id_is_written_once_even_across_a_reopen() {
    let dir = temp_dir("dupes");
    let spool = Spool::open(&dir).unwrap();
    assert_eq!(spool.append(&event("a")).await.unwrap(), Appended::New);
    assert_eq!(
        spool.append(&event("a")).await.unwrap(),
        Appended::Duplicate
    );
    drop(spool);
    let spool = Spool::open(&dir).unwrap();
    assert_eq!(
        spool.append(&event("a")).await.unwrap(),
        Appended::Duplicate
    );
    assert_eq!(spool.append(&event("b")).await.unwrap(), Appended::New);
    assert_eq!(ids(&read(&dir, None).unwrap()), ["a", "b"]);
    let _ = fs::remove_dir_all(dir);
}

/// What a cluster's previous active stored elsewhere comes as tags: those events are
/// duplicates here, and a tag that is not one (a hand-edited record) changes nothing.
#[tokio::test]
async fn remembered_tags_make_their_events_duplicates() {
    let dir = temp_dir("remembered");
    let spool = Spool::open(&dir).unwrap();
    let tag = dedupe_tag(&event("m1"));
    assert_eq!(tag.len(), 32);
    assert!(!tag.contains("m1"));
    spool
        .remember(&[tag, "not a tag".into(), "zz".repeat(16), "é".repeat(16)])
        .await;
    assert_eq!(
        spool.append(&event("m1")).await.unwrap(),
        Appended::Duplicate
    );
    assert_eq!(spool.append(&event("m2")).await.unwrap(), Appended::New);
    assert_eq!(ids(&read(&dir, None).unwrap()), ["m2"]);
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn the_same_id_from_two_adapters_is_two_events() {
    let dir = temp_dir("two-adapters");
    let spool = Spool::open(&dir).unwrap();
    let dc = Event {
        adapter: "dc".into(),
        ..event("m1")
    };
    assert_eq!(spool.append(&event("m1")).await.unwrap(), Appended::New);
    assert_eq!(spool.append(&dc).await.unwrap(), Appended::New);
    drop(spool);
    let spool = Spool::open(&dir).unwrap();
    assert_eq!(spool.append(&dc).await.unwrap(), Appended::Duplicate);
    assert_eq!(read(&dir, None).unwrap(), [event("m1"), dc]);
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn since_returns_the_events_after_an_id() {
    let dir = temp_dir("since");
    let spool = Spool::open(&dir).unwrap();
    for id in ["a", "b", "c", "d"] {
        spool.append(&event(id)).await.unwrap();
    }
    assert_eq!(ids(&read(&dir, Some("b")).unwrap()), ["c", "d"]);
    assert!(read(&dir, Some("d")).unwrap().is_empty());
    assert!(matches!(
        read(&dir, Some("zz")),
        Err(SpoolError::UnknownSince(id)) if id == "zz"
    ));
    // An empty (never written) spool directory reads as empty.
    assert!(read(&dir.join("nothing"), None).unwrap().is_empty());
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_torn_last_line_is_skipped_and_the_next_append_starts_a_new_line() {
    let dir = temp_dir("torn");
    let spool = Spool::open(&dir).unwrap();
    spool.append(&event("a")).await.unwrap();
    spool.append(&event("b")).await.unwrap();
    drop(spool);
    // A crash in the middle of writing "c".
    let line = serde_json::to_string(&event("c")).unwrap();
    let mut f = OpenOptions::new()
        .append(true)
        .open(dir.join(FILE_NAME))
        .unwrap();
    f.write_all(&line.as_bytes()[..line.len() / 2]).unwrap();
    drop(f);
    assert_eq!(ids(&read(&dir, None).unwrap()), ["a", "b"]);

    let spool = Spool::open(&dir).unwrap();
    assert_eq!(
        spool.append(&event("b")).await.unwrap(),
        Appended::Duplicate
    );
    assert_eq!(spool.append(&event("c")).await.unwrap(), Appended::New);
    assert_eq!(ids(&read(&dir, None).unwrap()), ["a", "b", "c"]);
    let text = fs::read_to_string(spool.path()).unwrap();
    assert_eq!(text.lines().last().unwrap(), line);

    // A line cut just before its newline is whole: it counts, and gets its newline.
    drop(spool);
    let whole = serde_json::to_string(&event("d")).unwrap();
    let mut f = OpenOptions::new()
        .append(true)
        .open(dir.join(FILE_NAME))
        .unwrap();
    f.write_all(whole.as_bytes()).unwrap();
    drop(f);
    assert_eq!(ids(&read(&dir, None).unwrap()), ["a", "b", "c", "d"]);
    let spool = Spool::open(&dir).unwrap();
    assert_eq!(
        spool.append(&event("d")).await.unwrap(),
        Appended::Duplicate
    );
    spool.append(&event("e")).await.unwrap();
    assert_eq!(ids(&read(&dir, None).unwrap()), ["a", "b", "c", "d", "e"]);
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn rotation_keeps_everything_readable() {
    let dir = temp_dir("rotate");
    let line_len = serde_json::to_string(&event("e000")).unwrap().len() as u64 + 1;
    // Rotate after the 10th line.
    let spool = Spool::open_with(&dir, small(10 * line_len)).unwrap();
    let all: Vec<String> = (0..15).map(|i| format!("e{i:03}")).collect();
    for id in &all {
        spool.append(&event(id)).await.unwrap();
    }
    assert_eq!(
        fs::read_to_string(dir.join(ROTATED_NAME))
            .unwrap()
            .lines()
            .count(),
        10
    );
    assert_eq!(ids(&read(&dir, None).unwrap()), all);
    assert_eq!(ids(&read(&dir, Some("e008")).unwrap()), &all[9..]);
    spool.sync().await.unwrap();

    // The dedupe window reaches into the rotated file after a reopen.
    drop(spool);
    let spool = Spool::open_with(&dir, small(10 * line_len)).unwrap();
    assert_eq!(spool.window_len().await, 15);
    assert_eq!(
        spool.append(&event("e000")).await.unwrap(),
        Appended::Duplicate
    );

    // A second rotation replaces the old .1: the last two files stay, still in order.
    for i in 15..25 {
        spool.append(&event(&format!("e{i:03}"))).await.unwrap();
    }
    let got = read(&dir, None).unwrap();
    assert_eq!(got.first().unwrap().id, "e010");
    assert_eq!(got.last().unwrap().id, "e024");
    assert_eq!(got.len(), 15);
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn many_appends_stay_fast_and_the_window_stays_bounded() {
    let dir = temp_dir("many");
    let options = SpoolOptions {
        dedupe_window: 10_000,
        ..SpoolOptions::default()
    };
    let spool = Spool::open_with(&dir, options.clone()).unwrap();
    let started = Instant::now();
    for i in 0..100_000 {
        let e = Event {
            data: serde_json::json!({"i": i}),
            access: None,
            ..event(&format!("id-{i}"))
        };
        assert_eq!(spool.append(&e).await.unwrap(), Appended::New);
    }
    spool.sync().await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(8), "100k appends took {took:?}");
    assert_eq!(spool.window_len().await, 10_000);
    assert_eq!(
        spool.append(&event("id-99999")).await.unwrap(),
        Appended::Duplicate
    );
    assert_eq!(
        spool.append(&event("id-90000")).await.unwrap(),
        Appended::Duplicate
    );
    // Out of the window: forgotten, so written again.
    assert_eq!(spool.append(&event("id-0")).await.unwrap(), Appended::New);
    drop(spool);

    let started = Instant::now();
    let spool = Spool::open_with(&dir, options).unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(spool.window_len().await, 10_000);
    assert_eq!(
        spool.append(&event("id-95000")).await.unwrap(),
        Appended::Duplicate
    );
    assert_eq!(read(&dir, None).unwrap().len(), 100_001);
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appenders_never_interleave() {
    const TASKS: usize = 50;
    const EACH: usize = 200;
    let dir = temp_dir("concurrent");
    let spool = Arc::new(Spool::open(&dir).unwrap());
    let syncer = spool.spawn_syncer(Duration::from_millis(5));
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let spool = spool.clone();
        handles.push(tokio::spawn(async move {
            let mut new = 0;
            for i in 0..EACH {
                let e = Event {
                    data: serde_json::json!({"pad": "x".repeat(i * 7 % 3000)}),
                    access: None,
                    ..event(&format!("t{t}-{i}"))
                };
                spool.append(&e).await.unwrap();
                // Every task also receives the same replayed event.
                if spool.append(&event("shared")).await.unwrap() == Appended::New {
                    new += 1;
                }
            }
            new
        }));
    }
    let mut shared_new = 0;
    for h in handles {
        shared_new += h.await.unwrap();
    }
    assert_eq!(shared_new, 1);
    spool.sync().await.unwrap();

    let text = fs::read_to_string(spool.path()).unwrap();
    assert_eq!(text.lines().count(), TASKS * EACH + 1);
    for line in text.lines() {
        serde_json::from_str::<Event>(line).unwrap();
    }
    let events = read(&dir, None).unwrap();
    let distinct: HashSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(distinct.len(), TASKS * EACH + 1);

    // The syncer holds no strong reference: it ends with the last Arc.
    drop(spool);
    tokio::time::timeout(Duration::from_secs(2), syncer)
        .await
        .expect("syncer ends once the spool is dropped")
        .unwrap();
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn sync_only_fsyncs_after_writes() {
    let dir = temp_dir("sync");
    let spool = Spool::open(&dir).unwrap();
    assert!(!spool.inner.lock().await.dirty);
    spool.append(&event("a")).await.unwrap();
    assert!(spool.inner.lock().await.dirty);
    spool.sync().await.unwrap();
    assert!(!spool.inner.lock().await.dirty);
    spool.append(&event("a")).await.unwrap();
    assert!(
        !spool.inner.lock().await.dirty,
        "a duplicate writes nothing"
    );
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_spool_someone_else_could_have_written_is_refused_by_the_writer_and_the_readers() {
    let home = temp_dir("planted");
    let inbox = home.join("inbox");
    fs::create_dir_all(&inbox).unwrap();
    let line = serde_json::to_string(&event("forged")).unwrap() + "\n";
    fs::write(inbox.join(FILE_NAME), &line).unwrap();
    fs::set_permissions(inbox.join(FILE_NAME), fs::Permissions::from_mode(0o666)).unwrap();
    let refused = |e: SpoolError, says: &str| {
        let text = e.to_string();
        assert!(text.contains(says), "{text}");
    };
    // Writable by others: neither appended to nor read back as events.
    refused(
        Spool::open(&inbox).unwrap_err(),
        "events.jsonl is writable by group or others (mode 0666)",
    );
    refused(
        read(&inbox, None).unwrap_err(),
        "writable by group or others",
    );
    let limits = cursor::Limits {
        events: 10,
        bytes: 1 << 20,
    };
    match cursor::read_after(&inbox, cursor::Position::Start, limits) {
        Err(cursor::CursorError::Spool(e)) => refused(e, "writable by group or others"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("read a spool others can write"),
    }
    assert_eq!(fs::read_to_string(inbox.join(FILE_NAME)).unwrap(), line);
    // Another account's, at 0600.
    fs::set_permissions(inbox.join(FILE_NAME), fs::Permissions::from_mode(0o600)).unwrap();
    assert!(nix::unistd::geteuid().is_root(), "the tests run as root");
    std::os::unix::fs::chown(inbox.join(FILE_NAME), Some(65534), Some(65534)).unwrap();
    refused(Spool::open(&inbox).unwrap_err(), "is owned by uid 65534");
    refused(read(&inbox, None).unwrap_err(), "is owned by uid 65534");
    // A link, or a FIFO, in its place: named, with the fix.
    fs::remove_file(inbox.join(FILE_NAME)).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", inbox.join(FILE_NAME)).unwrap();
    refused(
        Spool::open(&inbox).unwrap_err(),
        "events.jsonl is a symbolic link, which hermes-svc never follows inside a profile home",
    );
    fs::remove_file(inbox.join(FILE_NAME)).unwrap();
    nix::unistd::mkfifo(
        &inbox.join(FILE_NAME),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    refused(
        Spool::open(&inbox).unwrap_err(),
        "events.jsonl is a FIFO (named pipe), not a regular file: check it, then remove it",
    );
    // An inbox others can write is refused before anything in it is looked at.
    fs::remove_file(inbox.join(FILE_NAME)).unwrap();
    fs::set_permissions(&inbox, fs::Permissions::from_mode(0o777)).unwrap();
    refused(
        Spool::open(&inbox).unwrap_err(),
        "inbox is writable by group or others (mode 0777)",
    );
    // Made by the gateway, the inbox and its cursors are 0700.
    fs::set_permissions(&inbox, fs::Permissions::from_mode(0o700)).unwrap();
    let spool = Spool::open(&inbox).unwrap();
    assert_eq!(
        fs::metadata(inbox.join(CURSORS_DIR))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    drop(spool);
    let _ = fs::remove_dir_all(home);
}

/// Admits ids that start with "ok", refuses the rest, counts its calls.
#[derive(Debug, Default)]
struct Counting(std::sync::atomic::AtomicUsize);

impl Judge for Counting {
    fn judge(&self, event: &Event) -> Option<Verdict> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        (event.kind == "MESSAGE_CREATE").then(|| Verdict {
            admitted: event.id.starts_with("ok"),
            rule: if event.id.starts_with("ok") {
                "allow-all".into()
            } else {
                "unknown-sender".into()
            },
        })
    }
}

#[tokio::test]
async fn the_verdict_is_stored_with_the_event_and_a_replay_is_not_judged_again() {
    let dir = temp_dir("judged");
    let spool = Spool::open(&dir).unwrap();
    let judge = Arc::new(Counting::default());
    spool.set_judge(judge.clone());
    let other = Event::new("j1", "qq", "GUILD_CREATE", None, serde_json::json!({}));
    for e in [event("ok1"), event("no1"), other.clone(), event("ok1")] {
        spool.append(&e).await.unwrap();
    }
    assert_eq!(judge.0.load(std::sync::atomic::Ordering::SeqCst), 3);
    let back = read(&dir, None).unwrap();
    assert_eq!(ids(&back), ["ok1", "no1", "j1"]);
    let verdicts: Vec<_> = back.iter().map(|e| e.access.clone()).collect();
    assert_eq!(
        verdicts,
        [
            Some(Verdict {
                admitted: true,
                rule: "allow-all".into()
            }),
            Some(Verdict {
                admitted: false,
                rule: "unknown-sender".into()
            }),
            None
        ]
    );
    // The rest of the event is as it was given.
    assert_eq!(
        Event {
            access: None,
            ..back[0].clone()
        },
        event("ok1")
    );
    let _ = fs::remove_dir_all(&dir);
}

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::journal::FILE_NAME;
use super::*;
use crate::gateway::send::target::malformed;
use crate::gateway::send::TextUnit;

/// A platform that numbers its replies in groups (`group:ID`) and not in channels
/// (`channel:ID`), and takes files in groups only.
fn numbered(text: &str) -> Result<Address, TargetError> {
    match text.split_once(':') {
        Some(("group", id)) if !id.is_empty() => Ok(Address {
            target: text.into(),
            numbers_replies: true,
            takes_files: true,
        }),
        Some(("channel", id)) if !id.is_empty() => Ok(Address {
            target: text.into(),
            numbers_replies: false,
            takes_files: false,
        }),
        _ => Err(malformed(text, "group:ID or channel:ID", "group:g")),
    }
}

/// A platform with numbered channels (`channel:1`, or just `1`), which numbers nothing.
fn plain(text: &str) -> Result<Address, TargetError> {
    match text.strip_prefix("channel:").or(Some(text)) {
        Some(id) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => Ok(Address {
            target: format!("channel:{id}"),
            numbers_replies: false,
            takes_files: true,
        }),
        _ => Err(malformed(text, "channel:ID", "channel:1")),
    }
}

fn routes() -> HashMap<String, Route> {
    HashMap::from([
        (
            "qq".to_owned(),
            Route {
                kind: "numbered",
                max_text: 100,
                max_piece: 100,
                unit: TextUnit::Chars,
                files: Some(crate::gateway::send::FileLimits {
                    max_files: 5,
                    max_bytes: 1024,
                    max_caption: 100,
                }),
                address: numbered,
            },
        ),
        (
            "dc".to_owned(),
            Route {
                kind: "plain",
                max_text: 2000,
                max_piece: 2000,
                unit: TextUnit::Utf16,
                files: None,
                address: plain,
            },
        ),
    ])
}

fn req(adapter: &str, target: &str, key: &str) -> Request {
    Request {
        adapter: adapter.into(),
        target: target.into(),
        text: format!("hello {key}"),
        reply_to: None,
        idempotency_key: key.into(),
        policy: Policy::AtMostOnce,
        files: vec![],
    }
}

fn open(dir: &std::path::Path) -> Outbox {
    Outbox::open(dir, routes()).unwrap()
}

#[tokio::test]
async fn a_submitted_message_survives_a_reopen_and_its_key_is_accepted_once() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path())
        .submit(req("dc", "channel:1", "k1"))
        .await
        .unwrap();
    assert!(first.new);
    assert_eq!(first.message.state, State::Queued);

    let outbox = open(dir.path());
    assert_eq!(outbox.get(&first.message.id), Some(first.message.clone()));
    let again = outbox.submit(req("dc", "channel:1", "k1")).await.unwrap();
    assert!(!again.new);
    assert_eq!(again.message.id, first.message.id);
    assert_eq!(outbox.stats().depth, 1);

    let mut other = req("dc", "channel:2", "k1");
    other.text = "something else".into();
    let err = outbox.submit(other).await.unwrap_err();
    assert_eq!(err.code(), "idempotency_key_reused");

    // The same message under another policy is another message.
    let mut other = req("dc", "channel:1", "k1");
    other.policy = Policy::AtLeastOnce;
    let err = outbox.submit(other).await.unwrap_err();
    assert_eq!(err.code(), "idempotency_key_reused");
}

#[tokio::test]
async fn bad_requests_are_refused_and_nothing_is_queued() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = open(dir.path());
    let mut cases = vec![
        (req("nope", "channel:1", "a"), "unknown_adapter"),
        (req("qq", "nonsense", "b"), "bad_target"),
        (req("dc", "channel:1", ""), "missing_idempotency_key"),
        (req("dc", "channel:1", "bad\nkey"), "bad_idempotency_key"),
    ];
    let mut long = req("qq", "group:g", "c");
    long.text = "字".repeat(101);
    cases.push((long, "text_too_long"));
    let mut empty = req("qq", "group:g", "d");
    empty.text = "  ".into();
    cases.push((empty, "empty_text"));
    for (r, code) in cases {
        let err = outbox.submit(r).await.unwrap_err();
        assert_eq!(err.code(), code, "{err}");
        assert!(err.is_client_error());
    }
    assert_eq!(outbox.stats(), Stats::default());
    assert_eq!(
        std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len(),
        0
    );
}

#[tokio::test]
async fn a_qq_reply_gets_a_msg_seq_no_other_retained_message_has() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = open(dir.path());
    let mut seqs = vec![];
    for key in ["a", "b", "c"] {
        let mut r = req("qq", "group:g", key);
        r.reply_to = Some("m1".into());
        seqs.push(outbox.submit(r).await.unwrap().message.seq.unwrap());
    }
    let active = outbox.submit(req("qq", "group:g", "d")).await.unwrap();
    assert_eq!(active.message.seq, None, "an active message has no msg_seq");
    drop(outbox);
    let mut r = req("qq", "group:g", "e");
    r.reply_to = Some("m1".into());
    seqs.push(
        open(dir.path())
            .submit(r)
            .await
            .unwrap()
            .message
            .seq
            .unwrap(),
    );
    let mut unique = seqs.clone();
    unique.dedup();
    assert_eq!(unique, seqs);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

/// A file of `bytes` bytes, named `name`, as a caller hands one over.
fn new_file(dir: &std::path::Path, name: &str, bytes: usize) -> NewFile {
    let path = dir.join(name);
    std::fs::write(&path, vec![b'x'; bytes]).unwrap();
    NewFile {
        file: std::sync::Arc::new(std::fs::File::open(&path).unwrap()),
        name: name.into(),
    }
}

#[tokio::test]
async fn a_qq_reply_with_files_holds_a_msg_seq_per_file_and_a_channel_takes_none() {
    let dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let outbox = open(dir.path());
    let mut r = req("qq", "group:g", "files");
    r.reply_to = Some("m1".into());
    r.files = ["a.png", "b.pdf", "c.pdf"]
        .map(|n| new_file(files.path(), n, 10))
        .into();
    let with_files = outbox.submit(r).await.unwrap().message;
    let seq = with_files.seq.unwrap();
    assert_eq!(with_files.last_seq(), Some(seq + 2));
    let mut r = req("qq", "group:g", "next");
    r.reply_to = Some("m1".into());
    let next = outbox.submit(r).await.unwrap().message;
    assert_eq!(next.seq, Some(seq + 3), "after the three the files hold");
    // Read back from the journal, the files' numbers are still held.
    drop(outbox);
    let mut r = req("qq", "group:g", "after");
    r.reply_to = Some("m1".into());
    let after = open(dir.path()).submit(r).await.unwrap().message;
    assert_eq!(after.seq, Some(seq + 4));

    let outbox = open(dir.path());
    let mut r = req("qq", "channel:c", "to-channel");
    r.files = vec![new_file(files.path(), "a.png", 10)];
    let err = outbox.submit(r).await.unwrap_err();
    assert_eq!(err.code(), "files_unsupported", "{err}");
    assert!(err.to_string().contains("channel:c"), "{err}");
    let mut r = req("qq", "group:g", "too-large");
    r.files = vec![new_file(files.path(), "big.pdf", 1025)];
    let err = outbox.submit(r).await.unwrap_err();
    assert_eq!(err.code(), "file_too_large", "{err}");
}

#[tokio::test]
async fn each_target_gets_its_messages_in_order_and_a_waiting_one_holds_only_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = open(dir.path());
    let a1 = outbox.submit(req("dc", "channel:1001", "1")).await.unwrap();
    let a2 = outbox.submit(req("dc", "channel:1001", "2")).await.unwrap();
    let b1 = outbox.submit(req("dc", "channel:1002", "3")).await.unwrap();
    let now = Instant::now();
    let Next::Send(m) = outbox.next("dc", now) else {
        panic!()
    };
    assert_eq!(m.id, a1.message.id);
    outbox.begin(&m.id).await.unwrap();
    let later = now + Duration::from_secs(5);
    let asked = now + Duration::from_secs(2);
    let error = PlatformReply {
        status: Some(429),
        code: None,
        message: "slow down".into(),
    };
    outbox
        .finish(
            &m.id,
            Finish::Retry {
                error,
                not_before: later,
                asked: Some(asked),
            },
        )
        .await
        .unwrap();
    // a2 waits behind a1; b1 goes.
    let Next::Send(m) = outbox.next("dc", now) else {
        panic!()
    };
    assert_eq!(m.id, b1.message.id);
    outbox
        .finish(&m.id, Finish::Sent { platform_id: None })
        .await
        .unwrap();
    assert_eq!(outbox.next("dc", now), Next::Wait(later));
    // The connection is back: the backoff is cut short, the platform's own wait is not.
    outbox.retry_now("dc");
    assert_eq!(outbox.next("dc", now), Next::Wait(asked));
    let Next::Send(m) = outbox.next("dc", later) else {
        panic!()
    };
    assert_eq!(m.id, a1.message.id);
    assert_eq!(m.attempts, 1);
    assert_eq!(m.last_error.unwrap().status, Some(429));
    let _ = a2;
    assert_eq!(outbox.next("qq", now), Next::Idle);
}

#[tokio::test]
async fn a_crash_mid_send_leaves_the_message_sending_and_a_torn_line_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let outbox = open(dir.path());
        let m = outbox.submit(req("dc", "channel:1001", "1")).await.unwrap();
        outbox.begin(&m.message.id).await.unwrap();
        m.message.id
    };
    use std::io::Write;
    let path = dir.path().join(FILE_NAME);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"{\"op\":\"sent\",\"id\":\"").unwrap();
    let outbox = open(dir.path());
    let m = outbox.get(&id).unwrap();
    assert_eq!((m.state, m.attempts), (State::Sending, 1));
    // The torn tail is gone, so the next record is a line of its own.
    outbox
        .finish(
            &id,
            Finish::Sent {
                platform_id: Some("p1".into()),
            },
        )
        .await
        .unwrap();
    let m = open(dir.path()).get(&id).unwrap();
    assert_eq!(
        (m.state, m.platform_id.as_deref()),
        (State::Sent, Some("p1"))
    );
}

#[tokio::test]
async fn compaction_keeps_what_is_pending_and_the_newest_finished() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = open(dir.path());
    let pending = outbox.submit(req("dc", "channel:1001", "p")).await.unwrap();
    let mut finished = vec![];
    for i in 0..5 {
        let m = outbox
            .submit(req("dc", "channel:1002", &format!("f{i}")))
            .await
            .unwrap();
        outbox
            .finish(&m.message.id, Finish::Sent { platform_id: None })
            .await
            .unwrap();
        finished.push(m.message.id);
    }
    {
        let mut inner = outbox.lock();
        let (keep, _) = inner.book.retain_for_compaction();
        inner.journal.compact(keep).unwrap();
    }
    drop(outbox);
    let outbox = open(dir.path());
    assert_eq!(
        outbox.get(&pending.message.id).unwrap().state,
        State::Queued
    );
    for id in &finished {
        assert_eq!(outbox.get(id).unwrap().state, State::Sent);
    }
    let stats = outbox.stats();
    assert_eq!((stats.depth, stats.sent), (1, 5));
    assert!(stats.oldest_queued_secs.is_some());
}

#[tokio::test]
async fn a_line_over_the_limit_is_skipped_like_garbage_and_costs_nothing_after_it() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path())
        .submit(req("dc", "channel:1", "before"))
        .await
        .unwrap();
    let path = dir.path().join(FILE_NAME);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(&vec![b'x'; 3 * 1024 * 1024]).unwrap();
    f.write_all(b"\n").unwrap();
    drop(f);
    let outbox = open(dir.path());
    let second = outbox
        .submit(req("dc", "channel:2", "after"))
        .await
        .unwrap();
    // Both are there after a reopen: the long line cost only itself.
    let outbox = open(dir.path());
    assert!(outbox.get(&first.message.id).is_some());
    assert!(outbox.get(&second.message.id).is_some());
    // An over-long torn tail is dropped, as any torn tail is.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(&vec![b'y'; 2 * 1024 * 1024]).unwrap();
    drop(f);
    let outbox = open(dir.path());
    assert!(outbox.get(&second.message.id).is_some());
    assert!(std::fs::metadata(&path).unwrap().len() < 4 * 1024 * 1024);
}

#[tokio::test]
async fn a_target_is_stored_as_its_platform_writes_it_and_matches_either_form() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = open(dir.path());
    let first = outbox.submit(req("dc", "1001", "k")).await.unwrap();
    assert_eq!(first.message.target, "channel:1001");
    // The same request, written the other way, is the same message.
    let again = outbox.submit(req("dc", "channel:1001", "k")).await.unwrap();
    assert!(!again.new);
    assert_eq!(again.message.id, first.message.id);
}

#[tokio::test]
async fn a_text_is_measured_in_its_platforms_unit() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = open(dir.path());
    // 1,000 crabs are 1,000 characters and 2,000 UTF-16 code units: the plain platform
    // counts the latter, and takes them; one more is too long.
    let mut fits = req("dc", "channel:1", "fits");
    fits.text = "🦀".repeat(1000);
    outbox.submit(fits).await.unwrap();
    let mut long = req("dc", "channel:1", "long");
    long.text = format!("{}a", "🦀".repeat(1000));
    let e = outbox.submit(long).await.unwrap_err();
    assert_eq!(e.code(), "text_too_long");
    assert!(e.to_string().contains("2001 UTF-16 code units"), "{e}");
}

//! Cursors: their text form, and reading after one across rotations, torn lines and reused
//! inodes, against the real writer.

use std::fs;
use std::io::Write;

use super::*;
use crate::gateway::spool::tests::{event, small, temp_dir};
use crate::gateway::spool::{Appended, Spool};

const ALL: Limits = Limits {
    events: usize::MAX,
    bytes: usize::MAX,
};

fn limit(n: usize) -> Limits {
    Limits {
        events: n,
        bytes: usize::MAX,
    }
}

fn ids(page: &Page) -> Vec<String> {
    page.events.iter().map(|f| f.event().id.clone()).collect()
}

fn line_len() -> u64 {
    serde_json::to_string(&event("e000")).unwrap().len() as u64 + 1
}

#[test]
fn a_cursor_reads_back_as_itself_and_nothing_else_reads_as_one() {
    let c = Cursor {
        ino: 0x1234_abcd,
        offset: 0x1f,
        hash: 0xdead_beef,
    };
    assert_eq!(c.to_string(), "i1234abcd.o1f.hdeadbeef");
    assert_eq!(c.to_string().parse::<Cursor>().unwrap(), c);
    let max = Cursor {
        ino: u64::MAX,
        offset: u64::MAX,
        hash: 0,
    };
    assert_eq!(max.to_string().parse::<Cursor>().unwrap(), max);
    assert_eq!(Position::parse(None).unwrap(), Position::Start);
    assert_eq!(Position::parse(Some("start")).unwrap(), Position::Start);
    assert_eq!(Position::parse(Some("end")).unwrap(), Position::End);
    assert_eq!(
        Position::parse(Some("i1.o2.h3")).unwrap(),
        Position::After(Cursor {
            ino: 1,
            offset: 2,
            hash: 3
        })
    );
    for bad in [
        "",
        "i1.o2",
        "i1.o2.h3.x",
        "o2.i1.h3",
        "I1.O2.H3",
        "i1.o0.h3",
        "i.o2.h3",
        "i-1.o2.h3",
        "i1.o2.h100000000",
        "i11111111111111111.o2.h3",
        "i1.o2.h3 ",
        "END",
    ] {
        let err = Position::parse(Some(bad)).unwrap_err();
        assert!(matches!(err, CursorError::Malformed(_)), "{bad:?}");
        assert!(err.to_string().contains("`start` or `end`"), "{err}");
    }
}

#[tokio::test]
async fn pages_follow_one_another_and_end_waits_for_what_comes_next() {
    let dir = temp_dir("cursor-pages");
    let empty = read_after(&dir, Position::End, ALL).unwrap();
    assert!(empty.events.is_empty());
    assert_eq!(empty.next, Position::Start, "no spool at all");

    let spool = Spool::open(&dir).unwrap();
    assert_eq!(
        read_after(&dir, Position::End, ALL).unwrap().next,
        Position::Start
    );
    for i in 0..5 {
        spool.append(&event(&format!("e{i:03}"))).await.unwrap();
    }
    let first = read_after(&dir, Position::Start, limit(2)).unwrap();
    assert_eq!(ids(&first), ["e000", "e001"]);
    assert_eq!(first.next, Position::After(first.events[1].cursor));
    let second = read_after(&dir, first.next, limit(2)).unwrap();
    assert_eq!(ids(&second), ["e002", "e003"]);
    let rest = read_after(&dir, second.next, ALL).unwrap();
    assert_eq!(ids(&rest), ["e004"]);
    let none = read_after(&dir, rest.next, ALL).unwrap();
    assert!(none.events.is_empty());
    assert_eq!(none.next, rest.next, "an empty read stays where it was");
    assert_eq!(
        rest.events[0].raw(),
        fs::read_to_string(spool.path())
            .unwrap()
            .lines()
            .last()
            .unwrap()
    );

    let end = read_after(&dir, Position::End, ALL).unwrap();
    assert!(end.events.is_empty());
    assert_eq!(end.next, rest.next, "end is after the newest event");
    spool.append(&event("e005")).await.unwrap();
    assert_eq!(ids(&read_after(&dir, end.next, ALL).unwrap()), ["e005"]);

    // The byte budget stops a page early, but never before its first event.
    let one_byte = Limits {
        events: 100,
        bytes: 1,
    };
    assert_eq!(
        ids(&read_after(&dir, Position::Start, one_byte).unwrap()),
        ["e000"]
    );
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_reader_that_comes_back_with_its_cursor_misses_nothing_across_rotations() {
    let dir = temp_dir("cursor-rotate");
    let spool = Spool::open_with(&dir, small(5 * line_len())).unwrap();
    let mut seen = Vec::new();
    let mut next = Position::Start;
    let mut rotations = 0;
    let mut last_ino = None;
    for i in 0..40 {
        spool.append(&event(&format!("e{i:03}"))).await.unwrap();
        let ino = fs::metadata(spool.path()).map(|m| m.ino()).ok();
        if ino != last_ino {
            rotations += 1;
            last_ino = ino;
        }
        // Every third append, three at a time: cursors land at every place relative to a
        // rotation (5 lines a file), and a new one is often in the file just rotated.
        if i % 3 == 0 {
            let page = read_after(&dir, next, limit(3)).unwrap();
            seen.extend(ids(&page));
            next = page.next;
        }
    }
    loop {
        let page = read_after(&dir, next, limit(4)).unwrap();
        if page.events.is_empty() {
            break;
        }
        seen.extend(ids(&page));
        next = page.next;
    }
    assert!(rotations > 4, "{rotations}");
    let want: Vec<String> = (0..40).map(|i| format!("e{i:03}")).collect();
    assert_eq!(seen, want, "everything, once, in order");
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_cursor_in_the_rotated_file_reads_on_into_the_current_one_and_then_is_gone() {
    let dir = temp_dir("cursor-gone");
    let spool = Spool::open_with(&dir, small(3 * line_len())).unwrap();
    // Ids as long as `line_len`'s, so that every third line rotates.
    for id in ["e00a", "e00b"] {
        spool.append(&event(id)).await.unwrap();
    }
    let after_a = read_after(&dir, Position::Start, limit(1)).unwrap().next;
    spool.append(&event("e00c")).await.unwrap(); // rotates: a, b, c are in .1 now
    spool.append(&event("e00d")).await.unwrap();
    assert!(dir.join(ROTATED_NAME).exists());
    let page = read_after(&dir, after_a, ALL).unwrap();
    assert_eq!(ids(&page), ["e00b", "e00c", "e00d"]);
    let from_start = read_after(&dir, Position::Start, ALL).unwrap();
    assert_eq!(ids(&from_start), ["e00a", "e00b", "e00c", "e00d"]);

    for id in ["e00e", "e00f"] {
        spool.append(&event(id)).await.unwrap(); // rotates again: a-c are deleted
    }
    match read_after(&dir, after_a, ALL) {
        Err(e @ CursorError::Gone { .. }) => {
            assert!(e.to_string().contains("read again from `start`"), "{e}")
        }
        other => panic!("{:?}", other.map(|p| ids(&p))),
    }
    // A cursor into the file that is now .1 still works.
    assert_eq!(
        ids(&read_after(&dir, page.next, ALL).unwrap()),
        ["e00e", "e00f"]
    );
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_cursor_that_does_not_match_its_file_is_gone_not_trusted() {
    let dir = temp_dir("cursor-reuse");
    let spool = Spool::open(&dir).unwrap();
    for id in ["a", "b"] {
        spool.append(&event(id)).await.unwrap();
    }
    let Position::After(real) = read_after(&dir, Position::Start, limit(1)).unwrap().next else {
        panic!("no cursor");
    };
    // The same inode and offset with another event's hash: what a reused inode looks like.
    let reused = Cursor {
        hash: real.hash ^ 1,
        ..real
    };
    let beyond = Cursor {
        offset: 1 << 40,
        ..real
    };
    let mid_line = Cursor {
        offset: real.offset - 3,
        ..real
    };
    for c in [reused, beyond, mid_line] {
        let r = read_after(&dir, Position::After(c), ALL);
        assert!(matches!(r, Err(CursorError::Gone { .. })), "{c}");
    }
    assert_eq!(
        ids(&read_after(&dir, Position::After(real), ALL).unwrap()),
        ["b"]
    );
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_line_still_being_written_waits_and_an_unreadable_one_is_skipped() {
    let dir = temp_dir("cursor-torn");
    let spool = Spool::open(&dir).unwrap();
    spool.append(&event("a")).await.unwrap();
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(spool.path())
        .unwrap();
    f.write_all(b"not json\n").unwrap();
    let b = serde_json::to_string(&event("b")).unwrap();
    f.write_all(&b.as_bytes()[..10]).unwrap();
    let page = read_after(&dir, Position::Start, ALL).unwrap();
    assert_eq!(ids(&page), ["a"]);
    // End skips the partial line and the unreadable one.
    assert_eq!(
        read_after(&dir, Position::End, ALL).unwrap().next,
        page.next
    );
    f.write_all(&b.as_bytes()[10..]).unwrap();
    f.write_all(b"\n").unwrap();
    let rest = read_after(&dir, page.next, ALL).unwrap();
    assert_eq!(ids(&rest), ["b"]);
    assert_eq!(rest.events[0].raw(), b);
    let _ = fs::remove_dir_all(dir);
}

#[tokio::test]
async fn subscribers_hear_of_new_lines_and_not_of_duplicates() {
    let dir = temp_dir("cursor-notify");
    let spool = Spool::open(&dir).unwrap();
    let mut rx = spool.subscribe();
    assert!(!rx.has_changed().unwrap());
    assert_eq!(spool.append(&event("a")).await.unwrap(), Appended::New);
    assert!(rx.has_changed().unwrap());
    rx.borrow_and_update();
    assert_eq!(
        spool.append(&event("a")).await.unwrap(),
        Appended::Duplicate
    );
    assert!(!rx.has_changed().unwrap());
    let _ = fs::remove_dir_all(dir);
}

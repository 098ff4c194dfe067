use super::*;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hsv-trusted-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// Another account's: only root can give a file away, and the tests run as root.
fn give_away(path: &Path) {
    assert!(nix::unistd::geteuid().is_root(), "the tests run as root");
    std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
}

#[test]
fn a_missing_directory_is_none_to_a_reader_and_made_0700_by_a_writer() {
    let home = temp_dir("make");
    assert!(TrustedDir::open(&home.join("inbox"), Owner::SelfOrRoot)
        .unwrap()
        .is_none());
    assert!(
        TrustedDir::open(&home.join("no/such/inbox"), Owner::SelfOrRoot)
            .unwrap()
            .is_none()
    );
    let inbox = TrustedDir::create(&home.join("inbox"), Owner::SelfOrRoot).unwrap();
    assert_eq!(mode(inbox.path()), 0o700);
    let cursors = inbox.create_child("cursors").unwrap();
    assert_eq!(mode(cursors.path()), 0o700);
    assert!(inbox.child("cursors").unwrap().is_some());
    assert!(inbox.child("absent").unwrap().is_none());
    // An existing directory of ours that others cannot write is used as it is.
    fs::create_dir(home.join("state")).unwrap();
    fs::set_permissions(home.join("state"), fs::Permissions::from_mode(0o755)).unwrap();
    let mut state = TrustedDir::create(&home.join("state"), Owner::SelfOrRoot).unwrap();
    assert_eq!(mode(state.path()), 0o755);
    state.narrow_to(0o700).unwrap();
    assert_eq!(mode(state.path()), 0o700);
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn a_link_a_file_or_a_fifo_where_a_directory_belongs_is_refused_and_named() {
    let home = temp_dir("kinds");
    fs::create_dir(home.join("elsewhere")).unwrap();
    symlink(home.join("elsewhere"), home.join("state")).unwrap();
    fs::write(home.join("inbox"), "").unwrap();
    nix::unistd::mkfifo(&home.join("outbox"), Mode::from_bits_truncate(0o600)).unwrap();
    for create in [false, true] {
        let open = |name: &str| {
            let path = home.join(name);
            if create {
                TrustedDir::create(&path, Owner::SelfOrRoot).map(Some)
            } else {
                TrustedDir::open(&path, Owner::SelfOrRoot)
            }
        };
        let err = open("state").unwrap_err();
        assert!(
            matches!(
                err,
                TrustError::Symlink {
                    directory: true,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().ends_with(
                "state is a symbolic link, which hermes-svc never follows inside a profile home: someone else may have put it there; check where it points, then remove it (hermes-svc makes the directory again)"
            ),
            "{err}"
        );
        let err = open("inbox").unwrap_err();
        assert!(
            err.to_string()
                .contains("inbox is a regular file, not a directory"),
            "{err}"
        );
        let err = open("outbox").unwrap_err();
        assert!(
            err.to_string()
                .contains("outbox is a FIFO (named pipe), not a directory"),
            "{err}"
        );
        assert!(err.needs_a_fix());
    }
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn a_directory_others_can_write_or_that_is_someone_elses_is_refused() {
    let home = temp_dir("owner");
    let inbox = home.join("inbox");
    fs::create_dir(&inbox).unwrap();
    fs::set_permissions(&inbox, fs::Permissions::from_mode(0o777)).unwrap();
    let err = TrustedDir::create(&inbox, Owner::SelfOrRoot).unwrap_err();
    let text = err.to_string();
    assert!(
        text.ends_with(&format!(
            "inbox is writable by group or others (mode 0777): someone else could replace the files in it; check what is in it, then run `chmod go-w {}`",
            inbox.display()
        )),
        "{text}"
    );
    assert_eq!(mode(&inbox), 0o777, "refused, not changed");

    fs::set_permissions(&inbox, fs::Permissions::from_mode(0o700)).unwrap();
    give_away(&inbox);
    let err = TrustedDir::open(&inbox, Owner::SelfOrRoot).unwrap_err();
    assert!(
        err.to_string()
            .contains("inbox is owned by uid 65534, not by you (uid 0) or root: someone else may have put it there"),
        "{err}"
    );
    // A report root runs on another account's profile also trusts the account whose
    // directory it is: the owner of the directory it is in.
    let profile = home.join("profile");
    fs::create_dir(&profile).unwrap();
    fs::create_dir(profile.join("state")).unwrap();
    give_away(&profile);
    give_away(&profile.join("state"));
    assert!(
        TrustedDir::open(&profile.join("state"), Owner::SelfRootOrDirectory)
            .unwrap()
            .is_some()
    );
    assert!(TrustedDir::open(&profile.join("state"), Owner::SelfOrRoot).is_err());
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn files_are_opened_only_if_they_are_regular_ours_and_writable_by_no_one_else() {
    let home = temp_dir("files");
    let dir = TrustedDir::create(&home.join("inbox"), Owner::SelfOrRoot).unwrap();
    let mut file = dir.open_append("events.jsonl", 0o600).unwrap();
    file.write_all(b"one\n").unwrap();
    assert_eq!(mode(&dir.path().join("events.jsonl")), 0o600);
    // Appended to, never truncated; and the flags a caller sees are the usual ones.
    let mut again = dir.open_append("events.jsonl", 0o600).unwrap();
    again.write_all(b"two\n").unwrap();
    let flags = OFlag::from_bits_truncate(fcntl(&again, FcntlArg::F_GETFL).unwrap());
    assert!(!flags.contains(OFlag::O_NONBLOCK));
    let mut text = String::new();
    dir.open_read("events.jsonl")
        .unwrap()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "one\ntwo\n");
    assert!(dir.open_read("absent").unwrap().is_none());

    // A link is refused and its target untouched, for reading and for appending.
    let victim = home.join("bashrc");
    fs::write(&victim, "precious\n").unwrap();
    symlink(&victim, dir.path().join("linked")).unwrap();
    for err in [
        dir.open_read("linked").unwrap_err(),
        dir.open_append("linked", 0o600).unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                TrustError::Symlink {
                    directory: false,
                    ..
                }
            ),
            "{err}"
        );
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");

    // A FIFO is refused at once, whichever way it is opened.
    nix::unistd::mkfifo(&dir.path().join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
    for err in [
        dir.open_read("fifo").unwrap_err(),
        dir.open_append("fifo", 0o600).unwrap_err(),
    ] {
        assert!(
            err.to_string().ends_with(
                "fifo is a FIFO (named pipe), not a regular file: check it, then remove it"
            ),
            "{err}"
        );
    }

    // Writable by others: refused, with the fix.
    fs::write(dir.path().join("open.jsonl"), "").unwrap();
    fs::set_permissions(
        dir.path().join("open.jsonl"),
        fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let err = dir.open_append("open.jsonl", 0o600).unwrap_err();
    assert!(
        err.to_string().contains("open.jsonl is writable by group or others (mode 0666): someone else could change it; check it, then run `chmod go-w"),
        "{err}"
    );
    // Someone else's, even at 0600 in our own directory.
    fs::set_permissions(
        dir.path().join("open.jsonl"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    give_away(&dir.path().join("open.jsonl"));
    let err = dir.open_read("open.jsonl").unwrap_err();
    assert!(
        matches!(err, TrustError::Owner(ForeignOwner { owner: 65534, .. })),
        "{err}"
    );

    // No name reaches out of the directory.
    for name in ["../bashrc", "", ".", ".."] {
        assert!(dir.open_read(name).is_err(), "{name:?}");
    }
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn a_bounded_read_refuses_a_huge_file_from_its_size() {
    let home = temp_dir("read");
    let dir = TrustedDir::create(&home.join("login"), Owner::SelfOrRoot).unwrap();
    File::create(dir.path().join("wx.json"))
        .unwrap()
        .set_len(3 * 1024 * 1024 * 1024)
        .unwrap();
    let err = dir.read("wx.json", 64 * 1024).unwrap_err();
    assert!(
        matches!(err, TrustError::Read(ReadError::TooLarge { .. })),
        "{err}"
    );
    fs::write(dir.path().join("wx.json"), "{}").unwrap();
    assert_eq!(dir.read("wx.json", 64 * 1024).unwrap().unwrap(), b"{}");
    assert!(dir.read("absent.json", 64).unwrap().is_none());
    fs::remove_dir_all(home).unwrap();
}

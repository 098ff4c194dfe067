use super::*;
use std::os::unix::fs::{symlink, PermissionsExt};

use crate::bounded_read::Owner;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hsv-atomic-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

#[test]
fn writes_and_keeps_mode() {
    let dir = temp_dir("mode");
    let p = dir.join("a/b.txt");
    write(&p, b"one", 0o600).unwrap();
    assert_eq!(fs::read_to_string(&p).unwrap(), "one");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
    write(&p, b"two", 0o600).unwrap();
    assert_eq!(fs::read_to_string(&p).unwrap(), "two");
    assert_eq!(
        fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o640
    );
    assert_eq!(fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    fs::remove_dir_all(dir).unwrap();
}

/// The name the next temporary file for `target` gets, from a seeded generator: the test
/// plants a link exactly there.
fn next_temp_name(target: &str, seed: u64) -> String {
    fastrand::seed(seed);
    format!(
        ".{target}.tmp.{}.{:016x}",
        std::process::id(),
        fastrand::u64(..)
    )
}

#[test]
fn a_link_planted_at_the_temp_name_or_the_target_is_never_written_through() {
    let dir = temp_dir("links");
    fs::create_dir_all(&dir).unwrap();
    let victim = dir.join("bashrc");
    fs::write(&victim, "precious\n").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o666)).unwrap();
    // The name this very write will try first, and the name older versions used.
    let first = next_temp_name("gateway.pid", 7);
    symlink(&victim, dir.join(&first)).unwrap();
    let old_style = format!(".gateway.pid.tmp.{}", std::process::id());
    symlink(&victim, dir.join(&old_style)).unwrap();
    fastrand::seed(7);
    write(&dir.join("gateway.pid"), b"{\"pid\":1}\n", 0o644).unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(
        fs::read_to_string(dir.join("gateway.pid")).unwrap(),
        "{\"pid\":1}\n"
    );
    // The planted links are left as they were: not ours to remove.
    for name in [&first, &old_style] {
        assert!(
            fs::symlink_metadata(dir.join(name)).unwrap().is_symlink(),
            "{name}"
        );
    }
    // A link at the target itself is replaced by the file, not followed, and its target's
    // mode (0666 here) is not taken for the new file's.
    let target = dir.join("state.json");
    symlink(&victim, &target).unwrap();
    write(&target, b"{}", 0o600).unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    let meta = fs::symlink_metadata(&target).unwrap();
    assert!(meta.is_file());
    assert_eq!(
        meta.permissions().mode() & 0o077,
        0,
        "{:o}",
        meta.permissions().mode()
    );
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_checked_directory_gets_exactly_the_mode_and_a_dropped_temp_file_goes() {
    let dir = temp_dir("in");
    let trusted = TrustedDir::create(&dir.join("state"), Owner::SelfOrRoot).unwrap();
    let file = trusted.path().join("gateway.json");
    fs::write(&file, "old").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).unwrap();
    write_in(&trusted, "gateway.json", b"new", 0o600, Sync::Replace).unwrap();
    assert_eq!(fs::read_to_string(&file).unwrap(), "new");
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let mut temp = TempFile::create_in(&trusted, "journal.jsonl", 0o600).unwrap();
    temp.file().write_all(b"half").unwrap();
    let temp_path = temp.path();
    assert!(temp_path.exists());
    drop(temp);
    assert!(
        !temp_path.exists(),
        "a temp file never persisted is removed"
    );

    let mut temp = TempFile::create_in(&trusted, "journal.jsonl", 0o600).unwrap();
    temp.file().write_all(b"whole\n").unwrap();
    let mut kept = temp.persist(Sync::Durable).unwrap();
    kept.write_all(b"more\n").unwrap();
    assert_eq!(
        fs::read_to_string(trusted.path().join("journal.jsonl")).unwrap(),
        "whole\nmore\n"
    );
    let names: Vec<_> = fs::read_dir(trusted.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(TempFile::create_in(&trusted, "../x", 0o600).is_err());
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn temp_names_say_which_process_made_them() {
    assert_eq!(temp_owner(".a.service.tmp.42.0123456789abcdef"), Some(42));
    assert_eq!(
        temp_owner(".a.service.tmp.42"),
        Some(42),
        "the old names too"
    );
    assert_eq!(temp_owner(".a.service.tmp.42.x"), None);
    assert_eq!(temp_owner("a.service.tmp.42"), None);
    assert_eq!(temp_owner(".a.service"), None);
}

//! Token-lock naming, placement and trust, and conflicts between adapters.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::key::{hmac_sha256, keyed_hash, HASH_HEX, KEY_FILE};
use super::lock_dir::LockDir;
use super::place::{choose_dir, judge_dir, judge_parent, DirEnv, Distrust};
use super::*;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn hmac_matches_rfc_4231() {
    // Test case 1.
    assert_eq!(
        hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
    );
    // Test case 2: a key shorter than the hash.
    assert_eq!(
        hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    // Test case 6: a key longer than the block is hashed first.
    assert_eq!(
        hex(&hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First"
        )),
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    );
}

#[test]
fn the_name_depends_on_the_key_and_is_not_the_plain_hash() {
    let id = "chat:secret";
    let a = keyed_hash(&[1; 32], id);
    assert_eq!(a.len(), HASH_HEX);
    assert_eq!(a, keyed_hash(&[1; 32], id), "stable for one key");
    assert_ne!(a, keyed_hash(&[2; 32], id), "another key, another name");
    assert_ne!(a, keyed_hash(&[1; 32], "chat:other"));
    assert!(!hex(&Sha256::digest(id)).starts_with(&a[..12]));
}

#[test]
fn each_scope_has_a_place_only_its_user_can_change() {
    let user = DirEnv {
        euid: 1000,
        ..DirEnv::default()
    };
    let nothing_exists = |_: &Path, _: u32| false;
    let run_user_exists = |p: &Path, uid: u32| p == Path::new("/run/user/1000") && uid == 1000;
    let run_exists = |p: &Path, uid: u32| p == Path::new("/run") && uid == 0;
    let with = |f: fn(&mut DirEnv)| {
        let mut e = user.clone();
        f(&mut e);
        e
    };
    // The override wins, whoever runs.
    let e = with(|e| {
        e.lock_dir = Some("/srv/locks".into());
        e.euid = 0;
    });
    assert_eq!(choose_dir(&e, run_exists), Some("/srv/locks".into()));
    // Root (system units, and root's user units alike): a root-owned directory in /run.
    let e = with(|e| {
        e.euid = 0;
        e.xdg_runtime_dir = Some("/run/user/0".into());
    });
    assert_eq!(choose_dir(&e, run_exists), Some("/run/hermes-svc".into()));
    assert_eq!(
        choose_dir(&e, nothing_exists),
        Some("/var/run/hermes-svc".into())
    );
    // A user unit.
    let e = with(|e| e.xdg_runtime_dir = Some("/run/user/1000".into()));
    assert_eq!(
        choose_dir(&e, nothing_exists),
        Some("/run/user/1000/hermes-svc".into())
    );
    // A system unit's user: no XDG_RUNTIME_DIR, but its runtime directory exists.
    let e = with(|e| {
        e.xdg_runtime_dir = Some("relative".into());
        e.home = Some("/var/lib/hermes".into());
    });
    assert_eq!(
        choose_dir(&e, run_user_exists),
        Some("/run/user/1000/hermes-svc".into())
    );
    // ... or not: its home.
    assert_eq!(
        choose_dir(&e, nothing_exists),
        Some("/var/lib/hermes/.local/state/hermes-svc/locks".into())
    );
    assert_eq!(choose_dir(&user, nothing_exists), None);
}

#[test]
fn only_our_own_directory_is_trusted_and_parents_must_not_let_others_swap_it() {
    assert_eq!(judge_dir(1000, 0o40700, 1000), Ok(()));
    assert_eq!(judge_dir(1000, 0o40755, 1000), Ok(()));
    assert_eq!(judge_dir(0, 0o40700, 1000), Err(Distrust::Owner(0)));
    assert_eq!(
        judge_dir(65534, 0o41777, 0),
        Err(Distrust::Owner(65534)),
        "a directory someone else made first"
    );
    assert_eq!(
        judge_dir(1000, 0o41777, 1000),
        Err(Distrust::Writable(0o1777))
    );
    assert_eq!(
        judge_dir(1000, 0o40770, 1000),
        Err(Distrust::Writable(0o770))
    );

    assert_eq!(judge_parent(0, 0o40755, 1000), Ok(()));
    assert_eq!(judge_parent(0, 0o41777, 1000), Ok(()), "/tmp");
    assert_eq!(judge_parent(1000, 0o40700, 1000), Ok(()));
    assert_eq!(
        judge_parent(0, 0o40777, 1000),
        Err(Distrust::Writable(0o777))
    );
    assert_eq!(
        judge_parent(1001, 0o40755, 1000),
        Err(Distrust::Owner(1001))
    );
}

#[test]
fn same_identity_conflicts_and_the_directory_key_and_lock_are_ours_alone() {
    use std::os::unix::fs::MetadataExt;
    let dir = std::env::temp_dir().join(format!("hsv-token-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let euid = nix::unistd::geteuid().as_raw();
    let locks = LockDir::open_at(&dir, euid, true).unwrap();
    let me = Holder {
        pid: std::process::id(),
        profile: "coder".into(),
    };
    let _held = locks.acquire("qq", "app:1:s", &me).unwrap();
    let err = locks.acquire("qq", "app:1:s", &me).unwrap_err();
    assert!(err.is_conflict());
    assert!(
        err.to_string().starts_with(&format!(
            "token for adapter qq already held by PID {} (",
            std::process::id()
        )),
        "{err}"
    );
    assert!(locks.acquire("qq", "app:2:s", &me).is_ok());
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(KEY_FILE)), 0o600);
    // The key and every lock file: only the user who made them can read them.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names
        .iter()
        .all(|n| !n.contains("app:") && !n.contains(":s")));
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");

    // The same key the next time, so the same names.
    let again = LockDir::open_at(&dir, euid, false).unwrap();
    assert_eq!(again.file_name("x"), locks.file_name("x"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn two_adapters_with_one_identity_name_both() {
    let adapters = vec![
        ("a".to_owned(), "chat:t".to_owned()),
        ("b".to_owned(), "chat:u".to_owned()),
        ("c".to_owned(), "chat:t".to_owned()),
    ];
    let err = acquire_new(
        Path::new("/p/gateway.toml"),
        &adapters,
        &|_| false,
        &Holder::default(),
    )
    .unwrap_err();
    assert!(err.is_conflict());
    assert_eq!(
        err.to_string(),
        "adapters a and c in /p/gateway.toml use the same bot credential, so they would \
         fight over one session: remove one of them, or give each its own credential"
    );
    assert!(!err.to_string().contains("chat:t"));
}

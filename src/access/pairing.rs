//! DM pairing, as Hermes users know it: an unknown sender's direct message is answered once
//! with a one-time code, and the owner admits them with `hermes-svc pairing approve CODE`.
//!
//! Hermes's model (hermes-agent 0.19.0 `gateway/pairing.py`), kept: 8 characters from an
//! alphabet without 0/O/1/I, valid for an hour, one code per sender per 10 minutes, at most 3
//! waiting per adapter, and after 5 wrong codes no approval (and no new code) for an hour.
//! Codes are kept only as salted SHA-256 hashes: the file shows who asked, never a code.
//!
//! The store is `access/pairing.json` in the profile home, mode 0600, rewritten whole through a
//! temporary file and a rename, under a kernel lock on `access/pairing.lock` that both the
//! gateway (issuing codes) and the CLI (approving them) take for every change. The directory
//! and the file must be the user's alone, as every directory of a profile home
//! ([`TrustedDir`]): a store another user planted is refused, so nobody can approve
//! themselves by writing it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::atomic_file::{self, Sync};
use crate::bounded_read::{Owner, LIMIT};
use crate::trusted_dir::{TrustError, TrustedDir};

/// The symbols of a code: no 0/O or 1/I to misread.
const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
pub const CODE_LENGTH: usize = 8;
/// How long a code may be approved.
pub const CODE_TTL_SECS: u64 = 3600;
/// A sender gets one code (or one "too many" answer) per this long.
pub const ANSWER_EVERY_SECS: u64 = 600;
/// Codes waiting per adapter, at most.
pub const MAX_PENDING: usize = 3;
/// Wrong codes in a row that lock approval out.
pub const MAX_FAILURES: u32 = 5;
pub const LOCKOUT_SECS: u64 = 3600;

pub const FILE: &str = "pairing.json";
const LOCK: &str = "pairing.lock";

/// The store as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Book {
    /// Approved senders by adapter, then sender id.
    #[serde(default)]
    pub approved: BTreeMap<String, BTreeMap<String, Approval>>,
    /// Codes waiting for the owner, oldest first.
    #[serde(default)]
    pub pending: Vec<Pending>,
    /// Wrong codes since the last right one.
    #[serde(default)]
    pub failures: u32,
    /// No approval and no new code before this (seconds since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked_until: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub name: Option<String>,
    /// Seconds since the epoch.
    pub approved_at: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub adapter: String,
    pub sender: String,
    pub name: Option<String>,
    /// Seconds since the epoch.
    pub created_at: u64,
    /// Hex of 16 random bytes.
    pub salt: String,
    /// Hex of SHA-256(salt bytes ++ code).
    pub hash: String,
}

impl Pending {
    /// The first hex digits of the hash, to tell entries apart: never the code.
    pub fn tag(&self) -> &str {
        &self.hash[..self.hash.len().min(8)]
    }

    pub fn expires_at(&self) -> u64 {
        self.created_at + CODE_TTL_SECS
    }
}

/// What an unknown sender's direct message gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A new code, to be sent to them.
    Code(String),
    /// Too many codes wait on this adapter: they are told to try later.
    TooMany,
    /// Nothing: they were answered less than 10 minutes ago, or approval is locked out.
    Quiet,
}

/// Why a pairing command did nothing.
#[derive(Debug, thiserror::Error)]
pub enum PairingError {
    #[error(
        "no code waiting matches {code:?}; {left} more wrong codes lock approval out for an hour \
         (`hermes-svc pairing list` shows who waits)"
    )]
    WrongCode { code: String, left: u32 },
    #[error(
        "too many wrong codes: approval is locked out for {mins} more minutes; the sender can ask \
         for a new code after that"
    )]
    LockedOut { mins: u64 },
    #[error("{code:?} is not a pairing code: codes are {CODE_LENGTH} of the letters and digits A-Z and 2-9 without O and I")]
    NotACode { code: String },
    #[error("{} is not a pairing store ({error}); move it aside and pair again", path.display())]
    Invalid {
        path: PathBuf,
        error: serde_json::Error,
    },
    #[error(transparent)]
    Untrusted(#[from] TrustError),
    #[error("cannot {op} {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Book {
    /// Forget codes past their hour and a lockout that is over.
    fn prune(&mut self, now: u64) {
        self.pending.retain(|p| p.expires_at() > now);
        if self.locked_until.is_some_and(|until| until <= now) {
            self.locked_until = None;
            self.failures = 0;
        }
    }

    pub fn is_approved(&self, adapter: &str, sender: &str) -> bool {
        self.approved
            .get(adapter)
            .is_some_and(|a| a.contains_key(sender))
    }

    /// An unknown sender's direct message at `now`.
    pub fn request(&mut self, adapter: &str, sender: &str, name: Option<&str>, now: u64) -> Answer {
        self.prune(now);
        if self.locked_until.is_some() || self.is_approved(adapter, sender) {
            return Answer::Quiet;
        }
        let mine = |p: &Pending| p.adapter == adapter && p.sender == sender;
        if let Some(p) = self.pending.iter().find(|p| mine(p)) {
            if now < p.created_at + ANSWER_EVERY_SECS {
                return Answer::Quiet;
            }
        }
        // A sender asking again after 10 minutes gets a new code in place of the old one.
        self.pending.retain(|p| !mine(p));
        if self.pending.iter().filter(|p| p.adapter == adapter).count() >= MAX_PENDING {
            return Answer::TooMany;
        }
        let code = new_code();
        let salt = random_bytes::<16>();
        self.pending.push(Pending {
            adapter: adapter.to_owned(),
            sender: sender.to_owned(),
            name: name.map(str::to_owned),
            created_at: now,
            salt: hex(&salt),
            hash: hash(&salt, &code),
        });
        Answer::Code(code)
    }

    /// The waiting entry `code` names, taken out of the book; a wrong code counts towards the
    /// lockout.
    fn take(&mut self, code: &str, now: u64) -> Result<Pending, PairingError> {
        self.prune(now);
        if let Some(until) = self.locked_until {
            return Err(PairingError::LockedOut {
                mins: until.saturating_sub(now).div_ceil(60),
            });
        }
        let code = code.trim().to_ascii_uppercase();
        if code.len() != CODE_LENGTH || !code.bytes().all(|b| ALPHABET.contains(&b)) {
            // Not a guess at a code at all: no failure counted for a typo of that kind.
            return Err(PairingError::NotACode { code });
        }
        // Every entry is hashed and compared, whichever matches, in constant time.
        let mut found = None;
        for (i, p) in self.pending.iter().enumerate() {
            let Some(salt) = unhex(&p.salt) else { continue };
            let theirs = hash(&salt, &code);
            if same(theirs.as_bytes(), p.hash.as_bytes()) {
                found = Some(i);
            }
        }
        match found {
            Some(i) => {
                self.failures = 0;
                Ok(self.pending.remove(i))
            }
            None => {
                self.failures += 1;
                if self.failures >= MAX_FAILURES {
                    self.locked_until = Some(now + LOCKOUT_SECS);
                }
                Err(PairingError::WrongCode {
                    code,
                    left: MAX_FAILURES.saturating_sub(self.failures),
                })
            }
        }
    }

    /// Admit the sender `code` was sent to, from their next message.
    pub fn approve(&mut self, code: &str, now: u64) -> Result<Pending, PairingError> {
        let p = self.take(code, now)?;
        self.approved.entry(p.adapter.clone()).or_default().insert(
            p.sender.clone(),
            Approval {
                name: p.name.clone(),
                approved_at: now,
            },
        );
        Ok(p)
    }

    /// Throw the code away without admitting anyone.
    pub fn deny(&mut self, code: &str, now: u64) -> Result<Pending, PairingError> {
        self.take(code, now)
    }

    /// No longer admit `sender` on `adapter`; whether they were approved.
    pub fn revoke(&mut self, adapter: &str, sender: &str) -> bool {
        let Some(a) = self.approved.get_mut(adapter) else {
            return false;
        };
        let was = a.remove(sender).is_some();
        if a.is_empty() {
            self.approved.remove(adapter);
        }
        was
    }

    /// The book as it stands at `now`: what `list` shows.
    pub fn at(mut self, now: u64) -> Book {
        self.prune(now);
        self
    }
}

fn new_code() -> String {
    random_bytes::<CODE_LENGTH>()
        .iter()
        // 32 symbols: the low five bits of a random byte pick one without bias.
        .map(|b| char::from(ALPHABET[usize::from(b & 31)]))
        .collect()
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    // The system's CSPRNG does not fail on Linux or macOS once the process runs; were it to,
    // a code of zeros is still refused nothing: it is one code among 2^40.
    if SystemRandom::new().fill(&mut bytes).is_err() {
        tracing::error!("the system random source failed");
    }
    bytes
}

fn hash(salt: &[u8], code: &str) -> String {
    let mut h = Sha256::new();
    h.update(salt);
    h.update(code.as_bytes());
    hex(&h.finalize())
}

/// Whether `a` and `b` are equal, in time that depends only on their lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A profile's pairing store, in the directory `dir` (`access/` of the profile home).
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(dir: &Path) -> Store {
        Store {
            dir: dir.to_owned(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// The book as it is now, without the lock: for reading only. A missing store is empty.
    pub fn read(&self) -> Result<Book, PairingError> {
        self.read_as(Owner::SelfOrRoot)
    }

    /// The same, accepting the files of `owner` (doctor, run by root on another account's
    /// profile, accepts that account's).
    pub(crate) fn read_as(&self, owner: Owner) -> Result<Book, PairingError> {
        match TrustedDir::open(&self.dir, owner)? {
            Some(dir) => self.read_in(&dir),
            None => Ok(Book::default()),
        }
    }

    fn read_in(&self, dir: &TrustedDir) -> Result<Book, PairingError> {
        match dir.read(FILE, LIMIT)? {
            None => Ok(Book::default()),
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|error| PairingError::Invalid {
                path: self.path(),
                error,
            }),
        }
    }

    /// Change the book with `f` under the store's lock, and write it back if `f` changed it.
    /// The lock is the kernel's: a process that dies holding it lets it go.
    pub fn change<T>(&self, f: impl FnOnce(&mut Book) -> T) -> Result<T, PairingError> {
        let dir = TrustedDir::create(&self.dir, Owner::SelfOrRoot)?;
        let lock_file = dir.open_append(LOCK, 0o600)?;
        let _held = Flock::lock(lock_file, FlockArg::LockExclusive).map_err(|(_, errno)| {
            PairingError::Io {
                op: "lock",
                path: self.dir.join(LOCK),
                source: errno.into(),
            }
        })?;
        let mut book = self.read_in(&dir)?;
        let before = book.clone();
        let out = f(&mut book);
        if book != before {
            let text = serde_json::to_vec_pretty(&book).map_err(|error| PairingError::Invalid {
                path: self.path(),
                error,
            })?;
            atomic_file::write_in(&dir, FILE, &text, 0o600, Sync::Durable)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_eight_unambiguous_characters_kept_only_as_a_salted_hash() {
        let mut book = Book::default();
        let Answer::Code(code) = book.request("tg", "42", Some("Ann"), 1000) else {
            panic!("no code")
        };
        assert_eq!(code.len(), CODE_LENGTH);
        assert!(code.bytes().all(|b| ALPHABET.contains(&b)));
        assert!(!code.contains(['0', 'O', '1', 'I']));
        let text = serde_json::to_string(&book).unwrap();
        assert!(!text.contains(&code), "{text}");
        // Two codes for two senders have two salts.
        let Answer::Code(_) = book.request("tg", "43", None, 1000) else {
            panic!()
        };
        assert_ne!(book.pending[0].salt, book.pending[1].salt);
    }

    #[test]
    fn one_answer_per_sender_per_ten_minutes_and_three_waiting_at_most() {
        let mut book = Book::default();
        assert!(matches!(book.request("tg", "1", None, 0), Answer::Code(_)));
        assert_eq!(book.request("tg", "1", None, 599), Answer::Quiet);
        assert!(matches!(
            book.request("tg", "1", None, 600),
            Answer::Code(_)
        ));
        assert_eq!(book.pending.len(), 1, "the new code replaced the old");
        assert!(matches!(
            book.request("tg", "2", None, 600),
            Answer::Code(_)
        ));
        assert!(matches!(
            book.request("tg", "3", None, 600),
            Answer::Code(_)
        ));
        assert_eq!(book.request("tg", "4", None, 600), Answer::TooMany);
        // Another adapter has its own three.
        assert!(matches!(
            book.request("dc", "4", None, 600),
            Answer::Code(_)
        ));
    }

    #[test]
    fn approve_admits_from_then_on_and_a_code_expires() {
        let mut book = Book::default();
        let Answer::Code(code) = book.request("tg", "42", Some("Ann"), 0) else {
            panic!()
        };
        assert!(!book.is_approved("tg", "42"));
        let p = book
            .approve(&format!(" {} ", code.to_lowercase()), 10)
            .unwrap();
        assert_eq!((p.adapter.as_str(), p.sender.as_str()), ("tg", "42"));
        assert!(book.is_approved("tg", "42"));
        assert!(!book.is_approved("dc", "42"));
        assert!(book.pending.is_empty());
        assert!(matches!(
            book.approve(&code, 11),
            Err(PairingError::WrongCode { .. })
        ));
        assert!(book.revoke("tg", "42"));
        assert!(!book.is_approved("tg", "42"));
        assert!(!book.revoke("tg", "42"));

        let Answer::Code(late) = book.request("tg", "7", None, 100) else {
            panic!()
        };
        assert!(matches!(
            book.approve(&late, 100 + CODE_TTL_SECS),
            Err(PairingError::WrongCode { .. })
        ));
        assert!(!book.is_approved("tg", "7"));
    }

    #[test]
    fn five_wrong_codes_lock_approval_and_new_codes_out_for_an_hour() {
        let mut book = Book::default();
        let Answer::Code(code) = book.request("tg", "42", None, 0) else {
            panic!()
        };
        let wrong = if code == "AAAAAAAA" {
            "BBBBBBBB"
        } else {
            "AAAAAAAA"
        };
        for left in (0..MAX_FAILURES).rev() {
            match book.approve(wrong, 1) {
                Err(PairingError::WrongCode { left: l, .. }) => assert_eq!(l, left),
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(
            book.approve(&code, 2),
            Err(PairingError::LockedOut { mins: 60 })
        ));
        assert_eq!(book.request("tg", "9", None, 2), Answer::Quiet);
        // Not a code at all is no guess, and counts nothing.
        let mut fresh = Book::default();
        assert!(matches!(
            fresh.approve("hello", 0),
            Err(PairingError::NotACode { .. })
        ));
        assert_eq!(fresh.failures, 0);
        // After the hour (the code has expired by then too), a new request gets a code.
        assert!(matches!(
            book.request("tg", "9", None, 1 + LOCKOUT_SECS),
            Answer::Code(_)
        ));
    }

    #[test]
    fn the_store_is_written_whole_and_0600_and_a_planted_one_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("hsv-pairing-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::new(&dir.join("access"));
        assert_eq!(store.read().unwrap(), Book::default());
        let code = store
            .change(|b| b.request("tg", "42", None, now()))
            .unwrap();
        let Answer::Code(code) = code else { panic!() };
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        store.change(|b| b.approve(&code, now())).unwrap().unwrap();
        assert!(store.read().unwrap().is_approved("tg", "42"));
        // Writable by others: refused, not read.
        std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(store.read(), Err(PairingError::Untrusted(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Messages by chat: at most one in its turn per chat, the rest waiting in order.
//!
//! Both bridges need this. Hermes merges messages that reach a busy chat into one turn and
//! anchors the one reply to the first of them (or interrupts the running turn), so a message
//! can only be matched to its answer when it is the only one in its chat's turn; and two
//! concurrent API calls of one session both run and merge. Chats never wait for each other:
//! a chat behind a hung turn keeps only its first [`HELD`] messages in memory, and of the rest
//! only their place in the spool (their buffer id), so that the bridge's window is never full
//! of one chat's backlog while another chat's message waits to be read. A parked message is
//! read again from the spool when its turn comes.

use std::collections::{HashMap, VecDeque};

/// The messages a chat holds in memory, its turn's included; the rest of its backlog is
/// parked. Four: enough that a busy chat's next turns start without a read of the spool.
pub const HELD: usize = 4;

pub struct Chats<T> {
    chats: HashMap<String, Chat<T>>,
    /// Items in memory, in turns or waiting: what the bridge's window counts.
    held: usize,
}

struct Chat<T> {
    waiting: VecDeque<Slot<T>>,
    in_turn: Option<T>,
}

/// What [`Chats::start`] did.
pub struct Started<E> {
    /// The chats whose turn started.
    pub chats: Vec<String>,
    /// The buffer ids of messages that get no turn: overtaken, or no longer in the spool.
    pub passed: Vec<String>,
    /// A parked message could not be read again.
    pub error: Option<E>,
}

/// A waiting message: held, or parked as its buffer id.
enum Slot<T> {
    Held(T),
    Parked(String),
}

impl<T> Default for Chats<T> {
    fn default() -> Self {
        Self {
            chats: HashMap::new(),
            held: 0,
        }
    }
}

impl<T> Chats<T> {
    /// `item` (the message read as `buffer`) waits for its turn in `chat`, after those
    /// already waiting; past [`HELD`] in the chat, only `buffer` is kept.
    pub fn push(&mut self, chat: String, buffer: String, item: T) {
        let c = self.chats.entry(chat).or_insert_with(|| Chat {
            waiting: VecDeque::new(),
            in_turn: None,
        });
        if c.waiting.len() + usize::from(c.in_turn.is_some()) < HELD {
            c.waiting.push_back(Slot::Held(item));
            self.held += 1;
        } else {
            c.waiting.push_back(Slot::Parked(buffer));
        }
    }

    /// Items in memory: a bridge reads no more while this is at its window.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Start the next turn of every chat that has none. A parked message is read again with
    /// `fetch` (its buffer id); one that cannot be (`Ok(None)`: the spool rotated past it) is
    /// passed, as are the items overtaken when `latest_only`. A fetch that fails stops there,
    /// with that message still first in its chat, to be tried again.
    pub fn start<E>(
        &mut self,
        latest_only: bool,
        mut fetch: impl FnMut(&str) -> Result<Option<T>, E>,
        buffer_of: impl Fn(&T) -> &str,
    ) -> Started<E> {
        let mut out = Started {
            chats: vec![],
            passed: vec![],
            error: None,
        };
        for (name, chat) in &mut self.chats {
            if chat.in_turn.is_some() {
                continue;
            }
            if latest_only {
                while chat.waiting.len() > 1 {
                    if let Some(slot) = chat.waiting.pop_front() {
                        out.passed.push(match slot {
                            Slot::Held(item) => {
                                self.held -= 1;
                                buffer_of(&item).to_owned()
                            }
                            Slot::Parked(buffer) => buffer,
                        });
                    }
                }
            }
            while let Some(slot) = chat.waiting.pop_front() {
                let item = match slot {
                    Slot::Held(item) => item,
                    Slot::Parked(buffer) => match fetch(&buffer) {
                        Ok(Some(item)) => {
                            self.held += 1;
                            item
                        }
                        Ok(None) => {
                            out.passed.push(buffer);
                            continue;
                        }
                        Err(e) => {
                            chat.waiting.push_front(Slot::Parked(buffer));
                            out.error = Some(e);
                            break;
                        }
                    },
                };
                chat.in_turn = Some(item);
                out.chats.push(name.clone());
                break;
            }
            if out.error.is_some() {
                break;
            }
        }
        self.chats
            .retain(|_, c| c.in_turn.is_some() || !c.waiting.is_empty());
        out
    }

    /// The item in `chat`'s turn.
    pub fn in_turn(&self, chat: &str) -> Option<&T> {
        self.chats.get(chat)?.in_turn.as_ref()
    }

    pub fn in_turn_mut(&mut self, chat: &str) -> Option<&mut T> {
        self.chats.get_mut(chat)?.in_turn.as_mut()
    }

    /// Every item in a turn, with its chat.
    pub fn turns(&self) -> impl Iterator<Item = (&str, &T)> {
        self.chats
            .iter()
            .filter_map(|(name, c)| Some((name.as_str(), c.in_turn.as_ref()?)))
    }

    /// End `chat`'s turn: its item.
    pub fn end(&mut self, chat: &str) -> Option<T> {
        let c = self.chats.get_mut(chat)?;
        let item = c.in_turn.take();
        if item.is_some() {
            self.held -= 1;
        }
        if c.waiting.is_empty() {
            self.chats.remove(chat);
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: &str) -> Result<Option<u32>, ()> {
        panic!("nothing is parked")
    }

    fn start(chats: &mut Chats<u32>, latest: bool) -> (Vec<String>, Vec<String>) {
        let s = chats.start(latest, |b| Ok::<_, ()>(b.parse().ok()), |_| "held");
        assert!(s.error.is_none());
        (s.chats, s.passed)
    }

    #[test]
    fn one_turn_per_chat_in_order_and_chats_apart() {
        let mut chats = Chats::default();
        chats.push("a".into(), "1".into(), 1);
        chats.push("a".into(), "2".into(), 2);
        chats.push("b".into(), "3".into(), 3);
        let s = chats.start(false, never, |_| "");
        let (mut started, passed) = (s.chats, s.passed);
        started.sort();
        assert_eq!(started, ["a", "b"]);
        assert_eq!(
            (chats.in_turn("a"), chats.in_turn("b")),
            (Some(&1), Some(&3))
        );
        assert!(passed.is_empty());
        assert!(
            chats.start(false, never, |_| "").chats.is_empty(),
            "both chats are in a turn"
        );
        assert_eq!(chats.end("a"), Some(1));
        assert_eq!(chats.start(false, never, |_| "").chats, ["a"]);
        assert_eq!(chats.in_turn("a"), Some(&2));
        assert_eq!(chats.end("b"), Some(3));
        assert!(chats.in_turn("b").is_none());
        assert_eq!(chats.turns().count(), 1);
        assert_eq!(chats.held(), 1);
    }

    #[test]
    fn latest_only_skips_the_overtaken() {
        let mut chats = Chats::default();
        for i in 1..=4 {
            chats.push("a".into(), i.to_string(), i);
        }
        fn buffer(i: &u32) -> &str {
            if *i == 1 {
                "1"
            } else {
                "other"
            }
        }
        let s = chats.start(true, never, buffer);
        let (started, passed) = (s.chats, s.passed);
        assert_eq!(started, ["a"]);
        assert_eq!(chats.in_turn("a"), Some(&4));
        assert_eq!(passed, ["1", "other", "other"]);
        assert_eq!(chats.held(), 1);
    }

    #[test]
    fn a_chats_backlog_is_parked_past_what_it_holds_and_read_again_in_its_turn() {
        let mut chats = Chats::default();
        for i in 0..70 {
            chats.push("busy".into(), i.to_string(), i);
        }
        assert_eq!(chats.held(), HELD, "the rest is parked");
        chats.push("other".into(), "100".into(), 100);
        let (mut started, _) = start(&mut chats, false);
        started.sort();
        assert_eq!(started, ["busy", "other"]);
        for i in 0..70 {
            assert_eq!(chats.in_turn("busy"), Some(&i));
            assert_eq!(chats.end("busy"), Some(i));
            start(&mut chats, false);
        }
        assert_eq!(chats.held(), 1, "only other's turn");
        // A parked message that cannot be read again is passed, and the next one goes on.
        for i in 0..6 {
            chats.push("c".into(), i.to_string(), i);
        }
        chats.push("c".into(), "gone".into(), 99);
        chats.push("c".into(), "7".into(), 7);
        for _ in 0..6 {
            start(&mut chats, false);
            chats.end("c");
        }
        let (started, passed) = start(&mut chats, false);
        assert_eq!(
            (started, passed),
            (vec!["c".to_owned()], vec!["gone".to_owned()])
        );
        assert_eq!(chats.in_turn("c"), Some(&7));

        // A fetch that fails leaves its message first in its chat, for the next start.
        chats.end("c");
        for i in 0..5 {
            chats.push("d".into(), i.to_string(), i);
        }
        for _ in 0..4 {
            start(&mut chats, false);
            chats.end("d");
        }
        let failed = chats.start(false, |_| Err("EMFILE"), |_| "");
        assert_eq!((failed.chats.len(), failed.error), (0, Some("EMFILE")));
        assert_eq!(start(&mut chats, false).0, ["d"]);
        assert_eq!(chats.in_turn("d"), Some(&4));
    }
}

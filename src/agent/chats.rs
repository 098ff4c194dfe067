//! Messages by chat: at most one in its turn per chat, the rest waiting in order.
//!
//! Both bridges need this. Hermes merges messages that reach a busy chat into one turn and
//! anchors the one reply to the first of them (or interrupts the running turn), so a message
//! can only be matched to its answer when it is the only one in its chat's turn; and two
//! concurrent API calls of one session both run and merge. Chats never wait for each other.

use std::collections::{HashMap, VecDeque};

pub struct Chats<T> {
    chats: HashMap<String, Chat<T>>,
}

struct Chat<T> {
    waiting: VecDeque<T>,
    in_turn: Option<T>,
}

impl<T> Default for Chats<T> {
    fn default() -> Self {
        Self {
            chats: HashMap::new(),
        }
    }
}

impl<T> Chats<T> {
    /// `item` waits for its turn in `chat`, after those already waiting.
    pub fn push(&mut self, chat: String, item: T) {
        self.chats
            .entry(chat)
            .or_insert_with(|| Chat {
                waiting: VecDeque::new(),
                in_turn: None,
            })
            .waiting
            .push_back(item);
    }

    /// Start the next turn of every chat that has none: the chats whose turn started, and the
    /// items overtaken when `latest_only` (they get no turn).
    pub fn start(&mut self, latest_only: bool) -> (Vec<String>, Vec<T>) {
        let mut overtaken = vec![];
        let mut started = vec![];
        for (name, chat) in &mut self.chats {
            if chat.in_turn.is_some() {
                continue;
            }
            if latest_only {
                while chat.waiting.len() > 1 {
                    overtaken.extend(chat.waiting.pop_front());
                }
            }
            if let Some(next) = chat.waiting.pop_front() {
                chat.in_turn = Some(next);
                started.push(name.clone());
            }
        }
        (started, overtaken)
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
        if c.waiting.is_empty() {
            self.chats.remove(chat);
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_turn_per_chat_in_order_and_chats_apart() {
        let mut chats = Chats::default();
        chats.push("a".into(), 1);
        chats.push("a".into(), 2);
        chats.push("b".into(), 3);
        let (mut started, overtaken) = chats.start(false);
        started.sort();
        assert_eq!(started, ["a", "b"]);
        assert_eq!(
            (chats.in_turn("a"), chats.in_turn("b")),
            (Some(&1), Some(&3))
        );
        assert!(overtaken.is_empty());
        assert!(chats.start(false).0.is_empty(), "both chats are in a turn");
        assert_eq!(chats.end("a"), Some(1));
        assert_eq!(chats.start(false).0, ["a"]);
        assert_eq!(chats.in_turn("a"), Some(&2));
        assert_eq!(chats.end("b"), Some(3));
        assert!(chats.in_turn("b").is_none());
        assert_eq!(chats.turns().count(), 1);
    }

    #[test]
    fn latest_only_skips_the_overtaken() {
        let mut chats = Chats::default();
        for i in 1..=4 {
            chats.push("a".into(), i);
        }
        let (started, overtaken) = chats.start(true);
        assert_eq!(started, ["a"]);
        assert_eq!(chats.in_turn("a"), Some(&4));
        assert_eq!(overtaken, [1, 2, 3]);
    }
}

//! The per-sender budget: at most N messages of one sender reach the agent in any window of
//! the budget's length, counted over a sliding window (a burst across a boundary of fixed
//! windows would get twice N through). Kept in memory: a restart forgives, which costs at most
//! one more window's worth.
//!
//! A sender's count is theirs alone, so one sender's flood never uses up another's budget, and
//! the flood's refusals cost a lookup each.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::config::Budget;

/// Senders whose window is over are forgotten once this many are tracked, so that a flood of
/// made-up senders costs memory for a window at most.
const PRUNE_AT: usize = 10_000;

/// What a message's sender had left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spent {
    /// Within the budget: the message goes on.
    Within,
    /// Over it; `notice` on the first refusal of a window, when the sender is told.
    Over { notice: bool },
}

#[derive(Debug, Default)]
struct Sender {
    /// When each message of the window went on, oldest first; at most the budget's N.
    admitted: VecDeque<Instant>,
    /// When the sender was last told they are over.
    noticed: Option<Instant>,
}

/// Every sender's window, by adapter and sender id.
#[derive(Debug, Default)]
pub struct Budgets {
    senders: HashMap<(String, String), Sender>,
}

impl Budgets {
    /// Count one message of `sender` on `adapter` at `now` against `budget`.
    pub fn spend(&mut self, adapter: &str, sender: &str, budget: Budget, now: Instant) -> Spent {
        let Budget::Limit { messages, per } = budget else {
            return Spent::Within;
        };
        if self.senders.len() >= PRUNE_AT {
            self.prune(now, per);
        }
        let s = self
            .senders
            .entry((adapter.to_owned(), sender.to_owned()))
            .or_default();
        while s
            .admitted
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= per)
        {
            s.admitted.pop_front();
        }
        if s.admitted.len() < messages as usize {
            s.admitted.push_back(now);
            return Spent::Within;
        }
        let notice = s
            .noticed
            .is_none_or(|at| now.saturating_duration_since(at) >= per);
        if notice {
            s.noticed = Some(now);
        }
        Spent::Over { notice }
    }

    /// Forget the senders with nothing in their window and no notice in it.
    fn prune(&mut self, now: Instant, per: Duration) {
        let live = |at: &Instant| now.saturating_duration_since(*at) < per;
        self.senders.retain(|_, s| {
            s.admitted.back().is_some_and(live) || s.noticed.as_ref().is_some_and(live)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIVE_A_MINUTE: Budget = Budget::Limit {
        messages: 5,
        per: Duration::from_secs(60),
    };

    #[test]
    fn a_burst_is_cut_at_the_budget_with_one_notice_and_others_keep_theirs() {
        let mut b = Budgets::default();
        let t0 = Instant::now();
        let spent: Vec<Spent> = (0..30)
            .map(|i| b.spend("tg", "flood", FIVE_A_MINUTE, t0 + Duration::from_millis(i)))
            .collect();
        assert!(spent[..5].iter().all(|s| *s == Spent::Within));
        assert_eq!(spent[5], Spent::Over { notice: true });
        assert!(spent[6..]
            .iter()
            .all(|s| *s == Spent::Over { notice: false }));
        // Another sender, and the same id on another adapter, are untouched.
        assert_eq!(b.spend("tg", "calm", FIVE_A_MINUTE, t0), Spent::Within);
        assert_eq!(b.spend("dc", "flood", FIVE_A_MINUTE, t0), Spent::Within);
        // The window slides: a minute after the first, one more goes on, and no notice
        // again while the last one is under a minute old.
        let later = t0 + Duration::from_secs(60);
        assert_eq!(b.spend("tg", "flood", FIVE_A_MINUTE, later), Spent::Within);
        assert_eq!(
            b.spend("tg", "flood", FIVE_A_MINUTE, later),
            Spent::Over { notice: false }
        );
        // A window on, the budget is whole again, and the next refusal is told again.
        let next = t0 + Duration::from_secs(180);
        for _ in 0..5 {
            assert_eq!(b.spend("tg", "flood", FIVE_A_MINUTE, next), Spent::Within);
        }
        assert_eq!(
            b.spend("tg", "flood", FIVE_A_MINUTE, next),
            Spent::Over { notice: true }
        );
    }

    #[test]
    fn off_is_no_budget_and_many_senders_are_forgotten_when_their_window_is_over() {
        let mut b = Budgets::default();
        let t0 = Instant::now();
        for _ in 0..100 {
            assert_eq!(b.spend("tg", "x", Budget::Off, t0), Spent::Within);
        }
        for i in 0..PRUNE_AT {
            b.spend("tg", &i.to_string(), FIVE_A_MINUTE, t0);
        }
        b.spend("tg", "late", FIVE_A_MINUTE, t0 + Duration::from_secs(61));
        assert_eq!(b.senders.len(), 1);
    }
}

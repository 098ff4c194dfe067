//! An agent's answer as the messages posted for it: the platform's pieces, and no more than
//! [`MAX_PIECES`] of them.
//!
//! An agent that loops or dumps a file can answer with megabytes; posted whole, a 1 MiB answer
//! became 273 Telegram messages, flooding the chat and the bot's rate limit. So one answer
//! posts at most [`MAX_PIECES`] messages, and the last says how much was left out (cron's
//! output is cut the same way), so that a cut answer is never mistaken for a whole one.

use crate::gateway::send::split::pieces;
use crate::gateway::send::TextUnit;

/// The most messages one answer posts: a long answer of a few pages still goes whole on every
/// platform (8 × 2,000 characters on the tightest), and a runaway one costs a chat eight.
pub const MAX_PIECES: usize = 8;

/// `text` as the messages to post, each at most `max` `unit`s; empty pieces are left out.
pub fn messages(text: &str, max: usize, unit: TextUnit) -> Vec<String> {
    let parts: Vec<&str> = pieces(text, max, unit)
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .collect();
    let mut out: Vec<String> = parts
        .iter()
        .take(MAX_PIECES)
        .map(|p| (*p).to_owned())
        .collect();
    if parts.len() <= MAX_PIECES {
        return out;
    }
    let mark = |missing: usize| {
        format!("\n[… cut: {missing} more characters of this answer were not posted]")
    };
    // The mark's length depends on its number; the longest it can be always fits, on any
    // platform that takes more than the mark (every one does; a made-up tiny one gets no mark).
    let room = max.saturating_sub(unit.len(&mark(usize::MAX)));
    if room == 0 {
        return out;
    }
    let last = out.pop().unwrap_or_default();
    let kept = unit.prefix(&last, room).to_owned();
    // Counted in characters, as a reader counts; the whitespace the split dropped between
    // pieces counts as missing too.
    let posted: usize = out.iter().map(|p| p.chars().count()).sum::<usize>() + kept.chars().count();
    let missing = text.chars().count().saturating_sub(posted);
    out.push(format!("{kept}{}", mark(missing)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_answer_is_cut_to_its_pieces_and_says_so() {
        let text = "word ".repeat(200_000);
        let out = messages(&text, 4096, TextUnit::Utf16);
        assert_eq!(out.len(), MAX_PIECES);
        assert!(out.iter().all(|p| TextUnit::Utf16.len(p) <= 4096));
        let last = out.last().unwrap();
        assert!(
            last.ends_with("characters of this answer were not posted]"),
            "{last}"
        );
        let said: usize = last
            .rsplit("cut: ")
            .next()
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        let posted: usize = out[..MAX_PIECES - 1]
            .iter()
            .map(|p| p.chars().count())
            .sum::<usize>()
            + last.split("\n[… cut").next().unwrap().chars().count();
        assert_eq!(said + posted, text.chars().count());
    }

    #[test]
    fn an_answer_within_the_cap_is_posted_whole() {
        let text = "x".repeat(4096 * 3);
        let out = messages(&text, 4096, TextUnit::Chars);
        assert_eq!(out.concat(), text);
        assert!(messages("  ", 4096, TextUnit::Chars).is_empty());
        // A platform so tight the mark does not fit still gets bounded pieces.
        let tiny = messages(&"y".repeat(1000), 10, TextUnit::Chars);
        assert_eq!(tiny.len(), MAX_PIECES);
        assert!(tiny.iter().all(|p| p.chars().count() <= 10));
    }
}

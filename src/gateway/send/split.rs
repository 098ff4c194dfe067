//! Long texts in pieces, for the platforms that take a few thousand characters a message
//! (4,096 or 2,000, say) where a reply is often longer.
//!
//! A piece ends at the last line break in its window when there is one in the window's
//! second half, else at the last space there, else at the window's end: pieces read as
//! paragraphs where they can, and no piece is ever shorter than half the limit except the
//! last. Pieces are cut at character (Unicode scalar) boundaries and, joined, give back the
//! text exactly; the breaking newline or space stays at the end of its piece. Lengths are in
//! the platform's unit ([`TextUnit`]): characters, or UTF-16 code units.

use super::TextUnit;

/// `text` in pieces of at most `max` `unit`s (at least one piece, even for "").
pub(crate) fn pieces(text: &str, max: usize, unit: TextUnit) -> Vec<&str> {
    // A character takes at most two UTF-16 units: a window of one could hold none of some.
    let max = match unit {
        TextUnit::Chars => max.max(1),
        TextUnit::Utf16 => max.max(2),
    };
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        // The byte offset just past the window's last character, if the rest is longer.
        let end = unit.prefix(rest, max).len();
        if end == rest.len() {
            out.push(rest);
            return out;
        }
        let window = &rest[..end];
        let half = unit.prefix(window, max / 2).len();
        let cut = [b'\n', b' ']
            .iter()
            .find_map(|sep| {
                window
                    .rfind(*sep as char)
                    .filter(|&i| i >= half)
                    .map(|i| i + 1)
            })
            .unwrap_or(end);
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
}

#[cfg(test)]
mod tests {
    use super::{pieces as pieces_in, TextUnit};
    use proptest::prelude::*;

    fn pieces(text: &str, max: usize) -> Vec<&str> {
        pieces_in(text, max, TextUnit::Chars)
    }

    #[test]
    fn short_texts_are_one_piece() {
        assert_eq!(pieces("", 10), [""]);
        assert_eq!(pieces("hello", 5), ["hello"]);
    }

    #[test]
    fn cuts_prefer_line_breaks_then_spaces() {
        assert_eq!(pieces("aaaa\nbbbb cc", 8), ["aaaa\n", "bbbb cc"]);
        assert_eq!(pieces("aaaaa bbbbbbb", 8), ["aaaaa ", "bbbbbbb"]);
        // A break in the window's first half would make a stub piece: cut hard instead.
        assert_eq!(pieces("a bbbbbbbbbb", 8), ["a bbbbbb", "bbbb"]);
        assert_eq!(pieces("字字字字字", 2), ["字字", "字字", "字"]);
    }

    proptest! {
        #[test]
        fn pieces_rejoin_exactly_and_fit(text in "[a-z \n字😀]{0,300}", max in 1usize..40) {
            let p = pieces(&text, max);
            prop_assert_eq!(p.concat(), text.clone());
            for piece in &p {
                prop_assert!(piece.chars().count() <= max);
            }
            for piece in &p[..p.len() - 1] {
                prop_assert!(piece.chars().count() * 2 >= max);
            }
        }

        #[test]
        fn utf16_pieces_fit_in_code_units(text in "[a-z \n字😀]{0,300}", max in 2usize..40) {
            let p = pieces_in(&text, max, TextUnit::Utf16);
            prop_assert_eq!(p.concat(), text.clone());
            for piece in &p {
                prop_assert!(piece.encode_utf16().count() <= max);
            }
            for piece in &p[..p.len() - 1] {
                // Short of half the window only by the one two-unit character that did not fit.
                prop_assert!(piece.encode_utf16().count() * 2 + 2 >= max);
            }
        }
    }
}

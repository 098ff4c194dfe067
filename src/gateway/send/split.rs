//! Long texts in pieces, for the platforms that take a few thousand characters a message
//! (4,096 or 2,000, say) where a reply is often longer.
//!
//! A piece ends at the last line break in its window when there is one in the window's
//! second half, else at the last space there, else at the window's end: pieces read as
//! paragraphs where they can, and no piece is ever shorter than half the limit except the
//! last. Pieces are cut at character (Unicode scalar) boundaries and, joined, give back the
//! text exactly; the breaking newline or space stays at the end of its piece.

/// `text` in pieces of at most `max` characters (at least one piece, even for "").
pub(crate) fn pieces(text: &str, max: usize) -> Vec<&str> {
    let max = max.max(1);
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        // The byte offset just past the window's last character, if the rest is longer.
        let Some((end, _)) = rest.char_indices().nth(max) else {
            out.push(rest);
            return out;
        };
        let window = &rest[..end];
        let half = window.char_indices().nth(max / 2).map_or(0, |(i, _)| i);
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
    use super::pieces;
    use proptest::prelude::*;

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
    }
}

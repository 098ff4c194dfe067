//! Generators of odd text for the property tests: mostly plain characters, often ones that mean
//! something to a unit file, a shell, a glob or a specifier, sometimes any code point, and
//! rarely one that no unit file can hold, so that most cases round-trip and some are refused.

use proptest::prelude::*;

/// Some characters a unit file cannot hold: control characters, and the Unicode noncharacters
/// systemd's UTF-8 check refuses. NUL is left out: no command line can carry it to `install`.
const UNREPRESENTABLE: &[char] = &[
    '\n',
    '\t',
    '\r',
    '\u{1b}',
    '\u{7f}',
    '\u{85}',
    '\u{9f}',
    '\u{FDD0}',
    '\u{FDEF}',
    '\u{FFFE}',
    '\u{FFFF}',
    '\u{1FFFE}',
    '\u{10FFFF}',
];

/// Characters that mean something to a unit file, a shell, a glob or a specifier.
const SYNTAX: &[char] = &[
    '$', '%', '\\', '"', '\'', '[', ']', '*', '?', ';', '#', '=', '{', '}', '@', '-', '+', '!',
    ':', '~', '&', '|', '<', '>', '(', ')', ',', '.', '`', ' ',
];

/// Text beyond ASCII, including neighbours of the noncharacters that must still pass.
const UNICODE: &[char] = &[
    'é',
    'ü',
    'ß',
    '€',
    '中',
    '😀',
    '\u{a0}',
    '\u{2028}',
    '\u{200b}',
    '\u{feff}',
    '\u{fffd}',
    '\u{fdcf}',
    '\u{fdf0}',
    '\u{10fffd}',
];

/// What no unit file can hold: a control character, or a noncharacter (U+FDD0..U+FDEF and the
/// last two code points of every plane), which systemd 252 reads as invalid UTF-8.
pub(crate) fn unrepresentable(c: char) -> bool {
    let u = u32::from(c);
    c.is_control() || (0xFDD0..=0xFDEF).contains(&u) || u & 0xFFFE == 0xFFFE
}

/// One character: mostly plain, often syntax (`syntax` in 1000), sometimes any code point,
/// rarely one no unit file can hold (so that most cases round-trip and some are refused).
pub(crate) fn weighted_char(syntax: u32) -> impl Strategy<Value = char> {
    prop_oneof![
        500 => prop_oneof![
            proptest::char::range('a', 'z'),
            proptest::char::range('A', 'Z'),
            proptest::char::range('0', '9'),
        ],
        syntax => proptest::sample::select(SYNTAX),
        130 => proptest::sample::select(UNICODE),
        40 => any::<char>().prop_filter("no NUL", |c| *c != '\0'),
        6 => proptest::sample::select(UNREPRESENTABLE),
    ]
}

fn any_char() -> impl Strategy<Value = char> {
    weighted_char(320)
}

pub(crate) fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(any_char(), 0..=max).prop_map(|v| v.into_iter().collect())
}

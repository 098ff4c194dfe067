//! The escaper: what `env_assignment` writes, `parse_env_assignment` reads back exactly; what
//! `exec_word` writes decodes back exactly (with the decoder below, which models the subset of
//! systemd's syntax that `exec_word` emits; the property test in tests/it/property.rs checks
//! the same against a real systemd); our drop-in reads back what it rendered; and nothing
//! panics on arbitrary input.

#![no_main]

use hermes_svc::systemd::dropin::DropIn;
use hermes_svc::systemd::escape::{self, EscapeError};
use libfuzzer_sys::fuzz_target;

/// The inverse of `exec_word`: unquote `"..."` with `\\` and `\"`, then undo `$$` and `%%`.
/// Panics on anything `exec_word` would never write.
fn decode_exec_word(word: &str) -> String {
    let inner = match word.strip_prefix('"') {
        Some(rest) => {
            let inner = rest.strip_suffix('"').expect("closing quote");
            let mut out = String::new();
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => out.push(chars.next().expect("escaped character")),
                    '"' => panic!("bare quote inside quotes: {word:?}"),
                    c => out.push(c),
                }
            }
            out
        }
        None => {
            assert!(
                !word.is_empty()
                    && word != ";"
                    && !word
                        .chars()
                        .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\')),
                "needed quotes: {word:?}"
            );
            word.to_owned()
        }
    };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '$' || c == '%' {
            assert_eq!(chars.next(), Some(c), "a lone {c} in {word:?}");
        }
        out.push(c);
    }
    out
}

fn refusable(e: &EscapeError) -> bool {
    matches!(
        e,
        EscapeError::ControlCharacter { .. } | EscapeError::Noncharacter { .. }
    )
}

fuzz_target!(|input: (String, String, Vec<String>, String)| {
    let (name, value, words, quoted) = input;

    match escape::env_assignment(&name, &value) {
        Ok(line) => assert_eq!(
            escape::parse_env_assignment(&line).unwrap(),
            (name.clone(), value.clone())
        ),
        Err(EscapeError::BadEnvName(_)) => assert!(escape::env_name(&name).is_err()),
        Err(e) => assert!(refusable(&e), "{e:?}"),
    }

    // Reading arbitrary text never panics, and what it accepts renders to an equal value.
    if let Ok((k, v)) = escape::parse_env_assignment(&quoted) {
        if let Ok(line) = escape::env_assignment(&k, &v) {
            assert_eq!(escape::parse_env_assignment(&line).unwrap(), (k, v));
        }
    }

    for w in &words {
        match escape::exec_word(w) {
            Ok(e) => assert_eq!(&decode_exec_word(&e), w),
            Err(e) => assert!(refusable(&e), "{e:?}"),
        }
    }
    if let Some(path) = words.first() {
        match escape::exec_path(path) {
            Ok(e) => {
                assert!(!path.contains(['$', '"', '\'', '\\']), "{path:?}");
                assert_eq!(&decode_exec_word(&e), path);
            }
            Err(EscapeError::UnsafeExecPath { ch, .. }) => assert!(path.contains(ch)),
            Err(e) => assert!(refusable(&e), "{e:?}"),
        }
    }
    let _ = escape::exec_line(&words);

    let mut dropin = DropIn::default();
    if escape::env_name(&name).is_ok() {
        dropin.env.insert(name, value);
    }
    for (i, w) in words.into_iter().enumerate() {
        dropin.env.insert(format!("W{i}"), w);
    }
    if let Ok(text) = dropin.render() {
        assert_eq!(DropIn::parse(&text).unwrap(), dropin);
    }
    let _ = DropIn::parse(&quoted);
});

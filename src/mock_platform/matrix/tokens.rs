//! Stream tokens. The spec leaves them opaque; the mock mints them as positions in its one
//! event stream, the way Synapse does (docs/research/matrix-client-server.md §2, §4): `s…`
//! for `/sync`'s `next_batch`, `t…` for `prev_batch` and `/messages`' `start`/`end`. Either
//! kind is a valid `from`/`to` for `/messages` (spec §Syncing: "the client should make a
//! request to `/rooms/<room_id>/messages` with … `from=x-y-z` and `to=d-e-f`").
//!
//! A token at position `p` stands between the event at `p` and the next one. Its second part
//! is this mock's epoch, so a token from another run of the mock (another homeserver, as far
//! as a client can tell) is refused as Synapse refuses a token it cannot read.

/// Which API a token was minted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `next_batch`, the only kind `/sync`'s `since` takes.
    Sync,
    /// `prev_batch`, `/messages`' `start` and `end`.
    Room,
}

impl Kind {
    fn prefix(self) -> char {
        match self {
            Kind::Sync => 's',
            Kind::Room => 't',
        }
    }
}

pub(crate) fn mint(kind: Kind, position: u64, epoch: u32) -> String {
    format!("{}{position}_{epoch}", kind.prefix())
}

/// The position a token names, if it is one of `kinds` minted by this epoch. A position past
/// the end of the stream is brought back to `current`, as Synapse bounds a token "from the
/// future" (`bound_future_token`).
pub(crate) fn parse(token: &str, kinds: &[Kind], epoch: u32, current: u64) -> Option<u64> {
    let mut chars = token.chars();
    let prefix = chars.next()?;
    kinds.iter().find(|kind| kind.prefix() == prefix)?;
    let (position, minted_by) = chars.as_str().split_once('_')?;
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(position) || !all_digits(minted_by) {
        return None;
    }
    if minted_by.parse::<u32>().ok()? != epoch {
        return None;
    }
    Some(position.parse::<u64>().ok()?.min(current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_refuse_what_this_epoch_did_not_mint() {
        let both = [Kind::Sync, Kind::Room];
        assert_eq!(parse(&mint(Kind::Sync, 7, 42), &both, 42, 9), Some(7));
        assert_eq!(parse(&mint(Kind::Room, 7, 42), &both, 42, 9), Some(7));
        assert_eq!(parse(&mint(Kind::Room, 7, 42), &[Kind::Sync], 42, 9), None);
        assert_eq!(parse(&mint(Kind::Sync, 7, 41), &both, 42, 9), None);
        assert_eq!(parse(&mint(Kind::Sync, 70, 42), &both, 42, 9), Some(9));
        for bad in [
            "", "s", "s_42", "s7_", "s-1_42", "x7_42", "s7_42_1", "s७_42",
        ] {
            assert_eq!(parse(bad, &both, 42, 9), None, "{bad}");
        }
    }
}

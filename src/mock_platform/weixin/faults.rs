//! What can go wrong with the long poll (`getupdates`). The sends' failures are the shared
//! [`SendFault`](crate::mock_platform::SendFault)s armed for `Platform::Weixin`.

use std::time::Duration;

/// A failure of `getupdates`. Faults act on polls whose token the mock honours (a poll with a
/// dead token is answered -14 whatever is armed). Set with
/// [`weixin_set_fault`](crate::mock_platform::MockPlatform::weixin_set_fault) a fault lasts
/// until cleared, except `CursorReset` and `Duplicate`, which act once; with
/// [`weixin_set_fault_for`](crate::mock_platform::MockPlatform::weixin_set_fault_for) it acts
/// on that many polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeixinFault {
    /// The poll is read and never answered: a half-open connection as the client sees it.
    HangPolls,
    /// `{"ret":-2,"errcode":-2,"errmsg":"freq limit"}` at once: iLink's frequency limit, the
    /// code hermes-agent backs off on (its `RATE_LIMIT_ERRCODE`).
    RateLimited,
    /// HTTP 502 at once, as a broken gateway in front of iLink would answer.
    ServerError,
    /// The answer comes this much later than it would have.
    Slow(Duration),
    /// The answer ignores the cursor sent and starts at an earlier point of the log (up to
    /// [`REPLAY`] messages back, never later than the cursor): the server lost its place, so
    /// messages the client already has come again.
    CursorReset,
    /// The answer repeats the previous batch, cursor included.
    Duplicate,
}

/// How far back `CursorReset` starts, in messages.
pub const REPLAY: usize = 50;

impl WeixinFault {
    /// Whether a plain `weixin_set_fault` arms the fault for one poll only.
    fn one_shot(&self) -> bool {
        matches!(self, WeixinFault::CursorReset | WeixinFault::Duplicate)
    }
}

/// An armed fault and how many polls it has left (`None`: until cleared).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Armed {
    fault: WeixinFault,
    left: Option<u32>,
}

impl Armed {
    pub(crate) fn lasting(fault: WeixinFault) -> Armed {
        let left = fault.one_shot().then_some(1);
        Armed { fault, left }
    }

    pub(crate) fn counted(fault: WeixinFault, polls: u32) -> Armed {
        Armed {
            fault,
            left: Some(polls),
        }
    }

    /// One strike: the fault to apply to this poll, and whether it stays armed.
    pub(crate) fn strike(&mut self) -> (Option<WeixinFault>, bool) {
        match &mut self.left {
            None => (Some(self.fault), true),
            Some(0) => (None, false),
            Some(n) => {
                *n -= 1;
                (Some(self.fault), *n > 0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shot_faults_clear_themselves() {
        let mut armed = Armed::lasting(WeixinFault::Duplicate);
        assert_eq!(armed.strike(), (Some(WeixinFault::Duplicate), false));
        let mut lasting = Armed::lasting(WeixinFault::HangPolls);
        for _ in 0..3 {
            assert_eq!(lasting.strike(), (Some(WeixinFault::HangPolls), true));
        }
    }

    #[test]
    fn counted_faults_act_that_many_times() {
        let mut armed = Armed::counted(WeixinFault::RateLimited, 2);
        assert_eq!(armed.strike(), (Some(WeixinFault::RateLimited), true));
        assert_eq!(armed.strike(), (Some(WeixinFault::RateLimited), false));
        assert_eq!(
            Armed::counted(WeixinFault::ServerError, 0).strike(),
            (None, false)
        );
    }
}

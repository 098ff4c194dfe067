//! The opcodes of the op-code gateway dialect, which the platforms that speak it share (their
//! close codes differ, and each wing keeps its own table). The sources are named in those
//! wings' module docs. Only the opcodes the adapter sends or acts on are named; any other is
//! still proof of life, and otherwise ignored.

/// An opcode the adapter sends or acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpCode {
    /// Receive: an event (`t` names it, `s` is its seq).
    Dispatch = 0,
    /// Send: a heartbeat with the last seq. Receive: the server asks for one at once.
    Heartbeat = 1,
    /// Send: start a new session.
    Identify = 2,
    /// Send: resume a session with the last seq.
    Resume = 6,
    /// Receive: reconnect and resume.
    Reconnect = 7,
    /// Receive: the session is invalid; `d` says whether a resume may still work.
    InvalidSession = 9,
    /// Receive: the first frame, with the heartbeat interval.
    Hello = 10,
    /// Receive: a heartbeat was received.
    HeartbeatAck = 11,
}

impl OpCode {
    /// The opcode `op` names, or `None` for one the adapter does not act on.
    #[must_use]
    pub(crate) fn from_u64(op: u64) -> Option<OpCode> {
        Some(match op {
            0 => OpCode::Dispatch,
            1 => OpCode::Heartbeat,
            2 => OpCode::Identify,
            6 => OpCode::Resume,
            7 => OpCode::Reconnect,
            9 => OpCode::InvalidSession,
            10 => OpCode::Hello,
            11 => OpCode::HeartbeatAck,
            _ => return None,
        })
    }

    #[must_use]
    pub(crate) fn code(self) -> u8 {
        self as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_opcode_reads_back_as_itself_and_others_are_unknown() {
        for op in [
            OpCode::Dispatch,
            OpCode::Heartbeat,
            OpCode::Identify,
            OpCode::Resume,
            OpCode::Reconnect,
            OpCode::InvalidSession,
            OpCode::Hello,
            OpCode::HeartbeatAck,
        ] {
            assert_eq!(OpCode::from_u64(op.code().into()), Some(op));
        }
        for unknown in [3, 4, 5, 8, 12, 13, 31, 1 << 40] {
            assert_eq!(OpCode::from_u64(unknown), None);
        }
    }
}

//! What an etcd error says about the member that gave it, and so whether another member may
//! be asked instead.
//!
//! etcd-client reports every failure as one `Error`, but three different things happen
//! behind it. A request that never left (the connection could not be made, or the member
//! refused it for want of a leader) can go to any other member: etcd never saw it. A request
//! whose connection broke, or whose answer did not come in time, may have been applied: only
//! a request that does the same thing twice may be sent again. An answer from etcd (a
//! compare that failed, a lease that is gone) is the cluster's answer, and another member
//! would give the same one.

/// gRPC's status codes, which etcd-client passes through (the gRPC spec's numbers).
mod code {
    pub(super) const CANCELLED: i32 = 1;
    pub(super) const UNKNOWN: i32 = 2;
    pub(super) const DEADLINE_EXCEEDED: i32 = 4;
    pub(super) const INTERNAL: i32 = 13;
    pub(super) const UNAVAILABLE: i32 = 14;
}

/// How a request failed, as far as its member is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// etcd never had the request: the connection could not be made (refused, timed out, its
    /// TLS handshake failed) or the member refused it without a leader. Any request may go
    /// to another member.
    Unsent,
    /// The member, or the way to it, failed after the request left: etcd may have applied
    /// it. Only a request that may be applied twice may go to another member.
    MaybeApplied,
    /// etcd answered: another member would answer the same.
    Answered,
}

impl Failure {
    pub(crate) fn of(error: &etcd_client::Error) -> Failure {
        use etcd_client::Error as E;
        match error {
            E::GRpcStatus(status) => {
                let message = status.message();
                match i32::from(status.code()) {
                    code::UNAVAILABLE if unsent(status, message) => Failure::Unsent,
                    code::UNAVAILABLE
                    | code::CANCELLED
                    | code::DEADLINE_EXCEEDED
                    | code::UNKNOWN => Failure::MaybeApplied,
                    code::INTERNAL if message.contains("h2 protocol error") => {
                        Failure::MaybeApplied
                    }
                    _ => Failure::Answered,
                }
            }
            // Only `connect` builds a channel, and it is lazy: nothing was sent.
            E::TransportError(_) => Failure::Unsent,
            E::IoError(_) => Failure::MaybeApplied,
            // A keep-alive's send into a stream that has closed, or a stream that closed
            // before its first answer; "lease not found" is etcd's answer.
            E::LeaseKeepAliveError(why) if why.contains("lease not found") => Failure::Answered,
            E::LeaseKeepAliveError(_) | E::WatchError(_) => Failure::MaybeApplied,
            _ => Failure::Answered,
        }
    }

    /// Is this the member's fault (or the way to it), rather than the request's?
    pub(crate) fn is_member(self) -> bool {
        self != Failure::Answered
    }
}

/// An `Unavailable` that never reached etcd's state machine. tonic turns a failed connection
/// (TCP, or the TLS handshake) into a status whose source is its `ConnectError`, which it
/// does not name otherwise; and etcd refuses a request that requires a leader (`hasleader`)
/// before handling it when it has none.
fn unsent(status: &impl std::fmt::Debug, message: &str) -> bool {
    message.contains("no leader")
        || message.contains("connect error")
        || message.contains("error trying to connect")
        || format!("{status:?}").contains("ConnectError")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member that is not running: its port refuses (a killed process on a live host).
    #[tokio::test]
    async fn a_refused_connection_was_never_sent() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let url = format!("http://127.0.0.1:{port}");
        let mut client = etcd_client::Client::connect([url.as_str()], None)
            .await
            .unwrap();
        let error = client.get("k", None).await.unwrap_err();
        assert_eq!(Failure::of(&error), Failure::Unsent, "{error:?}");
        assert!(Failure::of(&error).is_member());
    }

    #[test]
    fn what_etcd_said_is_its_answer_and_a_broken_stream_may_have_been_applied() {
        use etcd_client::Error as E;
        let gone = E::LeaseKeepAliveError("lease not found".into());
        assert_eq!(Failure::of(&gone), Failure::Answered);
        assert!(!Failure::of(&gone).is_member());
        let ended = E::WatchError("failed to create lease keeper".into());
        assert_eq!(Failure::of(&ended), Failure::MaybeApplied);
        let reset = E::IoError(std::io::ErrorKind::ConnectionReset.into());
        assert_eq!(Failure::of(&reset), Failure::MaybeApplied);
        assert_eq!(Failure::of(&E::InvalidArgs("x".into())), Failure::Answered);
    }
}

//! The failures `/sync` can meet, each one a row of "What a mock must reproduce" in
//! docs/research/matrix-client-server.md, set with
//! [`MockPlatform::matrix_set_fault`](crate::mock_platform::MockPlatform::matrix_set_fault).
//! The send endpoint meets the shared [`SendFault`](crate::mock_platform::SendFault) with
//! [`Platform::Matrix`](crate::mock_platform::Platform::Matrix) instead.

/// One failure of the `/sync` long poll. Each acts on every authorised `/sync` while armed,
/// or on the next `n` with `matrix_set_fault_for`; `RepeatBatch` armed without a count acts
/// once. `InvalidSince` acts only on (and is only used up by) syncs that carry a `since`,
/// `RepeatBatch` only once a non-empty batch was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatrixFault {
    /// The request is read and never answered, not even with headers (item 1, "hung poll").
    HangSyncs,
    /// `200` headers with a `Content-Length` for the whole body, about half the JSON, then a
    /// silent open socket (item 2). The body is what the sync would have answered at once.
    HalfBody,
    /// 429 `M_LIMIT_EXCEEDED` (§6, item 5) with `retry_after_ms` in the body and
    /// `Retry-After` (seconds) in the head, each only when given.
    RateLimited {
        retry_after_ms: Option<u64>,
        header_secs: Option<u64>,
    },
    /// This status with a reverse proxy's HTML error page, or with an empty body (§6,
    /// item 6): not Matrix JSON either way.
    ServerError { status: u16, html: bool },
    /// 401 `M_UNKNOWN_TOKEN` with this `soft_logout` (§1, item 7).
    UnknownToken { soft_logout: bool },
    /// The last non-empty batch answered, again: the same events and the same `next_batch`
    /// (item 9's duplicates).
    RepeatBatch,
    /// 400 `M_UNKNOWN` "Invalid stream token", as Synapse answers a `since` it cannot parse
    /// (§2 "Invalid or expired `since`", item 11).
    InvalidSince,
}

impl MatrixFault {
    /// Whether the fault acts on a sync: `InvalidSince` needs a `since`, `RepeatBatch` a
    /// batch to repeat.
    pub(crate) fn applies(&self, has_since: bool, has_batch: bool) -> bool {
        match self {
            MatrixFault::InvalidSince => has_since,
            MatrixFault::RepeatBatch => has_batch,
            _ => true,
        }
    }
}

/// A fault and how many more syncs it acts on (`None`: until cleared).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Armed {
    pub(crate) fault: MatrixFault,
    pub(crate) syncs: Option<u32>,
}

impl Armed {
    /// One strike: the fault if it still acts, and whether it stays armed after.
    pub(crate) fn strike(&mut self) -> (Option<MatrixFault>, bool) {
        let syncs = match (self.fault, self.syncs) {
            (MatrixFault::RepeatBatch, None) => Some(1),
            (_, syncs) => syncs,
        };
        match syncs {
            None => (Some(self.fault), true),
            Some(0) => (None, false),
            Some(n) => {
                self.syncs = Some(n - 1);
                (Some(self.fault), n > 1)
            }
        }
    }
}

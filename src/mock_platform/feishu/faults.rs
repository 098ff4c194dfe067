//! The Feishu long connection's failure modes, set with
//! [`MockPlatform::set_feishu_fault`](crate::mock_platform::MockPlatform::set_feishu_fault).
//! Send-side failures use the shared [`SendFault`](crate::mock_platform::SendFault) with
//! [`Platform::Feishu`](crate::mock_platform::Platform::Feishu).

use super::config::ClientConfig;

/// One failure to inject. `HalfOpen` and `CloseAll` act on the connections open when set and
/// leave later ones alone (so a client can recover by reconnecting); `NoPong` and `Split` last
/// until cleared; the counted ones clear themselves when used up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeishuFault {
    /// Every current connection stops reading and writing but keeps its TCP socket open, like
    /// a peer that vanished without a FIN. The platform does not notice: it goes on choosing
    /// such a connection for pushes, which are then lost until their ack times out.
    HalfOpen,
    /// Pings go unanswered on every connection; events keep flowing.
    NoPong,
    /// Every push from now on is split into this many parts (`sum`), optionally sent last
    /// part first, to exercise reassembly.
    Split { parts: u32, reversed: bool },
    /// The next this-many events acked with code 200 are pushed once more after their ack:
    /// a redelivery the client must deduplicate.
    DuplicateAcked(u32),
    /// The next `n` connects are refused, at the stage `refusal` names.
    RefuseConnects { n: u32, refusal: Refusal },
    /// The platform's ClientConfig becomes this: the next pong carries it, and so do later
    /// endpoint answers.
    ClientConfig(ClientConfig),
    /// Every current connection is closed with a close frame (code 1000).
    CloseAll,
}

/// How a refused connect looks. The endpoint codes and handshake headers are the ones the SDKs
/// decode: oapi-sdk-go `ws/const.go` and `ws/client.go` (`getConnURL`, `parseErr`),
/// oapi-sdk-python `lark_oapi/ws/const.py` and `client.py` (`_parse_ws_conn_exception`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `POST /callback/ws/endpoint` answers HTTP 200 with this `code` and `msg`. The SDKs retry
    /// 1 (system busy) and 1000040343 (internal error) and treat any other code as fatal.
    Endpoint { code: i64, msg: String },
    /// Endpoint discovery answers this HTTP status (the SDKs retry any non-200).
    EndpointHttp(u16),
    /// The WebSocket upgrade is refused with `Handshake-Status`, `Handshake-Msg` and, when
    /// given, `Handshake-Autherrcode`. The SDKs treat 403, and 514 with auth code 1000040350
    /// (connection limit), as fatal and everything else as retryable.
    Handshake {
        status: u16,
        msg: String,
        auth_err_code: Option<i64>,
    },
}

/// Endpoint `code`s, from the SDKs' constants (`ErrorCode` in node-sdk `ws-client/enum.ts`).
pub mod code {
    pub const OK: i64 = 0;
    pub const SYSTEM_BUSY: i64 = 1;
    pub const FORBIDDEN: i64 = 403;
    pub const AUTH_FAILED: i64 = 514;
    pub const INTERNAL_ERROR: i64 = 1_000_040_343;
    /// oapi-sdk-python `NO_CREDENTIAL`; the mock answers it to an empty AppID or AppSecret.
    pub const NO_CREDENTIAL: i64 = 1_000_040_344;
    /// Not in any SDK: what field reports show the platform answering to a wrong AppID or
    /// AppSecret ("app_id or app_secret is invalid"). Fatal to the SDKs, like any unknown code.
    pub const INVALID_CREDENTIAL: i64 = 1_000_040_345;
    pub const EXCEED_CONN_LIMIT: i64 = 1_000_040_350;
}

impl Refusal {
    /// Endpoint code 1, which the SDKs retry.
    pub fn busy() -> Refusal {
        Refusal::Endpoint {
            code: code::SYSTEM_BUSY,
            msg: "system busy".to_owned(),
        }
    }

    /// Endpoint code 1000040343, which the SDKs retry.
    pub fn internal_error() -> Refusal {
        Refusal::Endpoint {
            code: code::INTERNAL_ERROR,
            msg: "internal error".to_owned(),
        }
    }

    /// Handshake 514 without the connection-limit auth code: retryable to the SDKs.
    pub fn auth_failed() -> Refusal {
        Refusal::Handshake {
            status: code::AUTH_FAILED as u16,
            msg: "auth failed".to_owned(),
            auth_err_code: None,
        }
    }

    /// Handshake 514 with auth code 1000040350: the app's connection limit, fatal.
    pub fn conn_limit() -> Refusal {
        Refusal::Handshake {
            status: code::AUTH_FAILED as u16,
            msg: "exceed conn limit".to_owned(),
            auth_err_code: Some(code::EXCEED_CONN_LIMIT),
        }
    }

    /// Handshake 403: the app is banned ("被封禁"), fatal.
    pub fn forbidden() -> Refusal {
        Refusal::Handshake {
            status: code::FORBIDDEN as u16,
            msg: "forbidden".to_owned(),
            auth_err_code: None,
        }
    }

    pub(crate) fn at_endpoint(&self) -> bool {
        !matches!(self, Refusal::Handshake { .. })
    }
}

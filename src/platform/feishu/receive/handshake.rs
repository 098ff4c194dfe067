//! A refused WebSocket upgrade: the long-connection server says why in its response headers
//! (`Handshake-Status`, `Handshake-Msg`, `Handshake-Autherrcode`), read the way the SDKs read
//! them (oapi-sdk-go `ws/client.go` `parseErr`): 403 (the app is banned) and an authentication
//! failure whose code is 1000040350 (the app's connection limit) are the app's problem, fatal;
//! anything else, including other authentication failures (514: most often a ticket that
//! expired between discovery and connect, which the next discovery replaces), is retried.

use tokio_tungstenite::tungstenite::http::HeaderMap;

use crate::platform::feishu::pbbp2::handshake;

const FORBIDDEN: i64 = 403;
const EXCEED_CONN_LIMIT: i64 = 1_000_040_350;

/// The longest stretch of the server's message kept: it goes into logs and `status`.
const MAX_MSG: usize = 200;

/// What a refused upgrade means.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Retrying cannot help: the gateway exits 78 with this.
    Fatal(String),
    Retry(String),
}

/// Read a refusal from the upgrade's HTTP status and headers.
pub(crate) fn classify(status: u16, headers: &HeaderMap) -> Refusal {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let number = |name: &str| text(name).and_then(|v| v.parse::<i64>().ok());
    let code = number(handshake::STATUS);
    let auth = number(handshake::AUTH_ERR_CODE);
    let mut said = format!("HTTP {status}");
    if let Some(c) = code {
        said.push_str(&format!(", Handshake-Status {c}"));
    }
    if let Some(a) = auth {
        said.push_str(&format!(", Handshake-Autherrcode {a}"));
    }
    if let Some(m) = text(handshake::MSG) {
        let m = crate::safe_text::clip(m, MAX_MSG);
        said.push_str(&format!(": {m}"));
    }
    if auth == Some(EXCEED_CONN_LIMIT) {
        return Refusal::Fatal(format!(
            "the long connection was refused ({said}): the app already has as many \
             connections as the platform allows; stop its other clients (another profile, an \
             SDK)"
        ));
    }
    if code == Some(FORBIDDEN) {
        return Refusal::Fatal(format!(
            "the long connection was refused ({said}): the platform has banned this app's \
             long connection"
        ));
    }
    Refusal::Retry(format!("the long connection was refused ({said})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_tungstenite::tungstenite::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_connection_limit_and_a_ban_are_fatal() {
        let h = headers(&[
            ("handshake-status", "514"),
            ("handshake-autherrcode", "1000040350"),
            ("handshake-msg", "exceed connection limit"),
        ]);
        match classify(200, &h) {
            Refusal::Fatal(m) => {
                assert!(
                    m.contains("1000040350") && m.contains("exceed connection limit"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
        let h = headers(&[("Handshake-Status", "403"), ("Handshake-Msg", "forbidden")]);
        assert!(matches!(classify(403, &h), Refusal::Fatal(m) if m.contains("banned")));
    }

    #[test]
    fn other_refusals_are_retried_with_what_the_server_said() {
        let h = headers(&[
            ("Handshake-Status", "514"),
            ("Handshake-Msg", "ticket expired"),
        ]);
        assert_eq!(
            classify(400, &h),
            Refusal::Retry(
                "the long connection was refused (HTTP 400, Handshake-Status 514: ticket expired)"
                    .into()
            )
        );
        assert!(
            matches!(classify(502, &HeaderMap::new()), Refusal::Retry(m) if m.contains("HTTP 502"))
        );
        let long = "x".repeat(10_000);
        let h = headers(&[("Handshake-Status", "1"), ("Handshake-Msg", &long)]);
        let Refusal::Retry(m) = classify(500, &h) else {
            panic!()
        };
        assert!(m.len() < 400, "{}", m.len());
    }
}

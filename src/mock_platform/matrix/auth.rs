//! Who is asking (docs/research/matrix-client-server.md §1, spec "Using access tokens"):
//! the access token from `Authorization: Bearer …` or, discouraged but honoured,
//! `?access_token=`. Read as Synapse reads it (`get_access_token_from_request`): the header
//! must be exactly `Bearer <token>`, and a request may not carry both.

use super::super::http::RequestHead;
use super::super::reply::Answer;
use super::errors;
use super::state::MatrixState;

/// `Ok` when the request carries the bot's token and it is not revoked; otherwise the 401 to
/// answer: `M_MISSING_TOKEN` without a readable token, `M_UNKNOWN_TOKEN` (`soft_logout`
/// false) with a wrong or revoked one.
pub(crate) fn check(head: &RequestHead, state: &MatrixState) -> Result<(), Answer> {
    let token = token(head)?;
    if token != state.config.access_token || state.revoked() {
        return Err(errors::unknown_token(false));
    }
    Ok(())
}

fn token(head: &RequestHead) -> Result<String, Answer> {
    let query = head.query_param("access_token");
    let Some(header) = head.header("authorization") else {
        return query.ok_or_else(|| errors::missing_token("Missing access token."));
    };
    if query.is_some() {
        return Err(errors::missing_token(
            "Mixing Authorization headers and access_token query parameters.",
        ));
    }
    match header.split(' ').collect::<Vec<_>>().as_slice() {
        ["Bearer", token] => Ok((*token).to_owned()),
        _ => Err(errors::missing_token("Invalid Authorization header.")),
    }
}

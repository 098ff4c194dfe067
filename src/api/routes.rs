//! The routes: which path is which handler, and the handlers for messages and health
//! (events have their own file). Every failure answers with [`Problem`]'s one shape.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::json_object::JsonObject;
use super::problem::Problem;
use super::wire::REPLAYED_HEADER;
use super::{events, media, ApiState, Refused, MAX_BODY};
use crate::bounded_read::Owner;
use crate::gateway::outbox::{Policy, Request};
use crate::gateway::state_file::StateFile;

/// What every handler shares.
pub(super) struct Ctx {
    pub(super) state: ApiState,
    /// A long-poll ends early when this turns true, so a graceful stop is not held up.
    pub(super) shutdown: watch::Receiver<bool>,
}

pub(super) fn router(state: ApiState, shutdown: watch::Receiver<bool>) -> Router {
    Router::new()
        .route("/v1/events", get(events::get_events))
        .route("/v1/messages", post(post_message))
        .route("/v1/messages/{id}", get(get_message))
        .route(media::UPLOAD_PATH, post(media::post_media))
        .route("/v1/media/{id}", get(media::get_media))
        .route("/v1/health", get(health))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Arc::new(Ctx { state, shutdown }))
}

const PATHS: &str = "GET /v1/events, POST /v1/messages, GET /v1/messages/{id}, POST /v1/media, GET /v1/media/{id}, GET /v1/health";

async fn not_found(method: Method, uri: Uri) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no route for {method} {}; the API serves {PATHS}",
            uri.path()
        ),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} does not take {method}; the API serves {PATHS}",
            uri.path()
        ),
    )
}

/// The fields of `POST /v1/messages`, each with what a caller should put there.
const FIELDS: [(&str, &str); 7] = [
    ("adapter", "the adapter's name in gateway.toml, e.g. \"qq\""),
    ("target", "where to send, in the form of that adapter's platform (\"chat:ID\", \"group:OPENID\", a channel id, ...; docs/api.md lists every platform's)"),
    ("text", "the message text"),
    ("reply_to", "optional: the platform id of the message this answers"),
    ("idempotency_key", "a key you choose, the same on every retry of this message (a UUID will do)"),
    ("policy", "optional: \"at-most-once\" (the default) or \"at-least-once\""),
    ("attachments", "optional: files to post with the text, each the `id` POST /v1/media answered, e.g. [\"file_3fa2c1d0e9b8a7f6_report.pdf\"]"),
];

fn hint(field: &str) -> &'static str {
    FIELDS
        .iter()
        .find(|(name, _)| *name == field)
        .map_or("", |(_, hint)| hint)
}

async fn post_message(
    State(ctx): State<Arc<Ctx>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    // The server has read the body already, within its size and time (server.rs).
    let body = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Problem::body_too_large()
        } else {
            Problem::bad_request(
                "bad_body",
                format!("cannot read the request body: {}", e.body_text()),
            )
        }
    })?;
    let (mut request, attachments) = parse_send(&body)?;
    request.files = media::attachments(&ctx, &attachments)?;
    let submitted = ctx.state.messages.submit(request).await.map_err(refused)?;
    let location = HeaderValue::from_str(&format!("/v1/messages/{}", submitted.message.id)).ok();
    let mut response = if submitted.new {
        (StatusCode::ACCEPTED, Json(submitted.message)).into_response()
    } else {
        let mut r = (StatusCode::OK, Json(submitted.message)).into_response();
        r.headers_mut()
            .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
        r
    };
    if let Some(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// The body as a [`Request`], or the first thing wrong with it, named. Parsed by hand rather
/// than derived, so that every error names its field and says what belongs there.
fn parse_send(body: &[u8]) -> Result<(Request, Vec<String>), Problem> {
    let example =
        r#"{"adapter":"qq","target":"group:OPENID","text":"hello","idempotency_key":"9f1c..."}"#;
    let object: JsonObject = serde_json::from_slice(body).map_err(|e| {
        let why = if e.is_data() {
            format!("the body must be a JSON object such as {example}")
        } else {
            format!("the body is not JSON ({e}); send an object such as {example}")
        };
        Problem::bad_request("bad_json", why)
    })?;
    let fields = object.members;
    if let Some(unknown) = fields
        .keys()
        .find(|k| FIELDS.iter().all(|(name, _)| name != k))
    {
        let names: Vec<&str> = FIELDS.iter().map(|(name, _)| *name).collect();
        return Err(Problem::bad_request(
            "unknown_field",
            format!(
                "unknown field {unknown:?}; the fields are {}",
                names.join(", ")
            ),
        ));
    }
    if let Some(name) = object.repeated {
        let known = FIELDS.iter().find(|(f, _)| *f == name).map(|(f, _)| *f);
        let problem = Problem::bad_request(
            "duplicate_field",
            format!(
                "field {name:?} is given more than once; JSON readers disagree on which one counts, so give each field once"
            ),
        );
        return Err(match known {
            Some(field) => problem.field(field),
            None => problem,
        });
    }
    let adapter = required(&fields, "adapter", "missing_field")?;
    let target = required(&fields, "target", "missing_field")?;
    let text = required(&fields, "text", "missing_field")?;
    let reply_to = string(&fields, "reply_to")?;
    let idempotency_key = required(&fields, "idempotency_key", "missing_idempotency_key")?;
    let policy = match string(&fields, "policy")?.as_deref() {
        None | Some("at-most-once") => Policy::AtMostOnce,
        Some("at-least-once") => Policy::AtLeastOnce,
        Some(other) => {
            return Err(Problem::bad_request(
                "invalid_field",
                format!("policy {other:?} is not a policy: use {}", hint("policy")),
            )
            .field("policy"))
        }
    };
    let attachments = match fields.get("attachments") {
        None | Some(Value::Null) => vec![],
        Some(Value::Array(ids)) if ids.iter().all(Value::is_string) => ids
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Some(_) => {
            return Err(Problem::bad_request(
                "invalid_field",
                format!(
                    "attachments must be an array of strings: {}",
                    hint("attachments")
                ),
            )
            .field("attachments"))
        }
    };
    let request = Request {
        files: vec![],
        adapter,
        target,
        text,
        reply_to,
        idempotency_key,
        policy,
    };
    Ok((request, attachments))
}

fn string(fields: &Map<String, Value>, name: &'static str) -> Result<Option<String>, Problem> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Problem::bad_request(
            "invalid_field",
            format!("{name} must be a string: {}", hint(name)),
        )
        .field(name)),
    }
}

fn required(
    fields: &Map<String, Value>,
    name: &'static str,
    code: &'static str,
) -> Result<String, Problem> {
    string(fields, name)?.ok_or_else(|| {
        Problem::bad_request(code, format!("{name} is required: {}", hint(name))).field(name)
    })
}

/// The outbox's refusal as an answer: its own code and words; a 4xx when the request was at
/// fault (409 for a key already used for another message), a 500 when the gateway was, and a
/// 503 when it has no outbox this run or is not its cluster's active.
fn refused(r: Refused) -> Problem {
    let status = match (r.client_error, r.code) {
        (true, "idempotency_key_reused") => StatusCode::CONFLICT,
        (true, _) => StatusCode::BAD_REQUEST,
        (false, "outbox_unavailable" | "not_active") => StatusCode::SERVICE_UNAVAILABLE,
        (false, _) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let problem = Problem::new(status, r.code, r.message);
    let field = match r.code {
        "unknown_adapter" => Some("adapter"),
        "bad_target" => Some("target"),
        "empty_text" | "text_too_long" | "caption_too_long" => Some("text"),
        "files_unsupported" | "too_many_files" | "file_too_large" | "files_in_cluster" => {
            Some("attachments")
        }
        "missing_idempotency_key" | "bad_idempotency_key" | "idempotency_key_reused" => {
            Some("idempotency_key")
        }
        _ => None,
    };
    match field {
        Some(f) if r.client_error => problem.field(f),
        _ => problem,
    }
}

async fn get_message(
    State(ctx): State<Arc<Ctx>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, Problem> {
    let Path(id) = id.map_err(|e| Problem::bad_request("bad_path", e.body_text()))?;
    match ctx.state.messages.get(&id) {
        Some(message) => Ok(Json(message).into_response()),
        None => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "unknown_message",
            format!(
                "no message with id {id:?}; ids are the `id` that POST /v1/messages answered with"
            ),
        )),
    }
}

async fn health(State(ctx): State<Arc<Ctx>>) -> Result<Response, Problem> {
    let path = ctx.state.state_file.clone();
    let read = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || StateFile::load(&path, Owner::SelfOrRoot)).await
    };
    match read {
        Ok(Ok(Some(state))) => Ok(Json(state).into_response()),
        Ok(Ok(None)) => Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no_snapshot",
            format!(
                "the gateway has not written {} yet; it does on its first tick, within 5 seconds of starting: ask again then",
                path.display()
            ),
        )),
        Ok(Err(e)) => Err(Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "state_unreadable",
            crate::error_chain::one_line(&e),
        )),
        Err(e) => Err(Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("reading the state file failed: {e}"),
        )),
    }
}
